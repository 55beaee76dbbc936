"""Hybrid retrieval: fuse a lexical (BM25) run with a dense one, as pyserini's hybrid search does.

- ``rrf``: reciprocal rank fusion (Cormack, Clarke & Buettcher, SIGIR 2009): a passage scores
  sum over runs of 1 / (k + rank), k = 60 as in the paper; ranks follow the evaluation's tie order.
- ``interpolate``: w * dense + (1 - w) * sparse after min-max normalising each run's scores per
  query (BM25 and cosine scores live on different scales); a passage missing from one run gets that
  run's minimum, i.e. 0 after normalisation.
- ``tune_weight``: the interpolation weight from a grid, chosen on judged queries the caller gives
  (the pipeline: the training split, so the dev split it reports on stays unseen).

The fused run holds each query's top ``depth`` passages. One vectorised core (``_fuse``) fuses
aligned chunks of queries: ``fuse_files`` / ``fused_chunks`` / ``tune_aligned`` stream two run files
(``dense_pt.runs.AlignedRuns``: a chunk of queries at a time, any query order), ``rrf`` /
``interpolate`` / ``tune_weight`` take ``{qid: {docid: score}}`` dicts for small runs. Each fused
score is summed in the per-query definition's order, so both give the same floats to the bit.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dense_pt.config.choices import DEFAULT_TIE_BREAK, RRF_K
from dense_pt.config.fusion import TUNE_MEASURE, FuseSettings
from dense_pt.errors import InvalidArgumentError
from dense_pt.runs import AlignedRuns, RunChunk, RunWriter, rank_order
from dense_pt.runs.chunk import no_rows

Run = Mapping[str, Mapping[str, float]]
# The interpolation weights tried by ``tune_weight``: 0, 0.05, ..., 1 (the dense run's weight).
WEIGHT_GRID = tuple(round(i * 0.05, 2) for i in range(21))


def _fuse(chunks: Sequence[RunChunk], contribution: Callable[[int, RunChunk], np.ndarray],
          depth: int | None) -> RunChunk:  # fmt: skip
    """The chunks (one per run, the same queries in the same order) fused: each passage's fused
    score is the sum of its rows' ``contribution(run, chunk)``, added run by run in run order from
    0.0 (the order of the per-query definitions above it, so the sums are the same floats); each
    query's top ``depth`` by ``rank_hits``' rule."""
    n = len(chunks[0])
    groups = np.concatenate([c.query_of_row for c in chunks])
    docs = pa.concat_arrays([c.docids for c in chunks])
    contrib = np.concatenate([contribution(i, c) for i, c in enumerate(chunks)])
    if len(docs) == 0:
        return no_rows(chunks[0].qids.to_pylist())
    enc = docs.dictionary_encode()
    codes = enc.indices.to_numpy().astype(np.int64)
    width = len(enc.dictionary)
    uniq, inv = np.unique(groups * width + codes, return_inverse=True)
    fused = np.zeros(len(uniq))
    np.add.at(fused, inv, contrib)  # in row order: run 0's contribution first, as the dict sums
    g, ids = uniq // width, enc.dictionary.take(pa.array(uniq % width))
    order = rank_order(g, fused, ids, DEFAULT_TIE_BREAK)
    g, ids, fused = g[order], ids.take(pa.array(order)), fused[order]
    starts = np.searchsorted(g, np.arange(n))
    pos = np.arange(len(g)) - starts[g]
    keep = np.ones(len(g), bool) if depth is None else pos < depth
    counts = np.bincount(g[keep], minlength=n)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return RunChunk(chunks[0].qids, offsets, ids.filter(pa.array(keep)), fused[keep], pos[keep] + 1)


def _rrf_of(k: int) -> Callable[[int, RunChunk], np.ndarray]:
    """1 / (k + rank), the rank by ``rank_hits``' rule within the run."""

    def contribution(_: int, c: RunChunk) -> np.ndarray:
        g = c.query_of_row
        order = rank_order(g, c.scores, c.docids, DEFAULT_TIE_BREAK)
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order)) - c.offsets[g[order]] + 1
        return 1.0 / (k + rank)

    return contribution


def _interpolation_of(weight: float) -> Callable[[int, RunChunk], np.ndarray]:
    """(1 - weight) * the sparse run's (run 0) min-max normalised score, weight * the dense run's."""

    def contribution(i: int, c: RunChunk) -> np.ndarray:
        g = c.query_of_row
        nonempty = np.flatnonzero(np.diff(c.offsets) > 0)
        lo = np.zeros(len(c))
        hi = np.zeros(len(c))
        if len(nonempty):
            lo[nonempty] = np.minimum.reduceat(c.scores, c.offsets[nonempty])
            hi[nonempty] = np.maximum.reduceat(c.scores, c.offsets[nonempty])
        span = (hi - lo)[g]
        safe = np.where(span > 0, span, 1.0)
        norm = np.where(span > 0, (c.scores - lo[g]) / safe, 1.0)
        return (weight if i == 1 else 1.0 - weight) * norm

    return contribution


def _dict_chunks(runs: Sequence[Run]) -> list[RunChunk]:
    """Dict runs as one aligned chunk each, over the sorted union of their queries."""
    qids = sorted({q for r in runs for q in r})
    return [RunChunk.from_mapping({q: r.get(q, {}) for q in qids}) for r in runs]


def rrf(runs: Sequence[Run], k: int = RRF_K, depth: int | None = None) -> dict[str, dict[str, float]]:
    """Reciprocal rank fusion of ``runs`` over the union of their queries."""
    if k < 0:
        raise InvalidArgumentError(f"rrf k must be >= 0, got {k}")
    if not any(runs):
        return {}
    return _fuse(_dict_chunks(runs), _rrf_of(k), depth).to_dict()


def interpolate(
    sparse: Run, dense: Run, weight: float, depth: int | None = None
) -> dict[str, dict[str, float]]:
    """``weight`` * dense + (1 - ``weight``) * sparse, each min-max normalised per query."""
    _check_weight(weight)
    if not sparse and not dense:
        return {}
    return _fuse(_dict_chunks([sparse, dense]), _interpolation_of(weight), depth).to_dict()


def _check_weight(weight: float) -> None:
    if not 0.0 <= weight <= 1.0:
        raise InvalidArgumentError(f"the interpolation weight must lie in [0, 1], got {weight}")


def tune_weight(
    sparse: Run,
    dense: Run,
    qrels: Mapping[str, Mapping[str, int]],
    measure: str = TUNE_MEASURE,
    weights: Sequence[float] = WEIGHT_GRID,
    depth: int | None = None,
    **eval_kw,
) -> tuple[float, dict[float, float]]:
    """(best weight, {weight: measure}) over the judged queries that both runs retrieved for; ties
    go to the smaller weight. A query missing from one run would pull the weight towards the other
    run (a dense run of the dev queries only, tuned on training qrels, came out at weight 0), so
    such queries are left out, and none left is an error."""
    from dense_pt.evaluation import evaluate_run

    judged = {q: h for q, h in qrels.items() if q in sparse and q in dense}
    if not judged:
        raise InvalidArgumentError(
            f"none of the {len(qrels)} tuning queries is in both runs (the sparse run has "
            f"{sum(q in sparse for q in qrels)}, the dense run {sum(q in dense for q in qrels)}): tune on "
            "queries both runs retrieved for, or pass a fixed weight"
        )
    sp = {q: sparse.get(q, {}) for q in judged}
    de = {q: dense.get(q, {}) for q in judged}
    table = {}
    for w in weights:
        fused = interpolate(sp, de, w, depth)
        table[w] = evaluate_run(fused, judged, [measure], **eval_kw).measures[measure]
    best = max(table, key=lambda w: (table[w], -w))
    return best, table


def tune_aligned(
    runs: AlignedRuns,
    qrels: Mapping[str, Mapping[str, int]],
    measure: str = TUNE_MEASURE,
    weights: Sequence[float] = WEIGHT_GRID,
    depth: int | None = None,
    **eval_kw: Any,
) -> tuple[float, dict[float, float]]:
    """``tune_weight`` over two run files (``AlignedRuns([sparse, dense])``), streamed: each
    weight's fused run is evaluated a chunk of queries at a time, never held."""
    from dense_pt.evaluation import evaluate_run

    sparse, dense = runs.indexes
    judged = {q: h for q, h in qrels.items() if q in sparse.position and q in dense.position}
    if not judged:
        raise InvalidArgumentError(
            f"none of the {len(qrels)} tuning queries is in both runs (the sparse run has "
            f"{sum(q in sparse.position for q in qrels)}, the dense run {sum(q in dense.position for q in qrels)}): "
            "tune on queries both runs retrieved for, or pass a fixed weight"
        )
    table = {}
    for w in weights:
        fused = fused_chunks(runs, _interpolation_of(w), depth, only=judged)
        table[w] = evaluate_run(fused, judged, [measure], **eval_kw).measures[measure]
    best = max(table, key=lambda w: (table[w], -w))
    return best, table


def method_of(
    method: str, weight: float | None = None, rrf_k: int = RRF_K
) -> Callable[[int, RunChunk], np.ndarray]:
    """A fusion method's per-row contribution (``"rrf"``, or ``"interpolation"`` with ``weight``)."""
    if method == "rrf":
        if rrf_k < 0:
            raise InvalidArgumentError(f"rrf k must be >= 0, got {rrf_k}")
        return _rrf_of(rrf_k)
    if weight is None:
        raise InvalidArgumentError("interpolation needs a weight")
    _check_weight(weight)
    return _interpolation_of(weight)


def fused_chunks(runs: AlignedRuns, contribution: Callable[[int, RunChunk], np.ndarray], depth: int | None,
                 only: Container[str] | None = None) -> Iterator[RunChunk]:  # fmt: skip
    """The fused run of two run files, a chunk of queries at a time (``only``: just these queries)."""
    for chunks in runs.chunks(only=only):
        yield _fuse(chunks, contribution, depth)


def write_fused(runs: AlignedRuns, out: str | Path, contribution: Callable[[int, RunChunk], np.ndarray],
                depth: int | None, tag: str) -> int:  # fmt: skip
    """Write the fused run (Arrow or TREC by ``out``'s name); the rows written."""
    with RunWriter(out, tag=tag) as w:
        for f in fused_chunks(runs, contribution, depth):
            w.write(f.qids, f.offsets, f.docids, f.scores)
    return w.rows


def fuse_files(
    sparse: str | Path,
    dense: str | Path,
    out: str | Path,
    settings: FuseSettings | None = None,
    tune_qrels: str | Path | None = None,
) -> dict[str, Any]:
    """``dense-pt fuse``: two runs (TREC or Arrow) fused into ``out``, streamed a chunk of queries at
    a time, with ``settings`` (default: ``FuseSettings()``; e.g. ``FuseSettings(method="rrf")``).
    Interpolation needs exactly one of ``weight`` and ``tune_qrels`` (qrels of queries to choose the
    weight on, not the ones reported). Returns what was done: the method, and the weight (with the
    tuning's measure and value) or RRF's k, and the settings (``"settings"``). The queries come in
    the sparse run's order, then those only the dense run has."""
    from dense_pt.data import load_qrels

    s = FuseSettings() if settings is None else settings
    if s.method == "rrf" and tune_qrels is not None:
        raise InvalidArgumentError("--tune-qrels is for --method interpolation")
    if s.method == "interpolation" and (s.weight is None) == (tune_qrels is None):
        raise InvalidArgumentError("interpolation needs exactly one of --weight W or --tune-qrels QRELS")
    info: dict[str, Any] = {"method": s.method, "settings": s.model_dump()}
    with AlignedRuns([sparse, dense]) as runs:
        if s.method == "rrf":
            info["rrf_k"] = s.rrf_k
            write_fused(runs, out, method_of("rrf", rrf_k=s.rrf_k), s.k, f"fused-{s.method}")
            return info
        weight = s.weight
        if weight is None and tune_qrels is not None:
            weight, table = tune_aligned(runs, load_qrels(tune_qrels), s.tune_measure)
            info["tuned_on"] = {"qrels": str(tune_qrels), "measure": s.tune_measure, "value": table[weight]}
        assert weight is not None  # given, or tuned just above
        write_fused(runs, out, method_of("interpolation", weight), s.k, f"fused-{s.method}")
        info["weight"] = weight
    return info
