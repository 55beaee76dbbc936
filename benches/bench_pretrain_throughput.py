"""Pre-training throughput (sequences/s) of a model size on this machine, per method.

    python benches/bench_pretrain_throughput.py --store STORE --config minilm \
        [--methods cdmae simlm mlm] [--batch-size 16] [--steps 12] [--precision auto]

``--config`` is ``minilm`` (6 layers, hidden 384, all-MiniLM-L6-v2's shape), ``bert-base``
(12 x 768) or a path to a config.json. Random init: throughput does not depend on the weights.
The first logged interval is warm-up and is left out. Data comes from the native collator in 2
DataLoader workers, so the data stall is reported too.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

SHAPES = {
    "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536),
    "bert-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--config", default="minilm")
    ap.add_argument("--methods", nargs="+", default=["cdmae", "simlm", "mlm"])
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--max-length", type=int, default=144)
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = ap.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from dense_pt.data.store import CorpusStore
    from dense_pt.pretrain import build_config, run_pretrain

    store = CorpusStore.open(args.store)
    device = (
        torch.cuda.get_device_name(0)
        if torch.cuda.is_available()
        else f"CPU ({torch.get_num_threads()} threads)"
    )
    print(f"device: {device}; model {args.config}; batch {args.batch_size}; length {args.max_length}")
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        if args.config in SHAPES:
            cfg_path = tmp / "config.json"
            cfg_path.write_text(
                json.dumps(
                    {
                        "model_type": "bert",
                        "vocab_size": store.vocab_size,
                        "max_position_embeddings": 512,
                        **SHAPES[args.config],
                    }
                )
            )
        else:
            cfg_path = Path(args.config)
        results = {}
        for method in args.methods:
            if method == "cdmae" and not store.has_column("importance"):
                print("cdmae: skipped (store has no importance column)")
                continue
            out = tmp / method
            cfg = build_config(
                top={
                    "method": method,
                    "model": str(cfg_path),
                    "corpus": str(store.path),
                    "out": str(out),
                    "max_length": args.max_length,
                },
                train={
                    "max_steps": args.steps,
                    "batch_size": args.batch_size,
                    "log_every": max(1, args.steps // 4),
                    "save_every": 10**6,
                    "num_workers": args.workers,
                    "precision": args.precision,
                    "warmup": 1,
                    "threads": args.threads,
                },
            )
            run_pretrain(cfg, progress=False)
            recs = [json.loads(line) for line in open(out / "log.jsonl")][1:]
            results[method] = (
                statistics.mean(r["seq_per_s"] for r in recs),
                statistics.mean(r["data_wait"] for r in recs),
            )
            print(
                f"{method:12s} {results[method][0]:8.1f} seq/s   data stall {100 * results[method][1]:.2f}%"
            )
        if "mlm" in results:
            for m, (sps, _) in results.items():
                print(f"{m:12s} {sps / results['mlm'][0]:.2f}x the speed of mlm")


if __name__ == "__main__":
    main()
