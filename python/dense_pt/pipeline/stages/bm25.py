"""bm25: BM25 (our engine, bm25s's Lucene scores) for every judged query: the sparse baseline and R1's negatives."""

from __future__ import annotations

from pathlib import Path

from dense_pt.pipeline import common as C
from dense_pt.pipeline.runner import Stage


def inputs(ctx: C.Ctx) -> dict:
    return {"corpus": ctx.file_hash(ctx.cfg.data.corpus), **C.split_inputs(ctx)}


def params(ctx: C.Ctx) -> dict:
    return {"k": C.k_search(ctx.cfg)}


def run(ctx: C.Ctx, folder: Path) -> dict:
    """Streamed: the index in a temporary folder of the stage, the run written a chunk of queries
    at a time and evaluated from the file (MS MARCO's 500k x 200 hits never held as objects)."""
    import tempfile

    from dense_pt.config.retrieval import BM25Command
    from dense_pt.retrieval.bm25 import bm25

    s = BM25Command(k=max(C.k_search(ctx.cfg), ctx.cfg.mine.bm25_depth + 10))
    with tempfile.TemporaryDirectory(prefix=".bm25-index-", dir=folder) as tmp:
        out = bm25(ctx.cfg.data.corpus, C.split_file(ctx, "judged_queries.jsonl"), folder / C.RUN_FILE, s,
                   index=Path(tmp) / "index")  # fmt: skip
    return {"metrics": C.evaluate(ctx, out)}


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
