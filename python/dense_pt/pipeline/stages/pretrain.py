"""pretrain: the ``[pretrain]`` method on the pipeline's own store; the encoder it writes is the
model every later stage starts from (only with a ``[pretrain]`` table)."""

from __future__ import annotations

from pathlib import Path

from dense_pt.pipeline import common as C
from dense_pt.pipeline.runner import Config, Context, Stage


def disabled(cfg: Config) -> str | None:
    return None if cfg["pretrain"] else "no [pretrain] table"


def inputs(ctx: Context) -> dict:
    # with a pmi stage, the store it read is the store plus the importance column
    store_fp = ctx.fp("pmi") if ctx.planned("pmi") else ctx.fp("store")
    return {"store": store_fp, "model": C.init_fingerprint(ctx)}


def params(ctx: Context) -> dict:
    # the method's own paper is its default: left out of the fingerprint, so stages finished
    # before ``paper`` existed are not redone
    from dense_pt.objectives import DEFAULT_PAPER

    pcfg = ctx.cfg["pretrain"]
    own = pcfg["paper"] == DEFAULT_PAPER[pcfg["method"]]
    return {k: v for k, v in pcfg.items() if not (k == "paper" and own)}


def run(ctx: Context, folder: Path) -> dict:
    from dense_pt.pipeline.config import pretrain_length_note
    from dense_pt.pretrain import build_config, run_pretrain

    pcfg = ctx.cfg["pretrain"]
    top = {"method": pcfg["method"], "paper": pcfg["paper"], "model": str(C.init_model(ctx)),
           "corpus": str(C.store(ctx)), "out": str(folder / "run"), "max_length": pcfg["max_length"]}  # fmt: skip
    length_note = pretrain_length_note(pcfg, ctx.cfg["data"]["max_length"])
    ctx.log(f"[pretrain] {length_note}")
    train = {"seed": ctx.seed, **pcfg["train"]}
    pc = build_config(None, top=top, options=pcfg["options"], train=train)
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
