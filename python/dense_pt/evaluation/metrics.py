"""Ranking metrics through ir-measures, with the conventions of IR evaluation that toolkits apply
silently made explicit and recorded in the result's ``settings``:

* ``tie_break``: how hits of equal score are ordered. ``"docno"`` (default) is trec_eval's rule,
  passage id descending; ``"score-only"`` keeps tied hits in the order the run lists them (the
  producing system's order). Either way the run is ranked here (``dense_pt.runs.rank_hits``, the
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

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dense_pt._extras import require
from dense_pt.config.choices import DEFAULT_TIE_BREAK, TIE_BREAKS
from dense_pt.config.evaluation import DEFAULT_MEASURES, DEFAULT_REL_LEVEL, EvalMeasures, EvalSettings
from dense_pt.errors import InvalidArgumentError, MismatchError
from dense_pt.runs import RunChunk, RunSource, rank_order, read_run

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
    ir_measures = require("ir_measures", "eval")  # without it: which extra to install, not a traceback

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
    ir_measures = require("ir_measures", "eval")

    for provider in ir_measures.DefaultPipeline.providers:
        if provider.supports(measure) and provider.is_available():
            return provider
    raise InvalidArgumentError(f"no installed ir-measures provider computes {measure}")


def _ranked_chunk(chunk: RunChunk, tie_break: str) -> tuple[list[str], np.ndarray, list[str]]:
    """The chunk's query ids, offsets, and its passage ids in rank order under ``tie_break``
    (``rank_hits``' rule, vectorised over the chunk)."""
    bad = np.flatnonzero(~np.isfinite(chunk.scores))
    qids = chunk.qids.to_pylist()
    if len(bad):
        r = int(bad[0])
        q = qids[int(np.searchsorted(chunk.offsets, r, side="right")) - 1]
        raise InvalidArgumentError(f"query {q!r}: score of {chunk.docids[r].as_py()!r} is {chunk.scores[r]}")
    order = rank_order(chunk.query_of_row, chunk.scores, chunk.docids, tie_break)
    return qids, chunk.offsets, chunk.docids.take(pa.array(order)).to_pylist()


def _ranked_queries(
    chunk: RunChunk, tie_break: str, drop_self_hits: bool
) -> Iterator[tuple[str, list[str], int]]:
    """Each query of the chunk with its passage ids in rank order (``_ranked_chunk``), its own id
    left out with ``drop_self_hits``, and how many hits that dropped."""
    qids, offsets, docs = _ranked_chunk(chunk, tie_break)
    for i, qid in enumerate(qids):
        ranked = docs[offsets[i] : offsets[i + 1]]
        if not drop_self_hits:
            yield qid, ranked, 0
            continue
        kept = [d for d in ranked if d != qid]
        yield qid, kept, len(ranked) - len(kept)


def prepare_run(
    run: RunSource,
    tie_break: str = DEFAULT_TIE_BREAK,
    drop_self_hits: bool = False,
) -> tuple[dict[str, list[str]], int]:
    """Each query's passage ids in rank order under the chosen conventions, and the dropped-hit count."""
    EvalMeasures(tie_break=tie_break)
    out: dict[str, list[str]] = {}
    dropped = 0
    for chunk in read_run(run):
        for qid, ranked, n in _ranked_queries(chunk, tie_break, drop_self_hits):
            dropped += n
            out[qid] = ranked
    return out, dropped


class _Overlap:
    """Is any passage of the run judged for any of its judged queries (the "qrels for another
    corpus" check), in memory bounded by the judgements: the run's passages that some judgement
    names are kept (one vectorised lookup per chunk) and compared with the passages judged for the
    queries that had hits; once one is found, the rest of the run is not looked at."""

    def __init__(self, qrels: Mapping[str, Mapping[str, int]]):
        self.qrels = qrels
        self.judged = pa.array(sorted({d for ds in qrels.values() for d in ds}), pa.utf8())
        self.candidates: set[str] = set()  # run passages some judgement names
        self.wanted: set[str] = set()  # passages judged for a query with hits
        self.any_hit = self.found = False

    def add(self, docs: list[str], queries: list[str]) -> None:
        """A chunk's ranked passages (of its judged queries with hits) and those queries."""
        if self.found or not docs:
            self.any_hit = self.any_hit or bool(docs)
            return
        self.any_hit = True
        hit = pc.is_in(pa.array(docs, pa.utf8()), value_set=self.judged).to_numpy(zero_copy_only=False)
        self.candidates.update(d for d, h in zip(docs, hit, strict=True) if h)
        self.wanted.update(d for q in queries for d in self.qrels[q])
        self.found = not self.candidates.isdisjoint(self.wanted)

    def none(self) -> bool:
        return self.any_hit and not self.found


def evaluate_run(
    run: RunSource,
    qrels: Mapping[str, Mapping[str, int]],
    measures: Sequence[str] = DEFAULT_MEASURES,
    tie_break: str = DEFAULT_TIE_BREAK,
    drop_self_hits: bool = False,
    rel_level: int = DEFAULT_REL_LEVEL,
    per_query: bool = False,
) -> Evaluation:
    """Mean of each measure over the judged queries (see the module docstring); the settings are
    ``EvalSettings``' fields, checked there. ``run``: a run file (TREC or Arrow), a
    ``{qid: {pid: score}}`` mapping, or ``RunChunk`` s; files and chunks are evaluated a chunk of
    queries at a time, so memory is bounded by a chunk and the judgements."""
    names = [measures] if isinstance(measures, str) else list(measures)
    EvalSettings(measures=names, tie_break=tie_break, drop_self_hits=drop_self_hits, rel_level=rel_level)
    parsed = parse_measures(names, rel_level)
    labels = [label for label, _ in parsed]
    by_provider: dict[Any, list[tuple[str, Any]]] = {}
    for label, m in parsed:
        by_provider.setdefault(_provider(m), []).append((label, m))
    providers = {label: p.NAME for p, pairs in by_provider.items() for label, _ in pairs}
    judged = list(qrels)
    row_of = {q: i for i, q in enumerate(judged)}
    # Every judged query starts at zero: missing from the run, or no hits, is a zero.
    values = np.zeros((len(judged), len(parsed)))
    in_run = np.zeros(len(judged), dtype=bool)
    ranked_any = np.zeros(len(judged), dtype=bool)  # in the run with hits left after dropping
    with_hits: list[str] = []
    overlap = _Overlap(qrels)
    dropped = unjudged = 0
    for chunk in read_run(run):
        surrogate: dict[str, dict[str, float]] = {}
        seen_docs: list[str] = []
        for q, ranked, n in _ranked_queries(chunk, tie_break, drop_self_hits):
            dropped += n
            if q not in row_of:
                unjudged += 1
                continue
            in_run[row_of[q]] = True
            ranked_any[row_of[q]] = bool(ranked)
            if ranked and qrels[q]:
                with_hits.append(q)
                seen_docs.extend(ranked)
                # Strictly decreasing surrogate scores: the rank order is the only order a provider sees.
                surrogate[q] = {d: float(len(ranked) - j) for j, d in enumerate(ranked)}
        overlap.add(seen_docs, list(surrogate))
        _score_chunk(by_provider, surrogate, qrels, values, row_of, labels)
    if not in_run.any():
        raise MismatchError(
            "the run and the qrels share no query id (is the qrels file for another collection?)"
        )
    if len(with_hits) >= 5 and overlap.none():
        raise MismatchError(
            "no document of the run is judged for any of its queries (is the qrels file for another corpus?)"
        )
    # Python's left-to-right sum over the judged queries, as before: the same float to the bit.
    means = {label: sum(values[:, j].tolist()) / len(judged) for j, label in enumerate(labels)}
    settings = {
        "tie_break": tie_break,
        "rel_level": rel_level,
        "drop_self_hits": drop_self_hits,
        "dropped_self_hits": dropped,
        "queries_evaluated": len(judged),
        "judged_queries_without_results": int(len(judged) - ranked_any.sum()),
        "run_queries_without_judgements": unjudged,
        "providers": providers,
        "version": EVALUATION_VERSION,
    }
    pq = (
        {q: dict(zip(labels, values[i].tolist(), strict=True)) for i, q in enumerate(judged)}
        if per_query
        else None
    )
    return Evaluation(means, settings, pq)


def _score_chunk(
    by_provider: dict[Any, list[tuple[str, Any]]],
    surrogate: dict[str, dict[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    values: np.ndarray,
    row_of: dict[str, int],
    labels: list[str],
) -> None:
    """Each provider's measures of the chunk's queries with hits, into ``values``."""
    if not surrogate:
        return
    sub_qrels = {q: {d: int(r) for d, r in qrels[q].items()} for q in surrogate}
    col = {label: j for j, label in enumerate(labels)}
    for provider, pairs in by_provider.items():
        label_of = {m: label for label, m in pairs}
        for metric in provider.iter_calc([m for _, m in pairs], sub_qrels, surrogate):
            if metric.query_id in sub_qrels:
                values[row_of[metric.query_id], col[label_of[metric.measure]]] = float(metric.value)
