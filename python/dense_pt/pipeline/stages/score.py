"""score: the re-ranker's scores of the training queries' mined negatives, the teacher of the
distilled retriever."""

from __future__ import annotations

from pathlib import Path

from dense_pt.pipeline import common as C
from dense_pt.pipeline.config import ResolvedPipeline
from dense_pt.pipeline.runner import Stage


def disabled(cfg: ResolvedPipeline) -> str | None:
    return None if cfg.reranker.enabled else "[reranker] enabled = false"


def inputs(ctx: C.Ctx) -> dict:
    return {"reranker": ctx.fp("reranker")}


def params(ctx: C.Ctx) -> dict:
    return {"score_num": ctx.cfg.reranker.score_num}


def run(ctx: C.Ctx, folder: Path) -> dict:
    from dense_pt.config.finetune import ScoreInputs
    from dense_pt.finetune.stages import score_negatives
    from dense_pt.retrieval.negatives import NegativesTable, read_negatives, write_negatives

    reranker = ctx.out / "reranker"
    full = read_negatives(reranker / "negatives.dpneg")
    n = ctx.cfg.reranker.score_num or None  # 0: all of them (SimLM scores every mined negative)
    write_negatives(folder / "to_score.dpneg", NegativesTable({q: rows[:n] for q, rows in full.rows.items()}))
    m = score_negatives(ScoreInputs(reranker=reranker / "train" / "model", corpus=C.store(ctx), queries=ctx.cfg.data.queries,
                          qrels=C.split_file(ctx, "train.qrels"), negatives=folder / "to_score.dpneg",
                          out=folder / "scores.dpneg"))  # fmt: skip
    return {"pairs": m["pairs"], "meaning": m["meaning"]}


STAGE = Stage(
    name="score",
    doc="score the mined negatives with the re-ranker (the distillation teacher)",
    reads=("reranker",),
    config=("reranker",),
    outputs=("scores.dpneg",),
    inputs=inputs,
    params=params,
    run=run,
    disabled=disabled,
)
