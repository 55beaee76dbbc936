"""reranker: a cross-encoder trained on negatives from R2's top-k (SimLM: from ELECTRA-base,
``[reranker] init``), evaluated by re-ranking R2's dev run."""

from __future__ import annotations

from pathlib import Path

from dense_pt.pipeline import common as C
from dense_pt.pipeline.config import ResolvedPipeline, settings
from dense_pt.pipeline.runner import Stage


def disabled(cfg: ResolvedPipeline) -> str | None:
    return None if cfg.reranker.enabled else "[reranker] enabled = false"


def _model(ctx: C.Ctx) -> tuple[Path, str]:
    """The re-ranker's initial checkpoint and its fingerprint ("model": the pipeline's model)."""
    init = ctx.memo("reranker init", lambda: C.reranker_init(ctx.cfg))
    if init is None:
        return C.base_model(ctx)
    return init, ctx.memo(("model", init), lambda: C.model_fingerprint(init))


def inputs(ctx: C.Ctx) -> dict:
    return {"r2": ctx.fp("r2"), "model": _model(ctx)[1], **C.split_inputs(ctx)}


def params(ctx: C.Ctx) -> dict:
    return settings(ctx.cfg.reranker)


def run(ctx: C.Ctx, folder: Path) -> dict:
    from dense_pt.data import load_qrels, load_run, write_run
    from dense_pt.finetune.stages import rerank_run, train_reranker

    sec, r2, neg = ctx.cfg.reranker, ctx.out / "r2", folder / "negatives.dpneg"
    stats = C.mine_from(ctx, r2 / "run.trec", neg, sec.depth, sec.num, r2)
    m = train_reranker(_model(ctx)[0], C.store(ctx), ctx.cfg.data.queries,
                       C.split_file(ctx, "train.qrels"), neg, folder / "train", group_size=sec.group_size,
                       query_max_length=sec.query_max_length, max_length=sec.max_length,
                       train=C.train_config(sec, ctx.seed), restrict_to=C.train_ids(ctx), progress=ctx.progress,
                       epochs=sec.epochs, loss=sec.loss, forward_factor=sec.forward_factor)  # fmt: skip
    dev = set(load_qrels(C.split_file(ctx, "dev.qrels")))
    r2run = {q: h for q, h in load_run(r2 / "run.trec").items() if q in dev}
    reranked = rerank_run(folder / "train" / "model", C.store(ctx), ctx.cfg.data.queries, r2run,
                          sec.rerank_depth)  # fmt: skip
    write_run(folder / "dev_reranked.trec", reranked)
    return {"metrics": C.evaluate(ctx, reranked), "negatives": stats, "train_steps": m["steps"],
            "train_wall_s": m["wall_s"]}  # fmt: skip


STAGE = Stage(
    name="reranker",
    doc="train a re-ranker on R2's negatives and re-rank R2's dev run",
    reads=("store", "split", "pretrain", "r2"),
    config=("reranker", "mine", "eval"),
    outputs=("negatives.dpneg", "train/model", "dev_reranked.trec"),
    inputs=inputs,
    params=params,
    run=run,
    disabled=disabled,
    run_file="dev_reranked.trec",
    card="reranker/train/model",
)
