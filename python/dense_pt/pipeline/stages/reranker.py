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
    from dense_pt.config.finetune import RerankerInputs
    from dense_pt.data import load_qrels
    from dense_pt.finetune.stages import rerank_run, train_reranker
    from dense_pt.runs import write_run

    sec, r2, neg = ctx.cfg.reranker, ctx.out / "r2", folder / "negatives.dpneg"
    stats = C.mine_from(ctx, C.run_file(r2), neg, sec.depth, sec.num, r2)
    inputs = RerankerInputs(model=_model(ctx)[0], corpus=C.store(ctx), queries=ctx.cfg.data.queries,
                            qrels=C.split_file(ctx, "train.qrels"), out=folder / "train", negatives=neg,
                            restrict_to=C.train_ids(ctx))  # fmt: skip
    m = train_reranker(inputs, sec, C.train_config(sec, ctx.seed), progress=ctx.progress)
    dev = set(load_qrels(C.split_file(ctx, "dev.qrels")))
    r2run = _top_of(C.run_file(r2), dev, sec.rerank_depth)
    reranked = rerank_run(folder / "train" / "model", C.store(ctx), ctx.cfg.data.queries, r2run,
                          sec.rerank_depth)  # fmt: skip
    write_run(folder / C.RERANKED_FILE, reranked)
    return {"metrics": C.evaluate(ctx, reranked), "negatives": stats, "train_steps": m["steps"],
            "train_wall_s": m["wall_s"]}  # fmt: skip


def _top_of(run: Path, queries: set[str], depth: int) -> dict[str, dict[str, float]]:
    """The top ``depth`` hits (``rank_hits``' order, what ``rerank_run`` re-scores) of the run's
    ``queries``, read a chunk at a time: only what is re-ranked is held."""
    import numpy as np
    import pyarrow as pa

    from dense_pt.runs import RunChunk, rank_order, read_run

    out: dict[str, dict[str, float]] = {}
    for chunk in read_run(run):
        c = chunk.select(queries)
        g = c.query_of_row
        order = rank_order(g, c.scores, c.docids, "docno")
        keep = order[(np.arange(len(order)) - c.offsets[g[order]]) < depth]
        out.update(RunChunk(c.qids, np.concatenate([[0], np.cumsum(np.bincount(g[keep], minlength=len(c)))]),
                            c.docids.take(pa.array(keep)), c.scores[keep], c.ranks[keep]).to_dict())  # fmt: skip
    return out


STAGE = Stage(
    name="reranker",
    doc="train a re-ranker on R2's negatives and re-rank R2's dev run",
    reads=("store", "split", "pretrain", "r2"),
    config=("reranker", "mine", "eval"),
    outputs=("negatives.dpneg", "train/model", C.RERANKED_FILE),
    inputs=inputs,
    params=params,
    run=run,
    disabled=disabled,
    run_file=C.RERANKED_FILE,
    card="reranker/train/model",
)
