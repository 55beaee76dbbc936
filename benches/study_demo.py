"""`dense-pt study` on the generated demo corpus with a small random-init encoder: does bottleneck
pre-training help a retriever that starts from nothing? (issue 15 §1; BENCHMARKS.md "Pre-training
study on the demo corpus".)

Writes the corpus (a larger draw of the tests' topic-word generator, tests/pipeline_fixtures.py), a random-init BERT with a
WordPiece tokenizer trained on it, a pipeline file (R1 -> mine -> R2, no re-ranker) and a study
file, then runs the study. Every objective gets the same pre-training budget; every cell is
fine-tuned identically. Re-running continues where it stopped.

    OMP_NUM_THREADS=1 python benches/study_demo.py --out ../runs/study-demo
    OMP_NUM_THREADS=1 python benches/study_demo.py --out /tmp/s --seeds 1 --pretrain-steps 5 --finetune-steps 5
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the test fixtures

OBJECTIVES = ["none", "mlm", "cdmae", "simlm", "seed", "condenser", "contrastive"]


def write_inputs(out: Path, args) -> Path:
    from pipeline_fixtures import synthetic_corpus, tiny_model, write_beir

    docs, queries, qrels = synthetic_corpus(
        n_per_topic=args.docs_per_topic, queries_per_topic=args.queries_per_topic
    )
    beir = write_beir(out / "data", docs, queries, qrels)
    model = out / "model"
    if not (model / "config.json").exists():
        tiny_model(
            model, [t for _, t in docs] + list(queries.values()), hidden=args.hidden, layers=args.layers
        )
    train = {"max_steps": args.finetune_steps, "batch_size": 32, "lr": args.finetune_lr, "warmup": 0.1,
             "save_every": args.finetune_steps, "log_every": 10, "precision": "fp32", "threads": 1}  # fmt: skip
    retriever = {
        "loss": "infonce",
        "group_size": 4,
        "query_max_length": 16,
        "passage_max_length": 64,
        "train": train,
    }
    pipeline = {
        "out": "unused", "seed": 13, "profile": "cpu",
        "data": {"corpus": str(beir / "corpus.jsonl"), "queries": str(beir / "queries.jsonl"),
                 "qrels": str(beir / "qrels" / "train.tsv"), "dev_fraction": 0.25, "max_length": 64},
        "model": {"init": str(model)},
        "eval": {"k": 100, "measures": ["nDCG@10", "R@100", "RR@10"]},
        "mine": {"depth": 30, "num": 8, "bm25_depth": 30},
        "r1": retriever, "r2": retriever,
        "reranker": {"enabled": False, "max_length": 64, "query_max_length": 16},
        "distill": {"enabled": False, "passage_max_length": 64, "query_max_length": 16},
    }  # fmt: skip
    study = {
        "out": str(out / "study"),
        "pipeline": "pipeline.toml",
        "objectives": args.objectives,
        "seeds": args.seeds,
        "pretrain": {
            "max_length": 64,
            "train": {
                "max_steps": args.pretrain_steps,
                "batch_size": 32,
                "lr": 5e-4,
                "warmup": 0.1,
                "save_every": args.pretrain_steps,
                "log_every": 20,
                "threads": 1,
            },
        },
        "options": {"simlm": {"generator": "joint"}},
    }
    _write_toml(out / "pipeline.toml", pipeline)
    _write_toml(out / "study.toml", study)
    return out / "study.toml"


def _write_toml(path: Path, data: dict) -> None:
    """A small TOML writer for the nested dicts above (values are JSON-compatible TOML literals)."""

    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
        return json.dumps(v)

    top = [f"{k} = {value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    tables = [f"[{k}]\n" + "\n".join(f"{kk} = {value(vv)}" for kk, vv in v.items()) for k, v in data.items()
              if isinstance(v, dict)]  # fmt: skip
    path.write_text("\n".join(top) + "\n\n" + "\n\n".join(tables) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--objectives", nargs="+", default=OBJECTIVES)
    ap.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    ap.add_argument("--pretrain-steps", type=int, default=400)
    ap.add_argument("--finetune-steps", type=int, default=100)
    ap.add_argument("--finetune-lr", type=float, default=3e-3)
    ap.add_argument("--docs-per-topic", type=int, default=40)
    ap.add_argument("--queries-per-topic", type=int, default=20)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=4)
    args = ap.parse_args()

    import torch

    from dense_pt.pipeline import load_study, run_study
    from dense_pt.pipeline.study import render_markdown

    torch.set_num_threads(1)
    args.out = args.out.resolve()  # the files written below name each other by absolute path
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    res = run_study(load_study(write_inputs(args.out, args)), log=print)
    print(render_markdown(res))
    print(f"wall: {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
