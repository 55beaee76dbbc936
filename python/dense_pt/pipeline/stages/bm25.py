"""bm25: BM25 (bm25s) for every judged query: the sparse baseline and R1's negatives."""

from __future__ import annotations

from pathlib import Path

from dense_pt.pipeline import common as C
from dense_pt.pipeline.runner import Stage


def inputs(ctx: C.Ctx) -> dict:
    return {"corpus": ctx.file_hash(ctx.cfg.data.corpus), **C.split_inputs(ctx)}


def params(ctx: C.Ctx) -> dict:
    return {"k": C.k_search(ctx.cfg)}


def run(ctx: C.Ctx, folder: Path) -> dict:
    from dense_pt.data import corpus_texts, load_queries, write_run
    from dense_pt.retrieval.bm25 import bm25_run

    k = max(C.k_search(ctx.cfg), ctx.cfg.mine.bm25_depth + 10)
    run = bm25_run(corpus_texts(ctx.cfg.data.corpus),
                   load_queries(C.split_file(ctx, "judged_queries.jsonl")), k=k)  # fmt: skip
    write_run(folder / C.RUN_FILE, run, tag="bm25s")
    return {"metrics": C.evaluate(ctx, run)}


STAGE = Stage(
    name="bm25",
    doc="BM25 for every judged query",
    reads=("split",),
    config=("data", "eval", "mine", "reranker"),
    outputs=(C.RUN_FILE,),
    inputs=inputs,
    params=params,
    run=run,
    run_file=C.RUN_FILE,
)
