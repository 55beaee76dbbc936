"""Hard-negative mining from a run, and the negatives file (binary, read and written in Rust).

Mining, per judged query (the semantics of sentence-transformers' ``mine_hard_negatives``, on ids):

1. the run's hits ordered by score (ties by docid);
2. every judged positive (relevance > 0) removed **by id**;
3. optional false-negative filters against the query's positive score ``s+`` (the lowest score
   among its judged positives that the run or ``positive_scores`` gives): ``margin`` keeps a
   candidate only if ``score + margin <= s+``; ``relative_margin`` only if
   ``score <= s+ - |s+| * relative_margin``; ``max_score`` drops candidates above it;
4. the first ``depth`` candidates that remain, minus the first ``skip_top`` of them;
5. ``num`` of those: the top ones (``sampling="top"``) or a uniform sample without replacement
   drawn from a stream seeded by (seed, query id) (``"random"``), kept in rank order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dense_pt import __version__
from dense_pt.errors import InvalidArgumentError, MismatchError
from dense_pt.fsutil import sha256_file, write_json_atomic

SAMPLINGS = ("top", "random")


@dataclass
class NegativesTable:
    """Negatives of each query: ``rows[qid] = [(pid, score), ...]`` in rank order."""

    rows: dict[str, list[tuple[str, float]]]
    stats: dict[str, Any] = field(default_factory=dict)

    def pids(self, qid: str) -> list[str]:
        return [p for p, _ in self.rows.get(qid, [])]


def _query_rng(seed: int, qid: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}\x00{qid}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def mine_negatives(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    depth: int = 200,
    skip_top: int = 0,
    num: int = 30,
    seed: int = 0,
    sampling: str = "random",
    margin: float | None = None,
    relative_margin: float | None = None,
    max_score: float | None = None,
    positive_scores: Mapping[str, Mapping[str, float]] | None = None,
    known_ids: Collection[str] | None = None,
) -> NegativesTable:
    """Mine negatives (see the module docstring). ``known_ids``: the corpus ids; a run naming
    any other id is refused."""
    if sampling not in SAMPLINGS:
        raise InvalidArgumentError(f"sampling must be one of {SAMPLINGS}, got {sampling!r}")
    if depth < 1 or skip_top < 0 or num < 0 or skip_top >= depth:
        raise InvalidArgumentError("need depth >= 1, 0 <= skip_top < depth and num >= 0")
    if not any(q in run for q in qrels):
        raise MismatchError("the run and the qrels share no query id (qrels for another collection?)")
    if known_ids is not None:
        unknown_q = [d for q in qrels for d in qrels[q] if d not in known_ids]
        if unknown_q and len(unknown_q) == sum(len(v) for v in qrels.values()):
            raise MismatchError(
                f"no judged document of the qrels is in the corpus (e.g. {unknown_q[0]!r}): "
                "is the qrels file for another corpus?"
            )
    rows: dict[str, list[tuple[str, float]]] = {}
    excluded = filtered = short = no_pos_score = 0
    for qid, judged in qrels.items():
        hits = run.get(qid)
        if not hits:
            continue
        if known_ids is not None:
            for d in hits:
                if d not in known_ids:
                    raise MismatchError(f"the run names document {d!r} (query {qid!r}), not in the corpus")
        positives = {d for d, r in judged.items() if r > 0}
        ranked = sorted(hits.items(), key=lambda kv: (-kv[1], kv[0]))
        cand = [(d, s) for d, s in ranked if d not in positives]
        excluded += len(ranked) - len(cand)
        if margin is not None or relative_margin is not None:
            pos = [s for d, s in (positive_scores or {}).get(qid, {}).items() if d in positives]
            pos = pos or [hits[d] for d in positives if d in hits]
            if pos:
                ref = min(pos)
                keep = []
                for d, s in cand:
                    if margin is not None and s + margin > ref:
                        continue
                    if relative_margin is not None and s > ref - abs(ref) * relative_margin:
                        continue
                    keep.append((d, s))
                filtered += len(cand) - len(keep)
                cand = keep
            else:
                no_pos_score += 1
        if max_score is not None:
            keep = [(d, s) for d, s in cand if s <= max_score]
            filtered += len(cand) - len(keep)
            cand = keep
        cand = cand[skip_top:depth]
        if num and len(cand) > num:
            if sampling == "top":
                cand = cand[:num]
            else:
                pick = np.sort(_query_rng(seed, qid).choice(len(cand), size=num, replace=False))
                cand = [cand[i] for i in pick]
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


def read_negatives(path: str | Path, known_ids: Collection[str] | None = None) -> NegativesTable:
    """Read a negatives file (refuses corrupt files); with ``known_ids``, refuse unknown passage ids."""
    from dense_pt import _native

    qids, pids, offsets, negs, scores = _native.negatives_read(str(path))
    if known_ids is not None:
        for p in pids:
            if p not in known_ids:
                raise MismatchError(f"{path}: names passage {p!r}, which is not in the corpus")
    rows = {}
    for i, q in enumerate(qids):
        a, b = int(offsets[i]), int(offsets[i + 1])
        rows[q] = [
            (pids[int(negs[j])], float(scores[j]) if scores is not None else float("nan"))
            for j in range(a, b)
        ]
    return NegativesTable(rows)


def export_text(path: str | Path, out: str | Path) -> None:
    from dense_pt import _native
    from dense_pt.fsutil import atomic_file

    text = _native.negatives_to_text(str(path))
    with atomic_file(out, "w", encoding="utf-8") as f:
        f.write(text)


def write_manifest(
    path: str | Path, run_path: str | Path | None, qrels_path: str | Path | None, params: dict, stats: dict
) -> None:
    write_json_atomic(
        path,
        {
            "run": None if run_path is None else str(run_path),
            "run_sha256": None if run_path is None else sha256_file(run_path),
            "qrels": None if qrels_path is None else str(qrels_path),
            "qrels_sha256": None if qrels_path is None else sha256_file(qrels_path),
            "params": params,
            "stats": stats,
            "code_version": __version__,
            "format": "dense-pt negatives v1 (rust/core/src/negatives.rs)",
        },
    )
