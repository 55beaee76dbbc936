"""pmi: n-gram counts of the corpus and the AMI importance column that cdmae masks its decoder by
(only with a ``[pretrain.pmi]`` table)."""

from __future__ import annotations

from pathlib import Path

from dense_pt.config.pipeline import PmiTable
from dense_pt.config.pmi import PmiBuild, PmiCounts
from dense_pt.pipeline import common as C
from dense_pt.pipeline.config import ResolvedPipeline
from dense_pt.pipeline.runner import Stage


def disabled(cfg: ResolvedPipeline) -> str | None:
    if cfg.pretrain is None:
        return "no [pretrain] table"
    return "no [pretrain.pmi] table" if cfg.pretrain.pmi is None else None


def inputs(ctx: C.Ctx) -> dict:
    return {"store": ctx.fp("store")}


def _pmi(ctx: C.Ctx) -> PmiTable:
    assert ctx.cfg.pretrain is not None and ctx.cfg.pretrain.pmi is not None  # else the stage is off
    return ctx.cfg.pretrain.pmi


def params(ctx: C.Ctx) -> dict:
    return _pmi(ctx).model_dump()


def run(ctx: C.Ctx, folder: Path) -> dict:
    from dense_pt.pmi import build, score

    p, store = _pmi(ctx), C.store(ctx)
    counts = PmiBuild.load(p.model_dump(include=set(PmiCounts.model_fields)), "[pretrain.pmi]")
    built = build(store, folder / "ngrams.pmi", counts, spill_dir=folder)
    scored = score(store, folder / "ngrams.pmi", window=p.window, force=True)
    return {"entries": built["entries"], "totals": built["totals"], "tokens": scored["tokens"],
            "mean_ami": scored["mean"], "seconds": built["seconds"] + scored["seconds"]}  # fmt: skip


STAGE = Stage(
    name="pmi",
    doc="n-gram counts and the AMI importance column of the store (cdmae)",
    reads=("store",),
    config=("pretrain",),
    outputs=("ngrams.pmi",),
    inputs=inputs,
    params=params,
    run=run,
    disabled=disabled,
)
