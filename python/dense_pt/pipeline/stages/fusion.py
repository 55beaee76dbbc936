"""fusion: BM25 fused with the last dense retriever's run (hybrid retrieval; off by default, not
part of the papers' pipeline). The interpolation weight is tuned on the training queries, so the
dev metrics stay unbiased."""

from __future__ import annotations

from pathlib import Path

from dense_pt.pipeline import common as C
from dense_pt.pipeline.config import ResolvedPipeline, settings
from dense_pt.pipeline.runner import Stage


def disabled(cfg: ResolvedPipeline) -> str | None:
    return None if cfg.fusion.enabled else "[fusion] enabled = false"


def _dense(ctx: C.Ctx) -> str:
    """The stage whose run is fused ("auto": distill when it runs, else r2)."""
    dense = ctx.cfg.fusion.dense
    return dense if dense != "auto" else ("distill" if ctx.planned("distill") else "r2")


def inputs(ctx: C.Ctx) -> dict:
    return {"bm25": ctx.fp("bm25"), "dense": ctx.fp(_dense(ctx)), **C.split_inputs(ctx)}


def params(ctx: C.Ctx) -> dict:
    return {**settings(ctx.cfg.fusion), "dense": _dense(ctx), "k": C.k_eval(ctx.cfg)}


def run(ctx: C.Ctx, folder: Path) -> dict:
    from dense_pt.data import load_qrels
    from dense_pt.retrieval.fusion import fused_chunks, method_of, tune_aligned, write_fused
    from dense_pt.runs import AlignedRuns

    fu, ev, dense, k = ctx.cfg.fusion, ctx.cfg.eval, _dense(ctx), C.k_eval(ctx.cfg)
    tuning: dict | None = None
    weight: float
    # both runs are read a chunk of queries at a time, aligned by query (dense_pt.runs.index)
    with AlignedRuns([C.run_file(ctx.out / "bm25"), C.run_file(ctx.out / dense)]) as runs:
        if fu.weight == "tune":
            measure = ev.measures[0]
            weight, table = tune_aligned(runs, load_qrels(C.split_file(ctx, "train.qrels")), measure, depth=k,
                                         tie_break=ev.tie_break, rel_level=ev.rel_level)  # fmt: skip
            tuning = {"measure": measure, "on": "train split", "table": {str(w): v for w, v in table.items()}}
        else:
            weight = fu.weight
        methods = {m: method_of(m, weight, fu.rrf_k) for m in ("interpolation", "rrf")}
        write_fused(runs, folder / C.RUN_FILE, methods[fu.method], k, tag=f"fused-{fu.method}")
        dev = load_qrels(C.split_file(ctx, "dev.qrels"))
        other = {
            m: C.evaluate(ctx, fused_chunks(runs, f, k, only=dev))
            for m, f in methods.items()
            if m != fu.method
        }
    return {"metrics": C.evaluate(ctx, folder / C.RUN_FILE), "dense_stage": dense, "method": fu.method,
            "weight": weight, "rrf_k": fu.rrf_k, "tuning": tuning, "other_methods": other}  # fmt: skip


STAGE = Stage(
    name="fusion",
    doc="fuse BM25 with the last dense retriever's run",
    reads=("split", "bm25", "r1", "r2", "distill"),
    config=("fusion", "eval"),
    outputs=(C.RUN_FILE,),
    inputs=inputs,
    params=params,
    run=run,
    disabled=disabled,
    run_file=C.RUN_FILE,
)
