"""ID-based training rows over the corpus store, and the deterministic group sampler.

A row is a training query (it has text and at least one judged positive in the store). Its
group for epoch e is 1 positive + (n - 1) negatives, drawn from a generator seeded by
(seed, epoch, query id): the same epoch gives the same group whatever the batch composition,
the number of workers or a resume. Negatives come from the negatives file; a query with too few
is topped up with random corpus passages that are not judged positives (counted in ``stats``).
Passages come from the store as token ids; queries are tokenized once, with the model's tokenizer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from dense_pt.errors import InvalidArgumentError, MismatchError
from dense_pt.retrieval.miner import MinedNegatives


def row_rng(seed: int, epoch: int, key: str) -> np.random.Generator:
    h = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
    return np.random.default_rng([seed, epoch, h])


@dataclass
class GroupSampler:
    """Rows and their candidates, as store row indices."""

    qids: list[str]
    query_tokens: list[np.ndarray]
    positives: list[np.ndarray]  # store rows of each query's judged positives
    negatives: list[np.ndarray]  # store rows of each query's candidate negatives (rank order; int32
    # views into one array when read from a negatives file)
    num_passages: int
    group_size: int
    seed: int
    stats: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.qids)

    def group(self, row: int, epoch: int) -> tuple[int, np.ndarray]:
        """(positive row, negative rows [group_size - 1]) of query ``row`` in ``epoch``."""
        rng = row_rng(self.seed, epoch, self.qids[row])
        pos = self.positives[row]
        positive = int(pos[rng.integers(len(pos))])
        k = self.group_size - 1
        cand = self.negatives[row]
        if len(cand) >= k:
            negs = cand[np.sort(rng.choice(len(cand), size=k, replace=False))] if k else cand[:0]
        else:
            fill: list[int] = []
            banned = set(pos.tolist()) | set(cand.tolist())
            while len(fill) < k - len(cand):
                r = int(rng.integers(self.num_passages))
                if r not in banned:
                    fill.append(r)
                    banned.add(r)
            negs = np.concatenate([cand, np.asarray(fill, dtype=np.int64)])
        return positive, negs.astype(np.int64)


def build_sampler(
    store: Any,
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    negatives: MinedNegatives | Mapping[str, Sequence[str]] | None,
    tokenize: Any,
    group_size: int,
    seed: int,
    restrict_to: Sequence[str] | None = None,
) -> GroupSampler:
    """Resolve ids against the store; refuse files that name unknown passages or another corpus.
    ``negatives``: a negatives file as arrays (``read_mined``: the passage-id table is resolved
    once, and each query's negatives are a slice of one array: 500k queries x 200 negatives cost
    4 bytes each, not a Python object each) or ``{qid: [pid, ...]}``."""
    if group_size < 1:
        raise InvalidArgumentError(f"group_size must be >= 1, got {group_size}")
    judged_rows = _judged_rows(store, qrels)
    neg_of = _negative_rows(store, negatives)
    keep = set(restrict_to) if restrict_to is not None else None
    qids, poss, negs = [], [], []
    skipped = {"no_text": 0, "no_positive_in_store": 0, "filled_negatives": 0}
    for q, ds in qrels.items():
        if keep is not None and q not in keep:
            continue
        if q not in queries:
            skipped["no_text"] += 1
            continue
        rows = judged_rows[q]
        pos = [r for (d, rel), r in zip(ds.items(), rows, strict=True) if rel > 0 and r >= 0]
        if not pos:
            skipped["no_positive_in_store"] += 1
            continue
        cand = neg_of(q)
        # a negative judged relevant for this query (another tool's file) is not a negative
        judged_pos = np.asarray(
            [r for (d, rel), r in zip(ds.items(), rows, strict=True) if rel > 0 and r >= 0]
        )
        if len(cand) and (cand[:, None] == judged_pos[None, :]).any():
            cand = cand[~(cand[:, None] == judged_pos[None, :]).any(axis=1)]
        if len(cand) < group_size - 1:
            skipped["filled_negatives"] += 1
        qids.append(q)
        poss.append(np.asarray(pos, dtype=np.int64))
        negs.append(cand)
    if not qids:
        raise InvalidArgumentError("no training query: none has text and a judged positive in the store")
    enc = tokenize([queries[q] for q in qids])
    toks = [np.asarray(t, dtype=np.int64) for t in enc]
    return GroupSampler(
        qids, toks, poss, negs, len(store), group_size, seed, {"queries": len(qids), **skipped}
    )


def _judged_rows(store: Any, qrels: Mapping[str, Mapping[str, int]]) -> dict[str, list[int]]:
    """Each query's judged passages as store rows (-1 where the store lacks one), in qrels order."""
    docs = [d for ds in qrels.values() for d in ds]
    rows = store.rows_of(docs).tolist() if docs else []
    if docs and max(rows) < 0:
        raise MismatchError(
            "no judged document of the qrels is in the corpus store (qrels for another corpus?)"
        )
    out, at = {}, 0
    for q, ds in qrels.items():
        out[q] = rows[at : at + len(ds)]
        at += len(ds)
    return out


def _negative_rows(store: Any, negatives: Any) -> Any:
    """``neg_of(qid)``: the query's negatives as store rows (int32, rank order), refusing a passage
    the store lacks."""
    empty = np.zeros(0, dtype=np.int32)
    if negatives is None:
        return lambda q: empty
    if not isinstance(negatives, MinedNegatives):
        qids = list(negatives)
        counts = [len(negatives[q]) for q in qids]
        table = pa.array([d for q in qids for d in negatives[q]], pa.utf8())
        negatives = MinedNegatives(qids, np.concatenate([[0], np.cumsum(counts)]).astype(np.uint64), table,
                                   np.arange(len(table), dtype=np.uint32), None)  # fmt: skip
    table_rows = store.rows_of(negatives.pids)
    missing = np.flatnonzero(table_rows < 0)
    used = np.zeros(len(table_rows), dtype=bool)
    used[negatives.negatives] = True
    missing = missing[used[missing]]
    if len(missing):
        p = negatives.pids[int(missing[0])].as_py()
        q = _query_naming(negatives, int(missing[0]))
        raise MismatchError(f"negatives name passage {p!r} (query {q!r}), which is not in the store")
    rows = table_rows.astype(np.int32)[negatives.negatives]
    offsets = negatives.offsets.astype(np.int64)
    index = {q: i for i, q in enumerate(negatives.qids)}

    def neg_of(q: str) -> np.ndarray:
        i = index.get(q)
        return empty if i is None else rows[offsets[i] : offsets[i + 1]]

    return neg_of


def _query_naming(negatives: MinedNegatives, pid_index: int) -> str:
    at = int(np.flatnonzero(negatives.negatives == pid_index)[0])
    return negatives.qids[int(np.searchsorted(negatives.offsets.astype(np.int64), at, side="right")) - 1]


def pad_pairs(
    firsts: Sequence[np.ndarray], seconds: Sequence[np.ndarray], cls: int, sep: int, pad_id: int,
    max_first: int, max_length: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """[CLS] a [SEP] b [SEP] for a cross-encoder: (input_ids, attention_mask, token_type_ids)."""
    rows = []
    for a, b in zip(firsts, seconds, strict=True):
        a = a[:max_first]
        b = b[: max(0, max_length - 3 - len(a))]
        rows.append((a, b))
    width = max(len(a) + len(b) + 3 for a, b in rows)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for i, (a, b) in enumerate(rows):
        seq = np.concatenate([[cls], a, [sep], b, [sep]])
        ids[i, : len(seq)] = seq
        mask[i, : len(seq)] = 1
        types[i, len(a) + 2 : len(seq)] = 1
    return ids, mask, types
