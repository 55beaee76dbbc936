"""Per-call cost of the maskers' Python entry points, two builds side by side.

What a call costs beyond the masking itself: argument reading, dtype checks, conversions and the
output array. Measured on a 1-row batch (fixed cost) and a 128 x 144 batch, for the common call
(2-d C-contiguous int64 / bool / float32 arrays) and for calls that need a conversion or carry
word ids, special ids or row keys. Each case is the median CPU time of ``--reps`` calls.

    python benches/bench_masking_calls.py --against /tmp/oldpkg [--rounds 5] [--reps 2000]

``--against DIR`` is another build's ``python/`` folder (with its ``_native`` module): each case
runs in a child process per build, the two builds back to back, ``--rounds`` times, and the ratio
of the medians is printed per case (other / this: above 1 means this checkout is faster). Cases
alternate at this grain because a shared machine's load changes within seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent / "python"


def cases():
    import numpy as np

    from dense_pt.masking import importance_mask, nested_masks, random_mask, replace

    out: dict[str, Callable[..., object]] = {}  # lambdas binding their arrays as defaults
    for b in (1, 128):
        rng = np.random.default_rng(0)
        ids = rng.integers(5, 8000, size=(b, 144), dtype=np.int64)
        att = np.ones((b, 144), dtype=np.int64)
        att[:, 100:] = 0
        special = np.zeros((b, 144), dtype=bool)
        special[:, 0] = True
        imp = rng.random((b, 144), dtype=np.float32)
        words = np.repeat(np.arange(72), 2)[None, :].repeat(b, 0)
        keys = np.arange(b, dtype=np.uint64)
        mask = random_mask(ids, att, 0.3, 1, special)
        out[f"random_mask B={b}"] = lambda ids=ids, att=att, s=special: random_mask(ids, att, 0.3, 1, s)
        out[f"importance_mask B={b}"] = lambda ids=ids, att=att, i=imp, s=special: importance_mask(
            ids, att, i, 0.5, 1, 1.0, s
        )
        out[f"nested_masks B={b}"] = lambda ids=ids, att=att, s=special: nested_masks(
            ids, att, 0.3, 0.5, 1, None, s
        )
        out[f"replace B={b}"] = lambda ids=ids, m=mask: replace(
            ids, m, 4, 8000, 1, special_ids=(0, 1, 2, 3, 4)
        )
        if b == 1:
            continue
        att32 = att.astype(np.int32)
        att16 = att.astype(np.int16)
        out["random_mask int16 attention"] = lambda ids=ids, a=att16, s=special: random_mask(
            ids, a, 0.3, 1, s
        )
        out["random_mask int32 + numpy seed"] = lambda ids=ids, a=att32, s=special: random_mask(
            ids, a, 0.3, np.uint64(1), s
        )
        out["random_mask word_ids + row_keys"] = lambda ids=ids, att=att, s=special, w=words, k=keys: (
            random_mask(ids, att, 0.3, 1, s, word_ids=w, row_keys=k)
        )
        out["importance_mask special_ids"] = lambda ids=ids, att=att, i=imp: importance_mask(
            ids, att, i, 0.5, 1, special_ids=(0, 1, 2, 3, 4)
        )
    return out


def child(case: str, reps: int) -> None:
    fn = cases()[case]
    for _ in range(20):
        fn()
    times = []
    for _ in range(reps):
        t = time.process_time_ns()
        fn()
        times.append(time.process_time_ns() - t)
    json.dump(statistics.median(times) / 1000, sys.stdout)


def run(python_path: Path, case: str, reps: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(python_path), "OMP_NUM_THREADS": "1"}
    cmd = ["taskset", "-c", "0", sys.executable, __file__, "--child", case, "--reps", str(reps)]
    return json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", type=Path, help="the other build's python/ folder")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.reps)
    builds = {"this": HERE, **({"other": args.against} if args.against else {})}
    seen: dict[str, dict[str, list[float]]] = {k: {} for k in builds}
    names = list(cases())
    for _ in range(args.rounds):
        for case in names:
            for label, path in builds.items():  # back to back: load changes hit both builds alike
                seen[label].setdefault(case, []).append(run(path, case, args.reps))
    med = {label: {c: statistics.median(v) for c, v in d.items()} for label, d in seen.items()}
    head = f"{'case':<34}{'this (us)':>11}" + (
        f"{'other (us)':>12}{'other/this':>12}" if args.against else ""
    )
    print(head)
    for case, us in med["this"].items():
        line = f"{case:<34}{us:>11.2f}"
        if args.against:
            o = med["other"][case]
            line += f"{o:>12.2f}{o / us:>12.2f}"
        print(line)


if __name__ == "__main__":
    main()
