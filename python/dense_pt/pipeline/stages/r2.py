"""r2: the second retriever, trained from the starting model again on R1-mined negatives."""

from __future__ import annotations

import shutil
from pathlib import Path

from dense_pt.pipeline import common as C
from dense_pt.pipeline.runner import Stage


def inputs(ctx: C.Ctx) -> dict:
    return {"model": C.base_model(ctx)[1], "mine": ctx.fp("mine"), **C.split_inputs(ctx)}


def params(ctx: C.Ctx) -> dict:
    return C.with_loss(ctx.cfg.r2)


def run(ctx: C.Ctx, folder: Path) -> dict:
    neg = folder / "negatives.dpneg"
    shutil.copyfile(ctx.out / "mine" / "negatives.dpneg", neg)
    return C.train_retriever_stage(ctx, folder, ctx.cfg.r2, C.base_model(ctx)[0], negatives=neg)


STAGE = Stage(
    name="r2",
    doc="train retriever 2 on R1-mined negatives",
    reads=("store", "split", "pretrain", "mine"),
    config=("r2", "model", "encode", "eval"),
    outputs=("negatives.dpneg", "train/model", C.RUN_FILE, "emb_queries", "emb_passages"),
    inputs=inputs,
    params=params,
    run=run,
    run_file=C.RUN_FILE,
    card="r2/train/model",
)
