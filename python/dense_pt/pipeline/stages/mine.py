"""mine: hard negatives from R1's run (SimLM: its top 200, positives dropped), with the [mine]
filters scored from R1's embeddings."""

from __future__ import annotations

from pathlib import Path

from dense_pt.pipeline import common as C
from dense_pt.pipeline.config import settings
from dense_pt.pipeline.runner import Stage


def inputs(ctx: C.Ctx) -> dict:
    return {"r1": ctx.fp("r1")}


def params(ctx: C.Ctx) -> dict:
    return settings(ctx.cfg.mine)


def run(ctx: C.Ctx, folder: Path) -> dict:
    m = ctx.cfg.mine
    r1 = ctx.out / "r1"
    stats = C.mine_from(ctx, C.run_file(r1), folder / "negatives.dpneg", m.depth, m.num, r1)
    return {"negatives": stats}


STAGE = Stage(
    name="mine",
    doc="mine hard negatives from R1's run",
    reads=("r1",),
    config=("mine",),
    outputs=("negatives.dpneg",),
    inputs=inputs,
    params=params,
    run=run,
)
