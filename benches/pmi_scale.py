"""Scale: count 1-4-grams of a synthetic Zipf corpus (vocab 30,522) under a memory budget.

    nice python benches/pmi_scale.py --tokens 500000000 --memory-gb 8 --threads 2

Prints wall time per phase, total wall time and the process's peak RSS (VmHWM: corpus array,
counting buffers and interpreter together). The corpus is generated chunk by chunk into one
uint32 array; the table goes to --out (deleted afterwards unless --keep).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from dense_pt import _native
from dense_pt.pmi import build_arrays
from pmi_common import VOCAB, zipf_corpus


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=500_000_000)
    ap.add_argument("--memory-gb", type=float, default=8.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-n", type=int, default=4)
    ap.add_argument("--out", type=Path, default=Path("bench-output/pmi-scale.ngram"))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()

    t0 = time.perf_counter()
    values, offsets = zipf_corpus(args.tokens)
    t_gen = time.perf_counter() - t0
    print(
        f"corpus: {len(values):,} tokens, {len(offsets) - 1:,} passages, generated in {t_gen:.1f} s",
        flush=True,
    )

    start = time.perf_counter()
    last: dict[str, str | None] = {"phase": None}

    def progress(phase: str, done: int, total: int) -> None:
        if phase != last["phase"] or done == total:
            print(f"  {time.perf_counter() - start:8.1f} s  {phase}: {done:,}/{total:,}", flush=True)
            last["phase"] = phase

    args.out.parent.mkdir(parents=True, exist_ok=True)
    stats = build_arrays(
        values,
        offsets,
        args.out,
        vocab_size=VOCAB,
        max_n=args.max_n,
        memory_gb=args.memory_gb,
        threads=args.threads,
        progress=progress,
    )
    wall = time.perf_counter() - start
    size = args.out.stat().st_size
    peak = _native.peak_rss_bytes() or 0
    result = {
        "tokens": len(values),
        "memory_gb": args.memory_gb,
        "threads": args.threads,
        "build_wall_s": round(wall, 1),
        "peak_rss_gb": round(peak / 2**30, 2),
        "table_gb": round(size / 2**30, 2),
        "N": stats["totals"],
        "entries": stats["entries"],
        "passes": stats["passes"],
        "spilled_runs": stats["spilled_runs"],
        "buffer_keys": stats["buffer_keys"],
    }
    print(json.dumps(result))
    print(
        f"build: {wall / 60:.1f} min (target <= 20), peak RSS {peak / 2**30:.2f} GB (target <= 8), "
        f"table {size / 2**30:.2f} GB"
    )
    if not args.keep:
        args.out.unlink()


if __name__ == "__main__":
    main()
