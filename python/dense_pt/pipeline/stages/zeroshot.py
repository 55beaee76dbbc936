"""zeroshot: the model every retriever starts from (the pre-trained encoder, or ``[model] init``),
encoded and searched as it is, with the lengths R1 will train with."""

from __future__ import annotations

from pathlib import Path

from dense_pt.pipeline import common as C
from dense_pt.pipeline.config import settings
from dense_pt.pipeline.runner import Stage


def inputs(ctx: C.Ctx) -> dict:
    return {"model": C.base_model(ctx)[1], "store": ctx.fp("store"), **C.split_inputs(ctx)}


def params(ctx: C.Ctx) -> dict:
    return {**settings(ctx.cfg.encode), **C.encode_lengths(ctx.cfg.r1)}


def run(ctx: C.Ctx, folder: Path) -> dict:
    run = C.encode_and_search(ctx, C.base_model(ctx)[0], folder, C.split_file(ctx, "dev_queries.jsonl"),
                     C.k_eval(ctx.cfg), ctx.cfg.r1)  # fmt: skip
    return {"metrics": C.evaluate(ctx, run)}


STAGE = Stage(
    name="zeroshot",
    doc="retrieve with the starting model as it is",
    reads=("store", "split", "pretrain"),
    config=("encode", "r1", "eval"),
    outputs=(C.RUN_FILE,),
    inputs=inputs,
    params=params,
    run=run,
    run_file=C.RUN_FILE,
    card="pretrain/run/encoder",
)
