"""The per-order counting path of ``dense_pt.pmi`` (``count_order`` in rust/core/src/pmi/count.rs).

    nice python benches/pmi_per_order.py [--tokens 5000000] [--threads 2] [--repeat 3]

``pmi_count.py`` measures the default, fused path; this one forces the per-order path, which the
fused path leaves to corpora whose keys do not fit one buffer or 64 padded bits:

- ``in memory``: a 65,536-id vocabulary (16 bits a token, but 17 for the fused path's padded
  tokens: its 4-gram keys no longer fit 64 bits) and an 8 GB budget: one pass per order;
- ``spilled``: the same corpus under a budget whose key buffer is smaller than the most frequent
  first token's n-grams: several passes per order, runs spilled to disk and k-way merged.

Each case prints the best wall/CPU seconds of ``--repeat`` runs, the path's statistics (passes,
spilled runs, fused) and a digest of every order's keys and counts, so that two builds (before /
after a change) can be compared for speed and for identical output.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time

import numpy as np

from dense_pt.pmi import count_arrays
from pmi_common import zipf_corpus

VOCAB = 1 << 16


def digest(orders: list[tuple[np.ndarray, np.ndarray]]) -> str:
    h = hashlib.sha256()
    for keys, counts in orders:
        h.update(np.ascontiguousarray(keys).tobytes())
        h.update(np.ascontiguousarray(counts).tobytes())
    return h.hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=5_000_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--spill-mb", type=float, default=64.0, help="budget of the spilled case")
    args = ap.parse_args()
    values, offsets = zipf_corpus(args.tokens, vocab=VOCAB)
    print(f"sample: {len(values):,} tokens, {len(offsets) - 1:,} passages, Zipf over {VOCAB:,} ids")
    with tempfile.TemporaryDirectory() as spill:
        for name, budget in (("in memory", 8 << 30), ("spilled", int(args.spill_mb * (1 << 20)))):
            best_w = best_c = float("inf")
            for _ in range(args.repeat):
                t0, c0 = time.perf_counter(), time.process_time()
                orders, stats = count_arrays(
                    values,
                    offsets,
                    vocab_size=VOCAB,
                    max_n=4,
                    memory_gb=None,
                    memory_bytes=budget,
                    threads=args.threads,
                    spill_dir=spill,
                )
                best_w = min(best_w, time.perf_counter() - t0)
                best_c = min(best_c, time.process_time() - c0)
            print(
                f"{name:<10} wall {best_w:6.2f} s  cpu {best_c:6.2f} s  passes {stats['passes']:>4}  "
                f"spilled runs {stats['spilled_runs']:>4}  fused {stats['fused']}  digest {digest(orders)}"
            )


if __name__ == "__main__":
    main()
