"""distill: a retriever distilled from the re-ranker's scores (SimLM Figure 2: from the starting
model, as R1 and R2; ``[distill] init = "r2"`` starts from R2)."""

from __future__ import annotations

from pathlib import Path

from dense_pt.pipeline import common as C
from dense_pt.pipeline.config import ResolvedPipeline
from dense_pt.pipeline.runner import Stage


def disabled(cfg: ResolvedPipeline) -> str | None:
    if not cfg.reranker.enabled:
        return "[reranker] enabled = false"
    return None if cfg.distill.enabled else "[distill] enabled = false"


def inputs(ctx: C.Ctx) -> dict:
    return {
        "score": ctx.fp("score"),
        "r2": ctx.fp("r2"),
        "model": C.base_model(ctx)[1],
        **C.split_inputs(ctx),
    }


def params(ctx: C.Ctx) -> dict:
    return C.with_loss(ctx.cfg.distill)


def run(ctx: C.Ctx, folder: Path) -> dict:
    sec = ctx.cfg.distill
    init = ctx.out / "r2" / "train" / "model" if sec.init == "r2" else C.base_model(ctx)[0]
    return C.train_retriever_stage(ctx, folder, sec, init, teacher=ctx.out / "score" / "scores.dpneg")


STAGE = Stage(
    name="distill",
    doc="distil the re-ranker's scores into a retriever",
    reads=("store", "split", "pretrain", "r2", "score"),
    config=("distill", "model", "encode", "eval"),
    outputs=("train/model", C.RUN_FILE, "emb_queries", "emb_passages"),
    inputs=inputs,
    params=params,
    run=run,
    disabled=disabled,
    run_file=C.RUN_FILE,
    card="distill/train/model",
)
