"""AMI scoring throughput (tokens/s) of the Rust core, with the Counter/dict reference for scale.

    nice python benches/pmi_ami.py --tokens 5000000 --threads 2

Builds the 1-4-gram table of a Zipf sample, then scores every token with window 4 (3 lookups per
token) using 1 and --threads threads; the pure-Python reference (dict lookups, same definitions)
scores a sub-sample and is checked against the Rust values.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from dense_pt.pmi import NgramTable, build_arrays
from pmi_common import VOCAB, zipf_corpus


def python_ami(
    passages: list[list[int]], counts: list[Counter], totals: list[int], window: int
) -> list[float]:
    out = []
    ln_n = [math.log(t) for t in totals]
    lp1 = {g[0]: math.log(c) - ln_n[0] for g, c in counts[0].items()}

    def pmi(g: tuple[int, ...]) -> float:
        c = counts[len(g) - 1].get(g)
        return 0.0 if c is None else math.log(c) - ln_n[len(g) - 1] - sum(lp1[w] for w in g)

    for p in passages:
        for i in range(len(p)):
            s = 0.0
            for j in range(1, window):
                if i - j >= 0:
                    s += pmi(tuple(p[i - j : i + 1]))
                if i + j < len(p):
                    s += pmi(tuple(p[i : i + j + 1]))
            out.append(s / (window - 1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=5_000_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--python-tokens", type=int, default=200_000)
    args = ap.parse_args()
    values, offsets = zipf_corpus(args.tokens, seed=1)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.ngram"
        build_arrays(values, offsets, path, vocab_size=VOCAB, max_n=4, threads=args.threads)
        table = NgramTable.open(path)
        rows = []
        for threads in sorted({1, args.threads}):
            t0, c0 = time.perf_counter(), time.process_time()
            scores = table.ami_ragged(values, offsets, window=4, threads=threads)
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            rows.append((f"rust ({threads} thread{'s' if threads > 1 else ''})", dt, cpu, len(values) / dt))

        # Python reference on a sub-sample (counts of the sub-sample's n-grams from the table).
        end = int(np.searchsorted(offsets, args.python_tokens))
        passages = [values[a:b].tolist() for a, b in itertools.pairwise(offsets[: end + 1])]
        counts: list[Counter] = [Counter() for _ in range(4)]
        for p in passages:
            for n in range(1, 5):
                for s in range(len(p) - n + 1):
                    g = tuple(p[s : s + n])
                    if g not in counts[n - 1]:
                        counts[n - 1][g] = table.count(g)
        totals = list(table.N.values())
        t0, c0 = time.perf_counter(), time.process_time()
        ref = python_ami(passages, counts, totals, 4)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        scale = len(values) / len(ref)
        rows.append(("python dict reference", dt * scale, cpu * scale, len(ref) / dt))
        np.testing.assert_allclose(scores[: len(ref)], ref, rtol=1e-5, atol=1e-5)
    print(f"AMI (window 4) over {len(values):,} tokens, table of the same sample")
    print(f"{'scorer':<26}{'wall s':>10}{'cpu s':>10}{'tokens/s':>14}")
    for name, wall, cpu, tps in rows:
        print(f"{name:<26}{wall:>10.2f}{cpu:>10.2f}{tps:>14,.0f}")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} (tokens/s is wall-clock)")
    print(f"(python timed on {len(ref):,} tokens and scaled per token; rust == python within 1e-5)")


if __name__ == "__main__":
    main()
