"""Plain-Python (Counter-based) reference of the n-gram definitions, for checking the Rust core."""

from __future__ import annotations

import math
from collections import Counter


def count_ngrams(passages: list[list[int]], max_n: int) -> tuple[list[Counter], list[int]]:
    """c(g) per order (index n-1) and N_n = sum over passages of max(0, len - n + 1)."""
    counts: list[Counter] = [Counter() for _ in range(max_n)]
    totals = [0] * max_n
    for p in passages:
        for n in range(1, max_n + 1):
            for s in range(len(p) - n + 1):
                counts[n - 1][tuple(p[s : s + n])] += 1
                totals[n - 1] += 1
    return counts, totals


def pruned(counts: list[Counter], min_count: int) -> list[Counter]:
    """Drop n-grams of order >= 2 seen fewer than min_count times; unigrams stay exact."""
    return [
        c if n == 0 else Counter({g: v for g, v in c.items() if v >= min_count}) for n, c in enumerate(counts)
    ]


def pmi(counts: list[Counter], totals: list[int], g: tuple[int, ...]) -> float | None:
    n = len(g)
    c = counts[n - 1].get(g, 0)
    if c == 0:
        return None
    return math.log(c / totals[n - 1]) - sum(math.log(counts[0][(w,)] / totals[0]) for w in g)


def ami(counts: list[Counter], totals: list[int], p: list[int], window: int = 4) -> list[float]:
    out = []
    for i in range(len(p)):
        left = right = 0.0
        for j in range(1, window):
            if i - j >= 0:
                v = pmi(counts, totals, tuple(p[i - j : i + 1]))
                left += 0.0 if v is None else v
            if i + j < len(p):
                v = pmi(counts, totals, tuple(p[i : i + j + 1]))
                right += 0.0 if v is None else v
        out.append(left / (window - 1) + right / (window - 1))
    return out
