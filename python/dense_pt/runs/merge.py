"""Runs of shards merged into the run one machine would have written (``dense-pt runs merge``).

* **Query shards** (no query in two inputs: BM25 or search run on a slice of the queries each) are
  concatenated in the order given, rows, ranks and scores as they are: shards of contiguous query
  ranges give the one-machine run byte for byte.
* **Passage shards** (the same queries, each input over a slice of the passages: search per shard
  of the encoded corpus) are merged per query: the union of the inputs' hits, ranked by
  ``rank_hits``' rule (score descending, ties by passage id descending) and cut to ``k``.
  ``dense-pt search`` cuts its top-k by that same rule, so the merged top-k is the whole corpus's
  top-k, exactly, down to the smallest depth of the shards and no further: a shard searched with
  ``-k 10`` does not list its 11th passage, which may belong in the union's top 20. A shard's depth
  is the ``k`` its Arrow run records (``dense-pt search`` and ``bm25`` record it), else its most
  hits for a query. Without ``k`` the union is cut to the smallest depth, and when the shards'
  depths differ the result says so (``note``); a ``k`` deeper than that is refused: the merge is
  exact or it is not written. A passage listed by two inputs for one query is refused (shards
  must not overlap).

The inputs are read a chunk of queries at a time (``runs.index``); either format in,
either format out (by ``out``'s name)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dense_pt.config.choices import MERGE_MODES
from dense_pt.errors import InvalidArgumentError
from dense_pt.runs.chunk import RunChunk, duplicate_in_query
from dense_pt.runs.index import AlignedRuns
from dense_pt.runs.rank import rank_order
from dense_pt.runs.read import read_run
from dense_pt.runs.write import RunWriter


def merge_runs(inputs: Sequence[str | Path], out: str | Path, k: int | None = None, mode: str = "auto",
               tag: str | None = None) -> dict[str, Any]:  # fmt: skip
    """Merge shard runs into ``out`` (see the module docstring). ``mode``: ``"queries"``,
    ``"passages"``, or ``"auto"`` (query shards when no query is in two inputs). Returns the mode
    used, the queries and rows written, and ``k``."""
    if mode not in MERGE_MODES:
        raise InvalidArgumentError(f"mode must be one of {MERGE_MODES}, got {mode!r}")
    if not inputs:
        raise InvalidArgumentError("no run to merge")
    if k is not None and k < 1:
        raise InvalidArgumentError(f"k must be >= 1, got {k}")
    with AlignedRuns(inputs) as runs:
        disjoint = sum(len(ix.qids) for ix in runs.indexes) == len(runs.qids)
        if mode == "auto":
            mode = "queries" if disjoint else "passages"
        tag = tag or runs.indexes[0].tag
        if mode == "queries":
            if not disjoint:
                q = _shared_query(runs)
                raise InvalidArgumentError(
                    f"query {q!r} is in two inputs: these are not query shards (--mode passages)"
                )
            if k is not None:
                raise InvalidArgumentError(
                    "k is for passage shards: query shards are concatenated as they are"
                )
            with RunWriter(out, tag=tag) as w:
                for path in inputs:
                    for chunk in read_run(path):
                        w.write_chunk(chunk)
            return {"mode": mode, "queries": w.queries, "rows": w.rows, "k": None, "note": None}
        depth, note = _exact_depth(runs, inputs, k)
        with RunWriter(out, tag=tag, depth=depth) as w:
            for chunks in runs.chunks():
                top = _top_k(chunks, depth)
                w.write(top.qids, top.offsets, top.docids, top.scores)
        return {"mode": mode, "queries": w.queries, "rows": w.rows, "k": depth, "note": note}


def _exact_depth(runs: AlignedRuns, inputs: Sequence[str | Path], k: int | None) -> tuple[int, str | None]:
    """The depth to cut the union of passage shards to, and a line saying why when the shards'
    depths differ; a ``k`` the shards cannot give exactly is refused."""
    depths = [ix.depth for ix in runs.indexes]
    exact = min(depths)
    shallow = inputs[depths.index(exact)]
    if k is not None and k > exact:
        raise InvalidArgumentError(
            f"-k {k}: these passage shards give an exact top-k only to depth {exact} ({shallow} holds "
            f"at most {exact} hits per query; a passage it did not list may belong in the top {k}): "
            f"give -k {exact} or less, or search every shard to depth {k}"
        )
    if k is not None or len(set(depths)) == 1:
        return k or exact, None
    return exact, (
        f"the shards' depths differ ({', '.join(map(str, depths))}): kept the top {exact} per query, "
        f"the depth to which the merge is exact ({shallow} lists no more)"
    )


def _shared_query(runs: AlignedRuns) -> str:
    seen: set[str] = set()
    for ix in runs.indexes:
        for q in ix.qids:
            if q in seen:
                return q
            seen.add(q)
    raise AssertionError("no shared query")


def _top_k(chunks: list[RunChunk], k: int) -> RunChunk:
    """Per query, the union of the chunks' hits (the same queries in each), top ``k`` by
    ``rank_hits``' rule."""
    merged = RunChunk.concat(chunks)
    n = len(chunks[0])
    groups = np.concatenate([c.query_of_row for c in chunks])
    order = np.argsort(groups, kind="stable")  # each query's rows together, shard by shard
    g, docs, scores = groups[order], merged.docids.take(pa.array(order)), merged.scores[order]
    ranked = rank_order(g, scores, docs, "docno")
    g, docs, scores = g[ranked], docs.take(pa.array(ranked)), scores[ranked]
    starts = np.searchsorted(g, np.arange(n))
    pos = np.arange(len(g)) - starts[g]
    dup = _first_duplicate(g, docs)
    if dup is not None:
        q = chunks[0].qids[int(g[dup])].as_py()
        raise InvalidArgumentError(
            f"passage {docs[dup].as_py()!r} is in two inputs for query {q!r}: passage shards must not overlap"
        )
    keep = pos < k
    counts = np.bincount(g[keep], minlength=n)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return RunChunk(chunks[0].qids, offsets, docs.filter(pa.array(keep)), scores[keep], pos[keep] + 1)


def _first_duplicate(groups: np.ndarray, docids: pa.Array) -> int | None:
    dup = duplicate_in_query(groups, docids)
    return None if dup is None else dup[1]
