"""Ranking metrics through ir-measures, with the conventions of IR evaluation that toolkits apply
silently made explicit and recorded in the result's ``settings``:

* ``tie_break``: how hits of equal score are ordered. ``"docno"`` (default) is trec_eval's rule,
  passage id descending; ``"score-only"`` keeps tied hits in the order the run lists them (the
  producing system's order). Either way the run is ranked here (``dense_pt.data.rank_hits``, the
  same function the run writer uses) and handed to ir-measures with strictly decreasing surrogate
  scores, so no provider applies its own tie rule (pytrec_eval breaks ties by docno descending,
  the MS MARCO script by docno ascending).
* ``rel_level``: the lowest grade that counts as relevant for binary measures (RR, R@k, P@k, AP;
  trec_eval's ``-l``). Default 1; TREC DL's graded 0-3 judgements use 2. A level written in the
  measure itself (``RR(rel=2)@10``) wins. nDCG uses the grades as gains whatever the level.
* ``drop_self_hits``: BEIR drops every hit whose id equals the query id (for corpora where the
  queries are also documents). Off by default; when on, the number of dropped hits is reported.
* Judged queries missing from the run (or left without hits) count as zero, as trec_eval ``-c``
  and SimLM's ``compute_mrr`` do; their count is reported. Queries of the run without judgements
  are ignored, as trec_eval does; their count is reported too.

Each measure is computed by the first ir-measures provider that supports it with its parameters
(the order of ``ir_measures.DefaultPipeline``): pytrec_eval for nDCG@k, R@k, P@k and AP, the MS
MARCO provider for ``RR@k`` (trec_eval's ``recip_rank`` has no cutoff, so ``RR@10`` through
pytrec_eval would be the uncut reciprocal rank). The provider of each measure is recorded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dense_pt.config.choices import DEFAULT_TIE_BREAK, TIE_BREAKS
from dense_pt.config.evaluation import DEFAULT_MEASURES, DEFAULT_REL_LEVEL, EvalMeasures, EvalSettings
from dense_pt.data.judgements import rank_hits
from dense_pt.errors import InvalidArgumentError, MismatchError

# Bumped whenever the numbers of a given setting change (2: RR@k cut at k, judged queries missing
# from the run count as zero). Recorded in ``settings`` so stored metrics can be recomputed.
EVALUATION_VERSION = 2

__all__ = [
    "DEFAULT_MEASURES",
    "DEFAULT_REL_LEVEL",
    "DEFAULT_TIE_BREAK",
    "EVALUATION_VERSION",
    "TIE_BREAKS",
    "Evaluation",
    "evaluate_run",
    "parse_measures",
    "prepare_run",
    "split_measures",
]


@dataclass
class Evaluation:
    measures: dict[str, float]
    settings: dict[str, Any] = field(default_factory=dict)
    per_query: dict[str, dict[str, float]] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.measures)
        out["settings"] = self.settings
        return out


def split_measures(names: Iterable[str]) -> list[str]:
    """Each item may be one name or a comma-separated list (``"nDCG@10,RR@10"``); commas inside a
    measure's parameters (``P(rel=2,judged_only=True)@5``) are kept."""
    out: list[str] = []
    for item in names:
        depth, start = 0, 0
        for i, ch in enumerate(item):
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            elif ch == "," and depth == 0:
                out.append(item[start:i])
                start = i + 1
        out.append(item[start:])
    names_out = [n.strip() for n in out]
    if any(not n for n in names_out):
        raise InvalidArgumentError(f"empty measure name in {list(names)!r}")
    return names_out


def parse_measures(names: Sequence[str], rel_level: int = DEFAULT_REL_LEVEL) -> list[tuple[str, Any]]:
    """``(label, measure)`` pairs: the label is the name as written (the result's key), the measure
    carries ``rel=rel_level`` when it is a binary measure that does not set its own level."""
    import ir_measures

    EvalMeasures(rel_level=rel_level)  # its check (ConfigError: "rel_level: must be >= 1, got 0")
    out: list[tuple[str, Any]] = []
    for name in split_measures(names):
        try:
            m = ir_measures.parse_measure(name)
        except Exception as exc:  # ir-measures raises assorted types for bad names
            raise InvalidArgumentError(f"unknown measure {name!r} ({exc})") from None
        label = name  # as written: "RR(rel=1)@10" stays distinct from "RR@10" at another level
        if any(label == seen for seen, _ in out):
            raise InvalidArgumentError(f"measure {name!r} is asked for twice")
        if rel_level != DEFAULT_REL_LEVEL and "rel" in m.SUPPORTED_PARAMS and "rel" not in m.params:
            m = m(rel=rel_level)
        out.append((label, m))
    return out


def _provider(measure: Any) -> Any:
    """The provider ir-measures' default pipeline would use for ``measure``."""
    import ir_measures

    for provider in ir_measures.DefaultPipeline.providers:
        if provider.supports(measure) and provider.is_available():
            return provider
    raise InvalidArgumentError(f"no installed ir-measures provider computes {measure}")


def prepare_run(
    run: Mapping[str, Mapping[str, float]],
    tie_break: str = DEFAULT_TIE_BREAK,
    drop_self_hits: bool = False,
) -> tuple[dict[str, list[str]], int]:
    """Each query's passage ids in rank order under the chosen conventions, and the dropped-hit count."""
    EvalMeasures(tie_break=tie_break)
    out: dict[str, list[str]] = {}
    dropped = 0
    for qid, hits in run.items():
        for d, s in hits.items():
            if not math.isfinite(s):
                raise InvalidArgumentError(f"query {qid!r}: score of {d!r} is {s}")
        ranked = [d for d, _ in rank_hits(hits, tie_break)]
        if drop_self_hits:
            kept = [d for d in ranked if d != qid]
            dropped += len(ranked) - len(kept)
            ranked = kept
        out[qid] = ranked
    return out, dropped


def evaluate_run(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    measures: Sequence[str] = DEFAULT_MEASURES,
    tie_break: str = DEFAULT_TIE_BREAK,
    drop_self_hits: bool = False,
    rel_level: int = DEFAULT_REL_LEVEL,
    per_query: bool = False,
) -> Evaluation:
    """Mean of each measure over the judged queries (see the module docstring); the settings are
    ``EvalSettings``' fields, checked there."""
    names = [measures] if isinstance(measures, str) else list(measures)
    EvalSettings(measures=names, tie_break=tie_break, drop_self_hits=drop_self_hits, rel_level=rel_level)
    parsed = parse_measures(names, rel_level)
    ranked, dropped = prepare_run(run, tie_break, drop_self_hits)
    judged = list(qrels)
    if not any(q in ranked for q in judged):
        raise MismatchError(
            "the run and the qrels share no query id (is the qrels file for another collection?)"
        )
    with_hits = [q for q in judged if ranked.get(q) and qrels[q]]
    run_docs = {d for q in with_hits for d in ranked[q]}
    qrel_docs = {d for q in with_hits for d in qrels[q]}
    if run_docs and not (run_docs & qrel_docs) and len(with_hits) >= 5:
        raise MismatchError(
            "no document of the run is judged for any of its queries (is the qrels file for another corpus?)"
        )
    # Strictly decreasing surrogate scores: the rank order above is the only order a provider sees.
    surrogate = {q: {d: float(len(ranked[q]) - i) for i, d in enumerate(ranked[q])} for q in with_hits}
    sub_qrels = {q: {d: int(r) for d, r in qrels[q].items()} for q in with_hits}
    by_provider: dict[Any, list[tuple[str, Any]]] = {}
    for label, m in parsed:
        by_provider.setdefault(_provider(m), []).append((label, m))
    # Every judged query starts at zero: missing from the run, or no hits, is a zero.
    pq: dict[str, dict[str, float]] = {q: {label: 0.0 for label, _ in parsed} for q in judged}
    providers: dict[str, str] = {}
    for provider, pairs in by_provider.items():
        label_of = {m: label for label, m in pairs}
        for label, _ in pairs:
            providers[label] = provider.NAME
        if not with_hits:
            continue
        for metric in provider.iter_calc([m for _, m in pairs], sub_qrels, surrogate):
            if metric.query_id in sub_qrels:
                pq[metric.query_id][label_of[metric.measure]] = float(metric.value)
    values = {label: sum(pq[q][label] for q in judged) / len(judged) for label, _ in parsed}
    settings = {
        "tie_break": tie_break,
        "rel_level": rel_level,
        "drop_self_hits": drop_self_hits,
        "dropped_self_hits": dropped,
        "queries_evaluated": len(judged),
        "judged_queries_without_results": sum(1 for q in judged if not ranked.get(q)),
        "run_queries_without_judgements": sum(1 for q in ranked if q not in qrels),
        "providers": providers,
        "version": EVALUATION_VERSION,
    }
    return Evaluation(values, settings, pq if per_query else None)
