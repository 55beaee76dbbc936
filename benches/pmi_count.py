"""1-4-gram counting on one sample: Rust (dense_pt.pmi) vs numpy np.unique vs a Python Counter.

    nice python benches/pmi_count.py --tokens 20000000 --threads 2

All three count the same n-grams (never across passages); the numpy and Counter results are
checked against the table. The Counter reference runs on a sub-sample (``--counter-tokens``) and
is scaled per token, as printed.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from dense_pt.pmi import NgramTable, build_arrays
from pmi_common import VOCAB, zipf_corpus


def numpy_counts(
    values: np.ndarray, offsets: np.ndarray, max_n: int, bits: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """np.unique over packed int64 keys of every n-gram start that stays inside its passage."""
    x = values.astype(np.int64)
    lens = np.diff(offsets)
    out = []
    for n in range(1, max_n + 1):
        m = len(x) - n + 1
        key = x[:m].copy()
        for j in range(1, n):
            key <<= bits
            key |= x[j : j + m]
        # A start is valid when the passage still has n tokens from it.
        ends = np.repeat(offsets[1:], lens)[:m]
        key = key[np.arange(m) + n <= ends]
        out.append(np.unique(key, return_counts=True))
    return out


def counter_counts(values: np.ndarray, offsets: np.ndarray, max_n: int) -> list[Counter]:
    counts = [Counter() for _ in range(max_n)]
    for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        p = values[a:b].tolist()
        for n in range(1, max_n + 1):
            c = counts[n - 1]
            for s in range(len(p) - n + 1):
                c[tuple(p[s : s + n])] += 1
    return counts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=20_000_000)
    ap.add_argument("--counter-tokens", type=int, default=1_000_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-n", type=int, default=4)
    args = ap.parse_args()
    values, offsets = zipf_corpus(args.tokens)
    print(f"sample: {len(values):,} tokens, {len(offsets) - 1:,} passages, Zipf over {VOCAB:,} ids")
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "t.ngram"
        t0, c0 = time.perf_counter(), time.process_time()
        stats = build_arrays(
            values, offsets, out, vocab_size=VOCAB, max_n=args.max_n, threads=args.threads, memory_gb=8
        )
        t_rust, c_rust = time.perf_counter() - t0, time.process_time() - c0
        table = NgramTable.open(out)
        table_bytes = out.stat().st_size
        entries = list(table.entries.values())

        t0, c0 = time.perf_counter(), time.process_time()
        np_res = numpy_counts(values, offsets, args.max_n, 15)
        t_numpy, c_numpy = time.perf_counter() - t0, time.process_time() - c0
        assert [len(u) for u, _ in np_res] == entries, ([len(u) for u, _ in np_res], entries)
        assert [int(c.sum()) for _, c in np_res] == stats["totals"]

        sub_end = int(np.searchsorted(offsets, args.counter_tokens))
        sub_off = offsets[: sub_end + 1]
        sub_tokens = int(sub_off[-1])
        t0, c0 = time.perf_counter(), time.process_time()
        ref = counter_counts(values, sub_off, args.max_n)
        t_counter_sub, c_counter_sub = time.perf_counter() - t0, time.process_time() - c0
        t_counter = t_counter_sub * len(values) / sub_tokens
        c_counter = c_counter_sub * len(values) / sub_tokens
        sub_table = Path(d) / "sub.ngram"
        build_arrays(values[:sub_tokens], sub_off, sub_table, vocab_size=VOCAB, max_n=args.max_n, threads=1)
        st = NgramTable.open(sub_table)
        assert [len(c) for c in ref] == list(st.entries.values())
        for g, c in list(ref[3].items())[:1000]:
            assert st.count(g) == c

    print(f"{'counter':<28}{'wall s':>10}{'cpu s':>10}{'Mtokens/s':>12}")
    print(
        f"{'rust (' + str(args.threads) + ' threads)':<28}{t_rust:>10.2f}{c_rust:>10.2f}{len(values) / t_rust / 1e6:>12.2f}"
    )
    print(f"{'numpy np.unique':<28}{t_numpy:>10.2f}{c_numpy:>10.2f}{len(values) / t_numpy / 1e6:>12.2f}")
    print(
        f"{'python Counter (scaled)':<28}{t_counter:>10.2f}{c_counter:>10.2f}{len(values) / t_counter / 1e6:>12.2f}"
        f"   (timed on {sub_tokens:,} tokens: {t_counter_sub:.2f} s, scaled per token)"
    )
    print(f"speedup vs numpy:   {t_numpy / t_rust:.1f}x wall, {c_numpy / c_rust:.1f}x cpu (target >= 5x)")
    print(
        f"speedup vs Counter: {t_counter / t_rust:.1f}x wall, {c_counter / c_rust:.1f}x cpu (target >= 50x)"
    )
    print(
        f"rust wall time includes writing the {table_bytes / 1e6:.0f} MB table file; load average {os.getloadavg()[0]:.1f}"
    )
    print(f"distinct n-grams per order: {entries}; rust peak RSS {stats['peak_rss_bytes'] / 2**30:.2f} GB")


if __name__ == "__main__":
    main()
