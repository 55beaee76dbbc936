"""Hybrid retrieval: fuse a lexical (BM25) run with a dense one, as pyserini's hybrid search does.

- ``rrf``: reciprocal rank fusion (Cormack, Clarke & Buettcher, SIGIR 2009): a passage scores
  sum over runs of 1 / (k + rank), k = 60 as in the paper; ranks follow the evaluation's tie order.
- ``interpolate``: w * dense + (1 - w) * sparse after min-max normalising each run's scores per
  query (BM25 and cosine scores live on different scales); a passage missing from one run gets that
  run's minimum, i.e. 0 after normalisation.
- ``tune_weight``: the interpolation weight from a grid, chosen on judged queries the caller gives
  (the pipeline: the training split, so the dev split it reports on stays unseen).

Runs are ``{qid: {docid: score}}``; the fused run holds each query's top ``depth`` passages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dense_pt.config.choices import DEFAULT_TIE_BREAK, RRF_K
from dense_pt.config.fusion import TUNE_MEASURE, FuseSettings
from dense_pt.data.judgements import rank_hits
from dense_pt.errors import InvalidArgumentError

Run = Mapping[str, Mapping[str, float]]
# The interpolation weights tried by ``tune_weight``: 0, 0.05, ..., 1 (the dense run's weight).
WEIGHT_GRID = tuple(round(i * 0.05, 2) for i in range(21))


def _top(scores: dict[str, float], depth: int | None) -> dict[str, float]:
    order = rank_hits(scores, DEFAULT_TIE_BREAK)
    return dict(order if depth is None else order[:depth])


def rrf(runs: Sequence[Run], k: int = RRF_K, depth: int | None = None) -> dict[str, dict[str, float]]:
    """Reciprocal rank fusion of ``runs`` over the union of their queries."""
    if k < 0:
        raise InvalidArgumentError(f"rrf k must be >= 0, got {k}")
    out: dict[str, dict[str, float]] = {}
    for q in sorted({q for r in runs for q in r}):
        fused: dict[str, float] = {}
        for run in runs:
            for rank, (d, _) in enumerate(rank_hits(run.get(q, {}), DEFAULT_TIE_BREAK), start=1):
                fused[d] = fused.get(d, 0.0) + 1.0 / (k + rank)
        out[q] = _top(fused, depth)
    return out


def _minmax(scores: Mapping[str, float]) -> dict[str, float]:
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    span = hi - lo
    return {d: (s - lo) / span if span > 0 else 1.0 for d, s in scores.items()}


def interpolate(
    sparse: Run, dense: Run, weight: float, depth: int | None = None
) -> dict[str, dict[str, float]]:
    """``weight`` * dense + (1 - ``weight``) * sparse, each min-max normalised per query."""
    if not 0.0 <= weight <= 1.0:
        raise InvalidArgumentError(f"the interpolation weight must lie in [0, 1], got {weight}")
    out: dict[str, dict[str, float]] = {}
    for q in sorted(set(sparse) | set(dense)):
        s, d = _minmax(sparse.get(q, {})), _minmax(dense.get(q, {}))
        fused = {p: weight * d.get(p, 0.0) + (1.0 - weight) * s.get(p, 0.0) for p in set(s) | set(d)}
        out[q] = _top(fused, depth)
    return out


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


def fuse_files(
    sparse: str | Path,
    dense: str | Path,
    out: str | Path,
    tune_qrels: str | Path | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """``dense-pt fuse``: two TREC runs fused into ``out``; ``settings`` are ``FuseSettings``' fields
    (method, weight, tune_measure, rrf_k, k). Interpolation needs exactly one of ``weight`` and
    ``tune_qrels`` (qrels of queries to choose the weight on, not the ones reported). Returns what
    was done: the method, and the weight (with the tuning's measure and value) or RRF's k."""
    from dense_pt.data import load_qrels, load_run, write_run

    s = FuseSettings(**settings)
    if s.method == "rrf" and tune_qrels is not None:
        raise InvalidArgumentError("--tune-qrels is for --method interpolation")
    if s.method == "interpolation" and (s.weight is None) == (tune_qrels is None):
        raise InvalidArgumentError("interpolation needs exactly one of --weight W or --tune-qrels QRELS")
    a, b = load_run(sparse), load_run(dense)
    info: dict[str, Any] = {"method": s.method}
    if s.method == "rrf":
        fused = rrf([a, b], s.rrf_k, s.k)
        info["rrf_k"] = s.rrf_k
    else:
        weight = s.weight
        if weight is None and tune_qrels is not None:
            weight, table = tune_weight(a, b, load_qrels(tune_qrels), s.tune_measure)
            info["tuned_on"] = {"qrels": str(tune_qrels), "measure": s.tune_measure, "value": table[weight]}
        assert weight is not None  # given, or tuned just above
        fused = interpolate(a, b, weight, s.k)
        info["weight"] = weight
    write_run(out, fused, tag=f"fused-{s.method}")
    return info
