"""pretrain: the ``[pretrain]`` method on the pipeline's own store; the encoder it writes is the
model every later stage starts from (only with a ``[pretrain]`` table)."""

from __future__ import annotations

from pathlib import Path

from dense_pt.pipeline import common as C
from dense_pt.pipeline.config import ResolvedPipeline, ResolvedPretrain
from dense_pt.pipeline.runner import Stage


def disabled(cfg: ResolvedPipeline) -> str | None:
    return None if cfg.pretrain is not None else "no [pretrain] table"


def inputs(ctx: C.Ctx) -> dict:
    # with a pmi stage, the store it read is the store plus the importance column
    store_fp = ctx.fp("pmi") if ctx.planned("pmi") else ctx.fp("store")
    return {"store": store_fp, "model": C.init_fingerprint(ctx)}


def _pretrain(ctx: C.Ctx) -> ResolvedPretrain:
    assert ctx.cfg.pretrain is not None  # else the stage is off
    return ctx.cfg.pretrain


def params(ctx: C.Ctx) -> dict:
    # the method's own paper is its default: left out of the fingerprint, so stages finished
    # before ``paper`` existed are not redone
    from dense_pt.objectives import DEFAULT_PAPER

    pre = _pretrain(ctx)
    own = pre.paper == DEFAULT_PAPER[pre.method]
    return {k: v for k, v in pre.settings().items() if not (k == "paper" and own)}


def run(ctx: C.Ctx, folder: Path) -> dict:
    from dense_pt.pipeline.config import pretrain_length_note
    from dense_pt.pretrain import build_config, run_pretrain

    pre = _pretrain(ctx)
    top = {"method": pre.method, "paper": pre.paper, "model": str(C.init_model(ctx)),
           "corpus": str(C.store(ctx)), "out": str(folder / "run"), "max_length": pre.max_length}  # fmt: skip
    length_note = pretrain_length_note(pre, ctx.cfg.data.max_length)
    ctx.log(f"[pretrain] {length_note}")
    # the options and engine keys set, which build_config puts over the method's defaults
    train = {"seed": ctx.seed, **pre.train.model_dump(exclude_none=True)}
    pc = build_config(None, top=top, options=pre.options.model_dump(exclude_none=True), train=train)
    # resume=True: an interrupted stage continues from its last checkpoint.
    summary = run_pretrain(pc, resume=True, progress=ctx.progress)
    rec = summary.get("final_record") or {}
    return {"method": pc.method, "paper": pc.paper, "steps": summary["steps"], "final_loss": rec.get("loss"),
            "max_length_source": length_note, "encoder": summary["written"]["encoder"]}  # fmt: skip


STAGE = Stage(
    name="pretrain",
    doc="pre-train the model on the corpus store ([pretrain] method)",
    reads=("store", "pmi"),
    config=("pretrain", "data", "model"),
    outputs=("run/encoder",),
    inputs=inputs,
    params=params,
    run=run,
    disabled=disabled,
)
