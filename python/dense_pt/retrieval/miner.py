"""The hard-negative miner, vectorised over chunks of a run (``dense_pt.retrieval.negatives``
documents the steps and options; this module computes them).

Each chunk of queries is ranked, cut to its pool, stripped of positives and filtered with numpy
over all its rows at once; the only per-query Python work left is what is per query by nature: the
judged positives of each query, and the seeded draw of ``sampling="random"`` (one
``numpy.random.Generator`` per query, so a query's draw never depends on the others). Negatives
are kept as dictionary codes (4 bytes each, plus 4 for the score) until the run ends; then the
queries are put in the judgements' order and the passage-id table in order of first appearance,
so the file is byte for byte what the mining of earlier versions wrote."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dense_pt.config.retrieval import MineCommand
from dense_pt.errors import InvalidArgumentError, MismatchError
from dense_pt.runs import RunChunk, rank_order

Scorer = Callable[[Sequence[tuple[str, str]]], Sequence[float] | np.ndarray]
STATS = ("excluded_positives", "filtered_by_margin_or_score", "queries_with_fewer_than_num",
         "queries_without_positive_score")  # fmt: skip


@dataclass
class MinedNegatives:
    """Negatives in CSR form: query ``i`` (``qids[i]``) has ``negatives[offsets[i]:offsets[i+1]]``
    (indices into the passage-id table ``pids``) with ``scores``, in rank order."""

    qids: list[str]
    offsets: np.ndarray  # uint64
    pids: pa.Array  # utf8
    negatives: np.ndarray  # uint32
    scores: np.ndarray | None  # float32
    stats: dict[str, Any] = field(default_factory=dict)

    def rows(self) -> dict[str, list[tuple[str, float]]]:
        """``{qid: [(pid, score), ...]}`` (Python objects: for small tables)."""
        pids = self.pids.to_pylist()
        scores = self.scores.tolist() if self.scores is not None else [math.nan] * len(self.negatives)
        negs = self.negatives.tolist()
        out = {}
        for i, q in enumerate(self.qids):
            a, b = int(self.offsets[i]), int(self.offsets[i + 1])
            out[q] = [(pids[negs[j]], float(scores[j])) for j in range(a, b)]
        return out


def query_rng(seed: int, qid: str) -> np.random.Generator:
    import hashlib

    digest = hashlib.sha256(f"{seed}\x00{qid}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


class Miner:
    """Feed it a run's chunks (``add``), then ``finish`` for the negatives. ``widen``: the pool's
    extra depth for ``pool="rank+positives"`` (the largest positive count of a mined query)."""

    def __init__(self, s: MineCommand, qrels: Mapping[str, Mapping[str, int]], widen: int = 0,
                 positive_scores: Mapping[str, Mapping[str, float]] | None = None,
                 scorer: Scorer | None = None, known_ids: Collection[str] | pa.Array | None = None):  # fmt: skip
        self.s, self.qrels, self.widen = s, qrels, widen
        self.given, self.scorer, self.known = positive_scores or {}, scorer, known_ids
        self.margins = s.absolute_margin is not None or s.relative_margin is not None
        self.order = {q: i for i, q in enumerate(qrels)}
        self.stats = dict.fromkeys(STATS, 0)
        self._qpos: list[np.ndarray] = []  # per chunk: the qrels position of each kept query
        self._counts: list[np.ndarray] = []
        self._codes: list[pa.Array] = []  # dictionary-encoded negatives
        self._scores: list[np.ndarray] = []
        self._run_ids: list[pa.Array] = []  # distinct passages of the run (to check against known ids)
        self.any_shared = False

    def add(self, chunk: RunChunk) -> None:
        qids = chunk.qids.to_pylist()
        counts = np.diff(chunk.offsets)
        qpos = np.array([self.order.get(q, -1) for q in qids], dtype=np.int64)
        self.any_shared = self.any_shared or bool((qpos >= 0).any())
        mined = (qpos >= 0) & (counts > 0)
        if not mined.any():
            return
        groups = chunk.query_of_row
        if mined.all():  # a training run: every query judged (no copy)
            g, docs, scores = groups, chunk.docids, chunk.scores
        else:
            rows = np.flatnonzero(mined[groups])
            g, docs, scores = groups[rows], chunk.docids.take(pa.array(rows)), chunk.scores[rows]
        if self.known is not None:
            self._run_ids.append(pc.unique(docs))
        order = rank_order(g, scores, docs, "docno", ascending_ids=True)  # the miner's order: ids ascending
        g, docs, scores = g[order], docs.take(pa.array(order)), scores[order]
        starts = np.searchsorted(g, np.arange(len(qids)))
        pos = np.arange(len(g)) - starts[g]  # 0-based rank within the query
        is_pos, found = self._positives(qids, mined, g, docs, scores)
        in_pool = np.ones(len(g), bool) if self.s.pool == "filtered" else pos < self.s.depth + self.widen
        cand = in_pool & ~is_pos
        self.stats["excluded_positives"] += int(np.count_nonzero(in_pool & is_pos))
        cand = self._filter(qids, mined, found, g, scores, cand)
        kept, nkept = self._select(qids, g, cand)
        live = mined & ~self._skipped
        self._qpos.append(qpos[live])
        self._counts.append(nkept[live])
        self._codes.append(docs.take(pa.array(kept)).dictionary_encode())
        self._scores.append(scores[kept].astype(np.float32))

    def _positives(self, qids: list[str], mined: np.ndarray, g: np.ndarray, docs: pa.Array,
                   scores: np.ndarray) -> tuple[np.ndarray, dict[tuple[int, str], float]]:  # fmt: skip
        """Which rows are judged positives of their query, and the run's score of each positive
        found (only needed, and only computed, with a margin)."""
        pos_q, pos_d = [], []
        for i in np.flatnonzero(mined).tolist():
            for d, r in self.qrels[qids[i]].items():
                if r > 0:
                    pos_q.append(i)
                    pos_d.append(d)
        if not pos_d:
            return np.zeros(len(g), bool), {}
        table = pa.array(sorted(set(pos_d)), pa.utf8())
        code = pc.fill_null(pc.index_in(docs, value_set=table), -1).to_numpy().astype(np.int64)
        pos_code = pc.index_in(pa.array(pos_d, pa.utf8()), value_set=table).to_numpy().astype(np.int64)
        width = len(table)
        keys = np.sort(np.asarray(pos_q, dtype=np.int64) * width + pos_code)
        hit = g * width + code
        at = np.minimum(np.searchsorted(keys, hit), len(keys) - 1)
        is_pos = (code >= 0) & (keys[at] == hit)
        found: dict[tuple[int, str], float] = {}
        if self.margins:
            at = np.flatnonzero(is_pos)
            for i, d, sc in zip(
                g[at].tolist(), docs.take(pa.array(at)).to_pylist(), scores[at].tolist(), strict=True
            ):
                found[(i, d)] = sc
        return is_pos, found

    def _reference(
        self, qids: list[str], mined: np.ndarray, found: dict[tuple[int, str], float]
    ) -> np.ndarray:
        """s+ of each query of the chunk: the lowest score among its positives (NaN: none can be
        scored). Positives outside the run are scored by the scorer, one call per chunk."""
        ref = np.full(len(qids), np.nan)
        scored: dict[int, list[float]] = {}
        missing: list[tuple[str, str]] = []
        owner: list[int] = []
        for i in np.flatnonzero(mined).tolist():
            q = qids[i]
            given = self.given.get(q, {})
            mine = scored.setdefault(i, [])
            for d in sorted(d for d, r in self.qrels[q].items() if r > 0):
                if d in given:
                    mine.append(float(given[d]))
                elif (i, d) in found:
                    mine.append(found[(i, d)])
                else:
                    missing.append((q, d))
                    owner.append(i)
        if missing and self.known is not None:  # a positive outside the corpus has no score: skipped
            known = self._known([d for _, d in missing])
            missing = [m for m, k in zip(missing, known, strict=True) if k]
            owner = [o for o, k in zip(owner, known, strict=True) if k]
        if missing:
            if self.scorer is None:
                q, d = missing[0]
                raise InvalidArgumentError(
                    f"query {q!r}: positive {d!r} is not in the run ({len(missing)} such positives in its chunk of "
                    "the run), so the margin has no positive score to compare with: give a scorer (e.g. PairScorer "
                    "over the run's embeddings; --query-embeddings/--passage-embeddings on the command line) or "
                    "positive_scores"
                )
            got = self.scorer(missing)
            if len(got) != len(missing):
                raise InvalidArgumentError(f"the scorer returned {len(got)} scores for {len(missing)} pairs")
            for i, sc in zip(owner, got, strict=True):
                if not math.isnan(float(sc)):
                    scored[i].append(float(sc))
        for i, v in scored.items():
            if v:
                ref[i] = min(v)
        return ref

    def _known(self, ids: list[str]) -> list[bool]:
        """Which of ``ids`` the corpus holds (one vectorised lookup for an Arrow id table)."""
        if isinstance(self.known, pa.Array | pa.ChunkedArray):
            return pc.is_in(pa.array(ids, pa.utf8()), value_set=self.known).to_pylist()
        assert self.known is not None
        return [d in self.known for d in ids]

    def _filter(self, qids: list[str], mined: np.ndarray, found: dict[tuple[int, str], float], g: np.ndarray,
                scores: np.ndarray, cand: np.ndarray) -> np.ndarray:  # fmt: skip
        """The margin and score filters (counted); queries whose positive has no score drop out."""
        s = self.s
        self._skipped = np.zeros(len(qids), dtype=bool)
        if self.margins:
            ref = self._reference(qids, mined, found)
            self._skipped = mined & np.isnan(ref)
            self.stats["queries_without_positive_score"] += int(np.count_nonzero(self._skipped))
            cand = cand & ~self._skipped[g]
            r = ref[g]
            keep = np.ones(len(g), dtype=bool)
            if s.absolute_margin is not None:
                keep &= scores + s.absolute_margin <= r
            if s.relative_margin is not None:
                rm = s.relative_margin
                keep &= scores <= (r * (1 - rm) if s.relative_form == "signed" else r - np.abs(r) * rm)
            self.stats["filtered_by_margin_or_score"] += int(np.count_nonzero(cand & ~keep))
            cand = cand & keep
        if s.max_score is not None or s.min_score is not None:
            keep = np.ones(len(g), dtype=bool)
            if s.max_score is not None:
                keep &= scores <= s.max_score
            if s.min_score is not None:
                keep &= scores >= s.min_score
            self.stats["filtered_by_margin_or_score"] += int(np.count_nonzero(cand & ~keep))
            cand = cand & keep
        return cand

    def _select(self, qids: list[str], g: np.ndarray, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows kept (the first ``depth`` survivors less ``skip_top``, then ``num`` of them) and
        the count per query."""
        s = self.s
        at = np.flatnonzero(cand)
        ga = g[at]
        first = np.searchsorted(ga, np.arange(len(qids)))
        idx = np.arange(len(at)) - first[ga]  # rank among the survivors
        at, ga, idx = at[idx < s.depth], ga[idx < s.depth], idx[idx < s.depth]
        keep = idx >= s.skip_top
        at, ga = at[keep], ga[keep]
        n = np.bincount(ga, minlength=len(qids))
        if s.num:
            live = ~self._skipped & (np.bincount(g, minlength=len(qids)) > 0)
            self.stats["queries_with_fewer_than_num"] += int(np.count_nonzero(live & (n < s.num)))
            over = np.flatnonzero(n > s.num)
            if len(over):
                pick = np.ones(len(at), dtype=bool)
                start = np.searchsorted(ga, over)
                for q, a in zip(over.tolist(), start.tolist(), strict=True):
                    pick[a : a + n[q]] = False
                    if s.sampling == "top":
                        chosen = np.arange(s.num)
                    else:
                        chosen = np.sort(
                            query_rng(s.seed, qids[q]).choice(int(n[q]), size=s.num, replace=False)
                        )
                    pick[a + chosen] = True
                at, ga = at[pick], ga[pick]
                n = np.bincount(ga, minlength=len(qids))
        return at, n

    def finish(self) -> MinedNegatives:
        """The negatives in the judgements' query order, passage ids in order of first appearance."""
        if self.known is not None:
            self._check_known()
        qpos = np.concatenate(self._qpos) if self._qpos else np.zeros(0, np.int64)
        counts = np.concatenate(self._counts) if self._counts else np.zeros(0, np.int64)
        if self._codes:
            unified = pa.chunked_array(self._codes).unify_dictionaries()
            table = unified.chunk(0).dictionary if unified.num_chunks else pa.array([], pa.utf8())
            codes = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in unified.chunks])
            scores = np.concatenate(self._scores)
        else:
            table, codes, scores = pa.array([], pa.utf8()), np.zeros(0, np.int32), np.zeros(0, np.float32)
        self._codes, self._scores = [], []
        perm = np.argsort(qpos, kind="stable")
        starts = np.concatenate([[0], np.cumsum(counts)])[:-1]
        rows = _ranges(starts[perm], counts[perm])
        codes, scores = codes[rows], scores[rows]
        table, codes = _first_appearance(table, codes)
        offsets = np.concatenate([[0], np.cumsum(counts[perm])]).astype(np.uint64)
        names = list(self.qrels)
        qids = [names[i] for i in qpos[perm].tolist()]
        stats = {"queries": len(qids), "negatives": len(codes), **self.stats}
        return MinedNegatives(qids, offsets, table, codes.astype(np.uint32), scores, stats)

    def _check_known(self) -> None:
        if not self._run_ids:
            return
        run_ids = pc.unique(pa.chunked_array(self._run_ids).combine_chunks())
        known = (
            self._known(run_ids.to_pylist())
            if not isinstance(self.known, pa.Array | pa.ChunkedArray)
            else None
        )
        if known is None:
            unknown = run_ids.filter(pc.invert(pc.is_in(run_ids, value_set=self.known))).to_pylist()
        else:
            unknown = [d for d, k in zip(run_ids.to_pylist(), known, strict=True) if not k]
        if unknown:
            raise MismatchError(
                f"the run names document {unknown[0]!r}, not in the corpus ({len(unknown)} such documents)"
            )


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(s, s + c)`` for each (s, c), vectorised."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    base = np.repeat(starts - (ends - counts), counts)
    return base + np.arange(total)


def _first_appearance(table: pa.Array, codes: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """The id table reordered so that ids appear in it as they first appear in ``codes``."""
    n = len(table)
    if n == 0:
        return table, codes
    first = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    step = 1 << 22  # ids per np.minimum.at call: bounds the arange it needs
    for a in range(0, len(codes), step):
        np.minimum.at(first, codes[a : a + step], np.arange(a, min(a + step, len(codes))))
    used = np.flatnonzero(first != np.iinfo(np.int64).max)
    order = used[np.argsort(first[used], kind="stable")]
    remap = np.full(n, -1, dtype=np.int64)
    remap[order] = np.arange(len(order))
    return table.take(pa.array(order)), remap[codes]


def mined_query_ids(chunks: Iterable[RunChunk], qrels: Mapping[str, Mapping[str, int]]) -> set[str]:
    """The judged queries a run has hits for."""
    out: set[str] = set()
    for c in chunks:
        counts = np.diff(c.offsets)
        out.update(q for q, n in zip(c.qids.to_pylist(), counts.tolist(), strict=True) if n and q in qrels)
    return out
