"""Shared helpers of the PMI benchmarks: a synthetic Zipf corpus generated in place."""

from __future__ import annotations

import numpy as np

VOCAB = 30_522


def zipf_corpus(
    tokens: int, vocab: int = VOCAB, seed: int = 0, mean_len: int = 70, chunk: int = 1 << 23
) -> tuple[np.ndarray, np.ndarray]:
    """``tokens`` ids with P(rank r) ~ 1/r over ``vocab`` (rank 0 -> id 5, keeping 0..4 for specials),
    cut into passages of uniform random length in [mean_len/2, 3*mean_len/2]. Written chunk by
    chunk into one preallocated uint32 array (no full-size temporaries)."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab - 5 + 1)
    cdf = np.cumsum(p / p.sum())
    values = np.empty(tokens, dtype=np.uint32)
    for s in range(0, tokens, chunk):
        e = min(tokens, s + chunk)
        u = rng.random(e - s)
        values[s:e] = np.searchsorted(cdf, u, side="right").clip(max=vocab - 6) + 5
    lengths = rng.integers(mean_len // 2, 3 * mean_len // 2 + 1, size=tokens // (mean_len // 2) + 2)
    ends = np.cumsum(lengths)
    ends = ends[ends < tokens]
    offsets = np.concatenate([[0], ends, [tokens]]).astype(np.int64)
    return values, offsets
