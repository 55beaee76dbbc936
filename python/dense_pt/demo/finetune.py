"""The demo's fine-tuning stage: the whole pipeline (BM25 -> R1 -> mine -> R2 -> re-ranker -> scores
-> distill) on the demo's BEIR folder, from the encoder the pretrain stage wrote."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from dense_pt.config.defaults import finetune as FT

if TYPE_CHECKING:
    from dense_pt.pipeline.config import ResolvedPipeline

# Steps per training stage (R1, R2, re-ranker, distillation), sized so the demo stays within a few
# minutes on 2 busy cores (BENCHMARKS.md, "The demo"). That is too few for a 64-wide encoder from a
# random init to learn much (300 steps: R1 nDCG@10 0.05 on dev; 1,000: 0.14-0.19; 1,500: 0.24):
# the demo shows the plumbing and says so; quality numbers come from real models.
DEMO_FINETUNE_STEPS = 200
DEMO_LR = 1e-3
DEMO_LOSS = "infonce"
# Stage name in the pipeline -> label in the demo's summary table, in pipeline order.
DEMO_ROWS = {"bm25": "BM25", "zeroshot": "zero-shot", "r1": "R1", "r2": "R2", "reranker": "re-ranker",
             "distill": "distilled"}  # fmt: skip


def finetune_config(
    out: Path,
    beir: Path,
    train_qrels: Path,
    eval_qrels: Path,
    encoder: Path,
    steps: int = DEMO_FINETUNE_STEPS,
    seed: int = 0,
) -> ResolvedPipeline:
    """The pipeline on a BEIR folder with fixed splits (train on ``train_qrels``, every stage
    evaluated on ``eval_qrels``), from a (pre-trained) encoder folder: BM25 -> R1 -> mine -> R2 ->
    re-ranker -> scores -> distill."""
    from dense_pt.pipeline.config import validate_config

    # The config's paths are resolved against its own folder: hand it absolute ones.
    beir, train_qrels, eval_qrels, encoder = (p.resolve() for p in (beir, train_qrels, eval_qrels, encoder))

    train = {"max_steps": steps, "batch_size": 8, "lr": DEMO_LR, "warmup": 0.1, "save_every": max(1, steps // 2),
             "log_every": 10, "precision": "fp32"}  # fmt: skip
    retriever = {
        "loss": DEMO_LOSS,
        "group_size": 4,
        "query_max_length": FT.QUERY_MAX_LENGTH,
        "passage_max_length": 126,  # the store's length ([data] max_length)
        "train": train,
    }
    raw = {
        "out": str(out),
        "seed": seed,
        "data": {"corpus": str(beir / "corpus.jsonl"), "queries": str(beir / "queries.jsonl"),
                 "qrels": str(train_qrels), "dev_qrels": str(eval_qrels), "max_length": 126},
        "model": {"init": str(encoder)},
        "eval": {"k": 100, "measures": ["nDCG@10", "R@100"]},
        "encode": {"batch_size": 64},
        "mine": {"depth": 30, "num": 8, "bm25_depth": 30},
        "r1": retriever,
        "r2": retriever,
        # the demo's encoder is the only checkpoint here (no ELECTRA): the re-ranker starts from it
        # the authors' procedure on groups of 4: trained on the top half (a quarter is the positive alone)
        "reranker": {"init": "model", "group_size": 4, "forward_factor": 2, "query_max_length": FT.QUERY_MAX_LENGTH,
                     "max_length": 128, "depth": 30, "num": 8, "rerank_depth": 30, "score_num": 6, "train": train},
        # SimLM distils from the pre-trained model; this encoder is a 30-step toy, so continue from R2
        "distill": {**{k: v for k, v in retriever.items() if k != "loss"}, "init": "r2"},
    }  # fmt: skip
    return validate_config(raw, out.parent.resolve(), "demo fine-tuning config")


def finetune_demo_stage(
    beir: str | Path,
    qrels: dict[str, Path],
    encoder: str | Path,
    workdir: str | Path,
    steps: int = DEMO_FINETUNE_STEPS,
    seed: int = 0,
    force: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """``dense-pt demo``'s fine-tuning stage: run (or continue) the pipeline and summarise each
    stage's nDCG@10 / R@100 on the dev split (the test split when there is no dev split, as in
    BEIR SciFact). Finished pipeline stages are skipped on a re-run. Without train qrels and a dev
    or test split there is nothing to fine-tune on: the stage says so and is skipped. Each pipeline
    stage is named as it starts and ends (``demo: finetune: [r1] running``), with the training
    progress of each model (a bar on a terminal, a line every 30 s otherwise)."""
    import shutil

    from dense_pt import logs
    from dense_pt.fsutil import atomic_file
    from dense_pt.pipeline.run import run_pipeline

    eval_split = "dev" if "dev" in qrels else "test"
    if "train" not in qrels or eval_split not in qrels:
        return {
            "status": "skipped",
            "reason": f"{beir} has no qrels/train.tsv and qrels/dev.tsv (or test.tsv)",
        }
    out = Path(workdir) / "pipeline"
    if force and out.exists():
        from dense_pt.artifacts.replace import check_replaceable
        from dense_pt.pipeline.run import STAGES

        check_replaceable(out, STAGES)  # the pipeline's stage folders and mark; a file of yours is refused
        shutil.rmtree(out)
    lines: list[str] = []

    def log(message: str) -> None:
        lines.append(message)
        logs.status(f"demo: finetune: {message}")

    cfg = finetune_config(out, Path(beir), qrels["train"], qrels[eval_split], Path(encoder), steps, seed)
    res = run_pipeline(cfg, progress=progress, log=log)
    with atomic_file(Path(workdir) / "pipeline.log", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    summary: dict[str, Any] = {
        "status": "ran" if any(x.endswith("] running") for x in lines) else "up to date",
        "steps": steps,
        "eval split": eval_split,
        "eval queries": res["split"]["dev_queries"],
    }
    for name, label in DEMO_ROWS.items():
        m = res.get(name, {}).get("metrics")
        if m:
            summary[label] = f"nDCG@10 {m['nDCG@10']:.3f} R@100 {m['R@100']:.3f}"
    summary["metrics"] = {name: res[name]["metrics"] for name in DEMO_ROWS if "metrics" in res.get(name, {})}
    summary["file"] = str(out / "report" / "report.md")
    return summary
