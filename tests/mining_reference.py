"""Hard-negative mining as dense-pt computed it before runs were streamed (commit 29880bb):
per query, over ``{qid: {pid: score}}`` dicts. Kept verbatim as the reference the vectorised miner
(``dense_pt.retrieval.miner``) must equal, negatives, order, stats and written file alike."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

import numpy as np

from dense_pt.config.defaults import finetune as FT
from dense_pt.errors import InvalidArgumentError, MismatchError
from dense_pt.retrieval.negatives import NegativesTable

Scorer = Callable[[Sequence[tuple[str, str]]], Sequence[float] | np.ndarray]


def _query_rng(seed: int, qid: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}\x00{qid}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _positive_reference(
    run: Mapping[str, Mapping[str, float]],
    positives: Mapping[str, set[str]],
    positive_scores: Mapping[str, Mapping[str, float]] | None,
    scorer: Scorer | None,
    known_ids: Collection[str] | None,
) -> dict[str, float | None]:
    """s+ of every mined query: the lowest score among its positives (None: none can be scored)."""
    given = positive_scores or {}
    scores: dict[str, list[float]] = {}
    missing: list[tuple[str, str]] = []
    for q, pos in positives.items():
        hits = run[q]
        mine = scores.setdefault(q, [])
        for d in sorted(pos):
            if d in given.get(q, {}):
                mine.append(float(given[q][d]))
            elif d in hits:
                mine.append(float(hits[d]))
            elif known_ids is None or d in known_ids:
                missing.append((q, d))
    if missing:
        if scorer is None:
            q, d = missing[0]
            raise InvalidArgumentError(
                f"query {q!r}: positive {d!r} is not in the run ({len(missing)} such positives), so the margin "
                "has no positive score to compare with: give a scorer (e.g. PairScorer over the run's "
                "embeddings; --query-embeddings/--passage-embeddings on the command line) or positive_scores"
            )
        got = scorer(missing)
        if len(got) != len(missing):
            raise InvalidArgumentError(f"the scorer returned {len(got)} scores for {len(missing)} pairs")
        for (q, _), s in zip(missing, got, strict=True):
            if not math.isnan(float(s)):
                scores[q].append(float(s))
    return {q: (min(v) if v else None) for q, v in scores.items()}


def mine_negatives(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    depth: int = FT.NEGATIVES_DEPTH,
    skip_top: int = 0,
    num: int = 0,
    seed: int = 0,
    sampling: str = "random",
    pool: str = "rank",
    absolute_margin: float | None = None,
    relative_margin: float | None = None,
    relative_form: str = "magnitude",
    max_score: float | None = None,
    min_score: float | None = None,
    positive_scores: Mapping[str, Mapping[str, float]] | None = None,
    scorer: Scorer | None = None,
    known_ids: Collection[str] | None = None,
) -> NegativesTable:
    """Mine negatives (see the module docstring). ``known_ids``: the corpus ids; a run naming
    any other id is refused. The settings are checked by ``dense_pt.config.retrieval.MineCommand``
    (the CLI's and the pipeline's model), errors naming the key."""
    mined = _mined_queries(run, qrels, known_ids)
    positives = {q: {d for d, r in qrels[q].items() if r > 0} for q in mined}
    margins = absolute_margin is not None or relative_margin is not None
    reference = _positive_reference(run, positives, positive_scores, scorer, known_ids) if margins else {}
    # sentence-transformers widens its pool by the largest positive count so that range_max
    # non-positives remain even where the positives rank first.
    widen = max((len(p) for p in positives.values()), default=0) if pool == "rank+positives" else 0
    rows: dict[str, list[tuple[str, float]]] = {}
    excluded = filtered = short = no_pos_score = 0
    for qid in mined:
        ranked = sorted(run[qid].items(), key=lambda kv: (-kv[1], kv[0]))
        if pool != "filtered":
            ranked = ranked[: depth + widen]
        cand = [(d, s) for d, s in ranked if d not in positives[qid]]
        excluded += len(ranked) - len(cand)
        if margins:
            ref = reference[qid]
            if ref is None:  # no positive of this query can be scored: its negatives cannot be vetted
                no_pos_score += 1
                continue
            keep = _within_margins(cand, ref, absolute_margin, relative_margin, relative_form)
            filtered += len(cand) - len(keep)
            cand = keep
        if max_score is not None or min_score is not None:
            keep = [(d, s) for d, s in cand if (max_score is None or s <= max_score)
                    and (min_score is None or s >= min_score)]  # fmt: skip
            filtered += len(cand) - len(keep)
            cand = keep
        cand = _draw(cand[:depth][skip_top:], num, sampling, seed, qid)
        if num and len(cand) < num:
            short += 1
        rows[qid] = cand
    stats = {
        "queries": len(rows),
        "negatives": sum(len(v) for v in rows.values()),
        "excluded_positives": excluded,
        "filtered_by_margin_or_score": filtered,
        "queries_with_fewer_than_num": short,
        "queries_without_positive_score": no_pos_score,
    }
    return NegativesTable(rows, stats)


def _mined_queries(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    known_ids: Collection[str] | None,
) -> list[str]:
    """The judged queries the run has hits for; a run or qrels for another collection is refused."""
    if not any(q in run for q in qrels):
        raise MismatchError("the run and the qrels share no query id (qrels for another collection?)")
    if known_ids is not None:
        unknown_q = [d for q in qrels for d in qrels[q] if d not in known_ids]
        if unknown_q and len(unknown_q) == sum(len(v) for v in qrels.values()):
            raise MismatchError(
                f"no judged document of the qrels is in the corpus (e.g. {unknown_q[0]!r}): "
                "is the qrels file for another corpus?"
            )
    mined = [q for q in qrels if run.get(q)]
    if known_ids is not None:
        for q in mined:
            for d in run[q]:
                if d not in known_ids:
                    raise MismatchError(f"the run names document {d!r} (query {q!r}), not in the corpus")
    return mined


def _within_margins(
    cand: list[tuple[str, float]],
    ref: float,
    absolute_margin: float | None,
    relative_margin: float | None,
    relative_form: str,
) -> list[tuple[str, float]]:
    """The candidates scored far enough below the positive's score ``ref``."""
    rel = math.inf
    if relative_margin is not None:
        rel = ref * (1 - relative_margin) if relative_form == "signed" else ref - abs(ref) * relative_margin
    return [(d, s) for d, s in cand if (absolute_margin is None or s + absolute_margin <= ref) and s <= rel]


def _draw(
    cand: list[tuple[str, float]], num: int, sampling: str, seed: int, qid: str
) -> list[tuple[str, float]]:
    """At most ``num`` of the candidates (0: all): the top ones, or a seeded draw kept in rank order."""
    if not num or len(cand) <= num:
        return cand
    if sampling == "top":
        return cand[:num]
    pick = np.sort(_query_rng(seed, qid).choice(len(cand), size=num, replace=False))
    return [cand[i] for i in pick]


def write_negatives(path: str | Path, table: NegativesTable) -> None:
    """Write the binary negatives file (Rust writer: versioned header, CRC32, atomic)."""
    from dense_pt import _native

    qids = list(table.rows)
    pid_index: dict[str, int] = {}
    negs: list[int] = []
    scores: list[float] = []
    offsets = [0]
    for q in qids:
        for p, s in table.rows[q]:
            negs.append(pid_index.setdefault(p, len(pid_index)))
            scores.append(s)
        offsets.append(len(negs))
    _native.negatives_write(
        str(path),
        qids,
        list(pid_index),
        np.asarray(offsets, dtype=np.uint64),
        np.asarray(negs, dtype=np.uint32),
        np.asarray(scores, dtype=np.float32),
    )
