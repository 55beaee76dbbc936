"""Pre-training data path: the loader's own sequences/s, and the data-loading stall as a fraction of
step time while a tiny model trains (CPU).

    python benches/bench_pretrain_loader.py --store STORE [--method cdmae] [--batch-size 32]

Measured side by side in one run:
  1. the collator called in-process (rows -> ready numpy batch), median of repetitions;
  2. the IndexedBatchSource (DataLoader) with 0, 1 and 2 worker processes, no training;
  3. training a tiny BERT (2 layers, hidden 64) with the trainer, 0 and 2 workers: the fraction of
     step time spent waiting for data (the trainer's ``data_wait``) and the steps' seq/s.
Without --store a synthetic store is built (random WordPiece text, lengths like SciFact's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def synthetic_store(path: Path, n: int = 2000):
    from dense_pt.data.store import build_store_from_texts
    from dense_pt.data.tokenizer import train_wordpiece

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(3000)]
    docs = [(f"p{i}", " ".join(rng.choice(words, int(rng.integers(120, 300))))) for i in range(n)]
    tok = train_wordpiece([t for _, t in docs[:500]], vocab_size=4000, min_frequency=1)
    store = build_store_from_texts(path, docs, tok)
    values, offsets = store.ragged("input_ids")
    store.add_column("importance", rng.random(len(values)).astype(np.float32), offsets)
    return store


def bench_collator(make_batch, n_rows: int, batch: int, reps: int) -> float:
    rng = np.random.default_rng(1)
    times = []
    for r in range(reps):
        rows = rng.choice(n_rows, batch, replace=False).astype(np.int64)
        t = time.perf_counter()
        make_batch(rows, r)
        times.append(time.perf_counter() - t)
    return batch / statistics.median(times)


def bench_source(make_batch, n_rows: int, batch: int, workers: int, batches: int) -> float:
    from dense_pt.training import IndexedBatchSource

    src = IndexedBatchSource(n_rows, batch, make_batch, seed=0, num_workers=workers)
    it = src.iter_epoch(0, 0, 0, 1)
    next(it)  # worker start-up is not throughput
    t = time.perf_counter()
    n = 0
    for _ in range(batches):
        try:
            next(it)
        except StopIteration:
            break
        n += 1
    return n * batch / (time.perf_counter() - t)


def generator_options(method: str) -> dict:
    """simlm / enc-dec-rtd need a generator: a joint one here (nothing to download)."""
    from dense_pt.objectives import uses_generator

    return {"generator": "joint"} if uses_generator(method) else {}


def bench_training(
    store, method: str, batch: int, workers: int, steps: int, max_length: int, tmp: Path, threads: int
) -> dict:
    from dense_pt.pretrain import build_config, run_pretrain

    cfg_path = tmp / "tiny.json"
    cfg_path.write_text(
        json.dumps(
            {
                "model_type": "bert",
                "vocab_size": store.vocab_size,
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "intermediate_size": 128,
                "max_position_embeddings": max(160, max_length),
            }
        )
    )
    out = tmp / f"train-{method}-w{workers}"
    cfg = build_config(
        options=generator_options(method),
        top={
            "method": method,
            "model": str(cfg_path),
            "corpus": str(store.path),
            "out": str(out),
            "max_length": max_length,
        },
        train={
            "max_steps": steps,
            "batch_size": batch,
            "save_every": 10**6,
            "log_every": 5,
            "num_workers": workers,
            "warmup": 1,
            "threads": threads,
        },
    )
    run_pretrain(cfg, progress=False)
    recs = [json.loads(line) for line in open(out / "log.jsonl")][1:]  # first interval: warm-up
    return {
        "data_wait": statistics.mean(r["data_wait"] for r in recs),
        "seq_per_s": statistics.mean(r["seq_per_s"] for r in recs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path)
    ap.add_argument("--method", default="cdmae")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=144)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = ap.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from dense_pt.data.store import CorpusStore
    from dense_pt.objectives import MethodOptions, resolve_options
    from dense_pt.pretrain.data import make_collate_fn

    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        store = CorpusStore.open(args.store) if args.store else synthetic_store(tmp / "store")
        opts = resolve_options(args.method, MethodOptions(**generator_options(args.method)))
        make_batch = make_collate_fn(store, args.method, opts, args.max_length, seed=0)
        print(
            f"store: {store.path} ({len(store)} passages), method {args.method}, batch {args.batch_size}, "
            f"length {args.max_length}, torch threads {torch.get_num_threads()}"
        )
        col = bench_collator(make_batch, len(store), args.batch_size, args.reps)
        print(f"collator in-process           : {col:10.0f} seq/s")
        src = {}
        for w in (0, 1, 2):
            src[w] = bench_source(make_batch, len(store), args.batch_size, w, args.batches)
            print(f"DataLoader, {w} worker(s)       : {src[w]:10.0f} seq/s  ({src[w] / col:.2f}x in-process)")
        train = {}
        for w in (0, 2):
            train[w] = bench_training(
                store, args.method, args.batch_size, w, args.steps, args.max_length, tmp, args.threads
            )
            print(
                f"training tiny BERT, {w} worker(s): {train[w]['seq_per_s']:8.0f} seq/s, "
                f"data stall {100 * train[w]['data_wait']:.2f}% of step time"
            )
        print(
            f"loader headroom: in-process collator / training consumption = {col / train[0]['seq_per_s']:.1f}x"
        )


if __name__ == "__main__":
    main()
