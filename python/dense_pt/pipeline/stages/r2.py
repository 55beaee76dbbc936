"""r2: the second retriever, trained on R1-mined negatives from the starting model again (SimLM), or
from R1 (``[r2] init = "r1"``: ANCE's start, the BM25 warm-up); with ``refresh_every`` its negatives
are re-mined from itself as it trains (ANCE)."""

from __future__ import annotations

import shutil
from pathlib import Path

from dense_pt.pipeline import common as C
from dense_pt.pipeline.runner import Stage


def _init(ctx: C.Ctx) -> tuple[Path, str]:
    if ctx.cfg.r2.init == "r1":
        return ctx.out / "r1" / "train" / "model", ctx.fp("r1")
    return C.base_model(ctx)


def inputs(ctx: C.Ctx) -> dict:
    return {"model": _init(ctx)[1], "mine": ctx.fp("mine"), **C.split_inputs(ctx)}


def params(ctx: C.Ctx) -> dict:
    return {**C.with_loss(ctx.cfg.r2), **C.refresh_params(ctx, ctx.cfg.r2)}


def run(ctx: C.Ctx, folder: Path) -> dict:
    neg = folder / "negatives.dpneg"
    shutil.copyfile(ctx.out / "mine" / "negatives.dpneg", neg)
    return C.train_retriever_stage(ctx, folder, ctx.cfg.r2, _init(ctx)[0], negatives=neg)


STAGE = Stage(
    name="r2",
    doc="train retriever 2 on R1-mined negatives",
    reads=("store", "split", "pretrain", "r1", "mine"),  # r1: its model, with init = "r1"
    config=("r2", "model", "mine", "encode", "eval"),
    outputs=("negatives.dpneg", "train/model", C.RUN_FILE, "emb_queries", "emb_passages"),
    inputs=inputs,
    params=params,
    run=run,
    run_file=C.RUN_FILE,
    card="r2/train/model",
)
