"""How a run's hits are ranked: score descending, equal scores by passage id descending
(trec_eval's rule, ``"docno"``) or in the given order (``"score-only"``). The writer, the
evaluation, fusion, merging and the miner all rank through here."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dense_pt.config.choices import DEFAULT_TIE_BREAK, TIE_BREAKS
from dense_pt.errors import InvalidArgumentError


def rank_order(groups: np.ndarray, scores: np.ndarray, docids: pa.Array, tie_break: str,
               ascending_ids: bool = False) -> np.ndarray:  # fmt: skip
    """The permutation that puts rows in rank order within each group (rows are ordered by group
    first): score descending, equal scores by passage id descending (``"docno"``; ascending with
    ``ascending_ids``, as the miner orders them) or in the given order (``"score-only"``). Scores
    compare as Python floats do (``-0.0 == 0.0``). Rows already in that order (a run file's) cost
    one pass; only tied rows are sorted by id."""
    if tie_break not in TIE_BREAKS:
        raise InvalidArgumentError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
    n = len(scores)
    if n < 2:
        return np.arange(n)
    same_group = groups[1:] == groups[:-1]
    in_order = bool(np.all((groups[1:] > groups[:-1]) | (same_group & (scores[1:] <= scores[:-1]))))
    order = np.arange(n) if in_order else np.lexsort((-scores, groups))  # stable: given order among ties
    if tie_break == "score-only":
        return order
    g, s = groups[order], scores[order]
    eq = (g[1:] == g[:-1]) & (s[1:] == s[:-1])
    if not eq.any():
        return order
    tied = np.zeros(n, dtype=bool)
    tied[1:] |= eq
    tied[:-1] |= eq
    at = np.flatnonzero(tied)  # runs of equal (group, score), contiguous in ``order``
    run = np.cumsum(np.concatenate([[True], ~eq[at[1:] - 1]]))  # which run each tied row is in
    # their order by utf-8 bytes, which is Python's code point order
    by_id = np.empty(len(at), dtype=np.int64)
    by_id[pc.sort_indices(docids.take(pa.array(order[at]))).to_numpy()] = np.arange(len(at))
    within = np.lexsort((by_id if ascending_ids else -by_id, run))
    order[at] = order[at][within]
    return order


def rank_hits(hits: Mapping[str, float], tie_break: str = DEFAULT_TIE_BREAK) -> list[tuple[str, float]]:
    """One query's hits best first. Equal scores are ordered as trec_eval orders them, by passage id
    descending (``"docno"``, the default), or kept in the mapping's order, i.e. a run file's line
    order (``"score-only"``). The evaluation and the run writer both rank through here."""
    if tie_break == "docno":
        return sorted(hits.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    if tie_break == "score-only":
        return sorted(hits.items(), key=lambda kv: -kv[1])  # stable: file order among ties
    raise InvalidArgumentError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
