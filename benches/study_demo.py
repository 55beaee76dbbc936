"""`dense-pt study` on the demo corpus with a small random-init encoder: does bottleneck
pre-training help a retriever that starts from nothing? (issue 15 §1; BENCHMARKS.md "Pre-training
study on the demo corpus".)

Corpus: `dense_pt.demo.corpus` (the `dense-pt demo` data: 350 passages about fictional towns,
inventors and creatures, 854 queries of which about 60% are paraphrases that share few words with
their passage while other passages share the same river, colour or habitat). Fine-tuning trains on
its train judgements (596 queries); every cell is evaluated on its dev and test judgements together
(258 queries; the study tunes nothing, so both splits are held out, and together they halve the
noise of 86 dev queries alone). `--corpus synthetic` is the tests' topic-word generator, kept to
reproduce the first table in BENCHMARKS.md: its relevance within a topic is random by construction,
so no model can learn it and it cannot separate objectives.

Writes the data, a random-init BERT (4 layers, 64 wide) with a WordPiece tokenizer trained on the
corpus, a pipeline file (R1 -> mine -> R2, no re-ranker) and a study file, then runs the study.
Every objective gets the same pre-training budget; every cell is fine-tuned identically.
Re-running continues where it stopped.

    OMP_NUM_THREADS=1 python benches/study_demo.py --out ../runs/study-demo-corpus
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


def write_data(out: Path, args) -> tuple[Path, Path, Path | None, list[str]]:
    """(corpus, train qrels, held-out qrels (none for the synthetic corpus), texts for the tokenizer)."""
    if args.corpus == "synthetic":
        from pipeline_fixtures import synthetic_corpus, write_beir

        docs, queries, qrels = synthetic_corpus(
            n_per_topic=args.docs_per_topic, queries_per_topic=args.queries_per_topic
        )
        beir = write_beir(out / "data", docs, queries, qrels)
        return beir, beir / "qrels" / "train.tsv", None, [t for _, t in docs] + list(queries.values())
    from dense_pt.data import corpus_texts
    from dense_pt.demo.corpus import write_demo_beir

    beir = out / "data"
    if not (beir / "corpus.jsonl").exists():
        write_demo_beir(beir)
    heldout = beir / "qrels" / "heldout.tsv"
    rows = [
        line
        for split in ("dev", "test")
        for line in (beir / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]
    ]
    heldout.write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")
    train_queries = {
        line.split("\t")[0] for line in (beir / "qrels" / "train.tsv").read_text().splitlines()[1:]
    }
    queries = [json.loads(line) for line in (beir / "queries.jsonl").read_text().splitlines()]
    texts = [t for _, t in corpus_texts(beir / "corpus.jsonl")] + [
        q["text"] for q in queries if q["_id"] in train_queries
    ]
    return beir, beir / "qrels" / "train.tsv", heldout, texts


def write_inputs(out: Path, args) -> Path:
    from pipeline_fixtures import tiny_model

    beir, train_qrels, heldout, texts = write_data(out, args)
    model = out / "model"
    if not (model / "config.json").exists():
        tiny_model(model, texts, hidden=args.hidden, layers=args.layers, vocab_size=args.vocab_size)
    train = {"max_steps": args.finetune_steps, "batch_size": 32, "lr": args.finetune_lr, "warmup": 0.1,
             "save_every": args.finetune_steps, "log_every": 10, "precision": "fp32", "threads": 1}  # fmt: skip
    retriever = {
        "loss": "infonce",
        "group_size": 4,
        "query_max_length": args.query_max_length,
        "passage_max_length": 64,
        "train": train,
    }
    pipeline = {
        "out": "unused", "seed": 13, "profile": "cpu",
        "data": {"corpus": str(beir / "corpus.jsonl"), "queries": str(beir / "queries.jsonl"),
                 "qrels": str(train_qrels), "max_length": 64,
                 **({"dev_qrels": str(heldout)} if heldout else {"dev_fraction": 0.25})},
        "model": {"init": str(model)},
        "eval": {"k": 100, "measures": ["nDCG@10", "R@100", "RR@10"]},
        "mine": {"depth": 30, "num": 8, "bm25_depth": 30},
        "r1": retriever, "r2": retriever,
        "reranker": {"enabled": False, "max_length": 64, "query_max_length": args.query_max_length},
        "distill": {"enabled": False, "passage_max_length": 64, "query_max_length": args.query_max_length},
    }  # fmt: skip
    study = {
        "out": str(out / "study"),
        "pipeline": "pipeline.toml",
        "objectives": args.objectives,
        "seeds": args.seeds,
        **({"until": args.until} if args.until else {}),
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
        "options": {o: {"generator": "joint"} for o in args.objectives if o == "simlm"},
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
    ap.add_argument(
        "--finetune-lr", type=float, default=None, help="default demo 1e-3 (the demo's), synthetic 3e-3"
    )
    ap.add_argument("--corpus", choices=("demo", "synthetic"), default="demo")
    ap.add_argument(
        "--vocab-size", type=int, default=None, help="WordPiece vocabulary (default demo 3000, synthetic 300)"
    )
    ap.add_argument("--query-max-length", type=int, default=None, help="default demo 32, synthetic 16")
    ap.add_argument("--until", default=None, help="last pipeline stage of every cell (e.g. r1)")
    ap.add_argument("--docs-per-topic", type=int, default=40)
    ap.add_argument("--queries-per-topic", type=int, default=20)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=4)
    args = ap.parse_args()
    if args.vocab_size is None:
        args.vocab_size = 3000 if args.corpus == "demo" else 300
    if args.query_max_length is None:
        args.query_max_length = 32 if args.corpus == "demo" else 16
    if args.finetune_lr is None:
        args.finetune_lr = 1e-3 if args.corpus == "demo" else 3e-3

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
