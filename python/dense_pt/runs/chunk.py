"""``RunChunk``: whole queries of a run as columns, the one shape every stage passes a run in; and
the column checks the writer and the Arrow reader share (ids, duplicates)."""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dense_pt.data.ids import id_problem
from dense_pt.errors import InvalidArgumentError

# Rows a reader gathers before handing out a chunk (whole queries, so a chunk may hold more):
# ~40 MB of columns, small enough for any stage, large enough that per-chunk costs vanish.
CHUNK_ROWS = 1 << 20
# Where a chunk's row lies in its file, for a reader's messages: (line, "") in TREC text,
# (None, "row N: ") in Arrow.
Locate = Callable[[int], tuple[int | None, str]]


@dataclass(frozen=True)
class RunChunk:
    """Whole queries of a run, as columns: query ``i`` has the rows ``offsets[i]:offsets[i + 1]``
    of ``docids`` / ``scores`` / ``ranks``, in rank order."""

    qids: pa.Array  # utf8, one per query
    offsets: np.ndarray  # int64, len(qids) + 1, from 0
    docids: pa.Array  # utf8, one per row
    scores: np.ndarray  # float64
    ranks: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.qids)

    @property
    def num_rows(self) -> int:
        return int(self.offsets[-1])

    @property
    def query_of_row(self) -> np.ndarray:
        """The query index (into ``qids``) of every row."""
        return np.repeat(np.arange(len(self.qids), dtype=np.int64), np.diff(self.offsets))

    @staticmethod
    def best_first(qids: Any, offsets: Any, docids: Any, scores: Any) -> RunChunk:
        """A chunk of hits already in rank order (a search's top-k): ranks 1, 2, ... by position."""
        off = np.asarray(offsets, dtype=np.int64)
        ranks = np.arange(int(off[-1]), dtype=np.int64) - np.repeat(off[:-1], np.diff(off)) + 1
        return RunChunk(as_utf8(qids, "qids"), off, as_utf8(docids, "docids"),
                        np.asarray(scores, dtype=np.float64), ranks)  # fmt: skip

    @staticmethod
    def from_mapping(run: Mapping[str, Mapping[str, float]]) -> RunChunk:
        """A ``{qid: {docid: score}}`` run as one chunk, in its order (ranks: the position in each
        query's mapping); a query without hits stays, with no rows."""
        qids = list(run)
        offsets = np.cumsum([0] + [len(run[q]) for q in qids])
        docids = [d for q in qids for d in run[q]]
        return RunChunk.best_first(qids, offsets, docids, [float(s) for q in qids for s in run[q].values()])

    def take(self, queries: np.ndarray | Sequence[int]) -> RunChunk:
        """The chunk's queries at positions ``queries`` (in that order), with all their rows."""
        idx = np.asarray(queries, dtype=np.int64)
        counts = np.diff(self.offsets)[idx]
        starts = self.offsets[:-1][idx]
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        rows = np.repeat(starts - offsets[:-1], counts) + np.arange(int(offsets[-1]), dtype=np.int64)
        return RunChunk(self.qids.take(pa.array(idx)), offsets, self.docids.take(pa.array(rows)),
                        self.scores[rows], self.ranks[rows])  # fmt: skip

    def select(self, keep: Container[str]) -> RunChunk:
        """Only the queries in ``keep`` (e.g. the dev split), in the chunk's order."""
        return self.take([i for i, q in enumerate(self.qids.to_pylist()) if q in keep])

    @staticmethod
    def concat(chunks: Sequence[RunChunk]) -> RunChunk:
        """One chunk of several (their queries in order)."""
        if not chunks:
            return no_rows()
        sizes = np.cumsum([0] + [c.num_rows for c in chunks[:-1]])
        offsets = np.concatenate(
            [[0]] + [c.offsets[1:] + base for c, base in zip(chunks, sizes, strict=True)]
        )
        return RunChunk(pa.concat_arrays([c.qids for c in chunks]), offsets.astype(np.int64),
                        pa.concat_arrays([c.docids for c in chunks]), np.concatenate([c.scores for c in chunks]),
                        np.concatenate([c.ranks for c in chunks]))  # fmt: skip

    def to_dict(self) -> dict[str, dict[str, float]]:
        """``{qid: {docid: score}}`` in rank order (for small runs)."""
        docs, scores = self.docids.to_pylist(), self.scores.tolist()
        out: dict[str, dict[str, float]] = {}
        for i, q in enumerate(self.qids.to_pylist()):
            a, b = int(self.offsets[i]), int(self.offsets[i + 1])
            out[q] = dict(zip(docs[a:b], scores[a:b], strict=True))
        return out


def no_rows(qids: Sequence[str] = ()) -> RunChunk:
    """A chunk naming ``qids`` with no hits for any of them."""
    return RunChunk(pa.array(list(qids), pa.utf8()), np.zeros(len(qids) + 1, np.int64), pa.array([], pa.utf8()),
                    np.zeros(0, np.float64), np.zeros(0, np.int64))  # fmt: skip


def chunks_of_mapping(
    run: Mapping[str, Mapping[str, float]], chunk_rows: int = CHUNK_ROWS
) -> Iterator[RunChunk]:
    """A ``{qid: {docid: score}}`` run as chunks of about ``chunk_rows`` rows, in its order (see
    ``RunChunk.from_mapping``)."""
    part: dict[str, Mapping[str, float]] = {}
    rows = 0
    for qid, hits in run.items():
        part[qid] = hits
        rows += len(hits)
        if rows >= chunk_rows:
            yield RunChunk.from_mapping(part)
            part, rows = {}, 0
    if part:
        yield RunChunk.from_mapping(part)


def as_utf8(values: Any, what: str) -> pa.Array:
    """A utf8 Arrow array of ``values`` (an Arrow array, a list or a numpy array of str)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        if pa.types.is_large_string(values.type) or pa.types.is_dictionary(values.type):
            values = values.cast(pa.utf8())
        if not pa.types.is_string(values.type):
            raise InvalidArgumentError(f"{what} must be strings, got an Arrow {values.type} array")
        return values
    try:
        return pa.array(values, type=pa.utf8())
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InvalidArgumentError(f"{what} must be strings ({exc})") from None


def duplicate_in_query(groups: np.ndarray, docids: pa.Array) -> tuple[int, int] | None:
    """Rows ``(first, second)`` of the first passage listed twice in one group, or None."""
    if len(docids) < 2:
        return None
    enc = docids.dictionary_encode()
    codes = enc.indices.to_numpy().astype(np.int64)
    keys = groups * max(1, len(enc.dictionary)) + codes
    sorted_keys = np.sort(keys)  # (a sort: numpy's and Arrow's hash-based distinct are 10-40x slower here)
    if not (sorted_keys[1:] == sorted_keys[:-1]).any():
        return None
    order = np.lexsort((np.arange(len(codes)), codes, groups))
    same = (groups[order][1:] == groups[order][:-1]) & (codes[order][1:] == codes[order][:-1])
    second = order[1:][same]
    first = order[:-1][same]
    i = int(np.argmin(second))  # the duplicate met first when reading in row order
    return int(first[i]), int(second[i])


def first_bad_id(col: pa.Array) -> tuple[int, str] | None:
    """(row, ``'id' problem``) of the first id in ``col`` that breaks the ids rule
    (``dense_pt.data.ids``), or None: printable ASCII without a space passes vectorised; only the
    other ids (non-ASCII, rare) are checked one by one."""
    plain = pc.match_substring_regex(col, r"^[\x21-\x7e]+$")
    if pc.all(plain).as_py() is not False:
        return None
    for i in np.flatnonzero(~plain.to_numpy(zero_copy_only=False)):
        value = col[int(i)].as_py()
        problem = id_problem(value)
        if problem is not None:
            return int(i), f"{value!r} {problem}"
    return None
