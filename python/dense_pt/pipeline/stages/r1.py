"""r1: the first retriever, trained from the starting model on BM25 negatives."""

from __future__ import annotations

from pathlib import Path

from dense_pt.pipeline import common as C
from dense_pt.pipeline.config import settings
from dense_pt.pipeline.runner import Stage


def _negatives(ctx: C.Ctx) -> dict:
    return {"depth": ctx.cfg.mine.bm25_depth, "num": ctx.cfg.mine.num}


def inputs(ctx: C.Ctx) -> dict:
    return {"model": C.base_model(ctx)[1], "bm25": ctx.fp("bm25"), "store": ctx.fp("store"),
            **C.split_inputs(ctx)}  # fmt: skip


def params(ctx: C.Ctx) -> dict:
    return {**C.with_loss(ctx.cfg.r1), "negatives": _negatives(ctx), "mine": settings(ctx.cfg.mine),
            **C.refresh_params(ctx, ctx.cfg.r1)}  # fmt: skip


def run(ctx: C.Ctx, folder: Path) -> dict:
    neg, stats = folder / "negatives.dpneg", None
    if not neg.exists():  # resuming: mined before the interruption
        m = ctx.cfg.mine
        stats = C.mine_from(ctx, C.run_file(ctx.out / "bm25"), neg, m.bm25_depth, m.num, None)
    return C.train_retriever_stage(ctx, folder, ctx.cfg.r1, C.base_model(ctx)[0], negatives=neg, mined=stats)


STAGE = Stage(
    name="r1",
    doc="train retriever 1 on BM25 negatives",
    reads=("store", "split", "pretrain", "bm25"),
    config=("r1", "mine", "model", "encode", "eval"),
    outputs=("negatives.dpneg", "train/model", C.RUN_FILE, "emb_queries", "emb_passages"),
    inputs=inputs,
    params=params,
    run=run,
    run_file=C.RUN_FILE,
    card="r1/train/model",
)
