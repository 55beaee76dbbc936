"""Ranking metrics through ir-measures (pytrec_eval provider), with the two silent conventions of
IR evaluation made explicit and recorded in the result:

* ``tie_break``: trec_eval (and so pytrec_eval) orders hits of equal score by docno, descending.
  ``"docno"`` keeps that convention; ``"score-only"`` orders by score alone and keeps tied hits in
  the order the run file lists them (the producing system's order), by handing pytrec_eval
  strictly decreasing surrogate scores.
* ``drop_self_hits``: BEIR drops every hit whose docid equals the query id (for corpora where the
  queries are also documents). Off by default; when on, the number of dropped hits is reported.

Measures are given by their ir-measures names (``nDCG@10``, ``RR@10``, ``R@100``, ``AP``,
``P@5`` ...) and graded relevance is used as given (nDCG gains; binary measures count rel >= 1).
Queries of the run with no judgements are ignored, as trec_eval does; their count is reported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dense_pt.errors import InvalidArgumentError, MismatchError

DEFAULT_MEASURES = ("nDCG@10", "RR@10", "R@10", "R@100", "R@1000", "AP")
TIE_BREAKS = ("docno", "score-only")


@dataclass
class Evaluation:
    measures: dict[str, float]
    settings: dict[str, Any] = field(default_factory=dict)
    per_query: dict[str, dict[str, float]] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.measures)
        out["settings"] = self.settings
        return out


def parse_measures(names: Sequence[str]) -> list[Any]:
    import ir_measures

    out = []
    for name in names:
        try:
            out.append(ir_measures.parse_measure(name))
        except Exception as exc:  # ir-measures raises assorted types for bad names
            raise InvalidArgumentError(f"unknown measure {name!r} ({exc})") from None
    return out


def prepare_run(
    run: Mapping[str, Mapping[str, float]], tie_break: str = "docno", drop_self_hits: bool = False
) -> tuple[dict[str, dict[str, float]], int]:
    """The run as pytrec_eval should see it under the chosen conventions, and the dropped-hit count."""
    if tie_break not in TIE_BREAKS:
        raise InvalidArgumentError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
    out: dict[str, dict[str, float]] = {}
    dropped = 0
    for qid, hits in run.items():
        items = list(hits.items())
        if drop_self_hits:
            kept = [(d, s) for d, s in items if d != qid]
            dropped += len(items) - len(kept)
            items = kept
        for d, s in items:
            if not math.isfinite(s):
                raise InvalidArgumentError(f"query {qid!r}: score of {d!r} is {s}")
        if tie_break == "score-only":
            # Stable sort by score keeps file order among ties; surrogate scores are strictly
            # decreasing so pytrec_eval's docno rule never applies.
            order = sorted(range(len(items)), key=lambda i: -items[i][1])
            n = len(order)
            out[qid] = {items[i][0]: float(n - r) for r, i in enumerate(order)}
        else:
            out[qid] = {d: float(s) for d, s in items}
    return out, dropped


def evaluate_run(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    measures: Sequence[str] = DEFAULT_MEASURES,
    tie_break: str = "docno",
    drop_self_hits: bool = False,
    per_query: bool = False,
) -> Evaluation:
    """Mean of each measure over the run's judged queries (see the module docstring)."""
    import ir_measures

    parsed = parse_measures(measures)
    prepared, dropped = prepare_run(run, tie_break, drop_self_hits)
    judged = [q for q in prepared if q in qrels]
    if not judged:
        raise MismatchError(
            "the run and the qrels share no query id (is the qrels file for another collection?)"
        )
    run_docs = {d for q in judged for d in prepared[q]}
    qrel_docs = {d for q in judged for d in qrels[q]}
    if run_docs and not (run_docs & qrel_docs) and len(judged) >= 5:
        raise MismatchError(
            "no document of the run is judged for any of its queries (is the qrels file for another corpus?)"
        )
    sub_qrels = {q: dict(qrels[q]) for q in judged}
    sub_run = {q: prepared[q] for q in judged}
    # Queries judged but with an empty result list count as zero, like trec_eval -c for them.
    empty = [q for q in judged if not sub_run[q]]
    provider = ir_measures.pytrec_eval
    values: dict[str, float] = {}
    pq: dict[str, dict[str, float]] = {q: {} for q in judged}
    for m in parsed:
        total = 0.0
        for metric in provider.iter_calc([m], sub_qrels, {q: h for q, h in sub_run.items() if h}):
            total += metric.value
            pq[metric.query_id][str(m)] = float(metric.value)
        values[str(m)] = total / len(judged)
    settings = {
        "tie_break": tie_break,
        "drop_self_hits": drop_self_hits,
        "dropped_self_hits": dropped,
        "queries_evaluated": len(judged),
        "queries_with_empty_results": len(empty),
        "run_queries_without_judgements": len(prepared) - len(judged),
        "judged_queries_without_results": sum(1 for q in qrels if q not in prepared),
        "provider": "ir_measures/pytrec_eval",
    }
    return Evaluation(values, settings, pq if per_query else None)
