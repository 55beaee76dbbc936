"""Writing a run: ``RunWriter`` writes one atomically, a chunk of queries at a time, in the format
its name asks for (``.arrow``, ``.feather``, ``.ipc``: Arrow IPC, ``runs.arrow``; any other name:
TREC text, ``runs.trec``); ``write_run`` writes a small ``{qid: {docid: score}}`` dict;
``convert_run`` copies a run into the other format.

Rows: a query's hits are contiguous and in rank order. ``RunWriter.write`` ranks each query's hits
as ``rank_hits`` does (score descending; ties by passage id descending, trec_eval's rule, or in the
given order with ``tie_break="score-only"``) and writes rank 1, 2, ...; ``write_chunk`` writes a
chunk read elsewhere as it is. What a reader would refuse (an id breaking the ids rule, a score
that is not finite, a passage twice for one query, a query in two chunks) is never written.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from dense_pt.config.choices import DEFAULT_TIE_BREAK, TIE_BREAKS
from dense_pt.errors import InvalidArgumentError
from dense_pt.fsutil import atomic_file
from dense_pt.runs.arrow import DEPTH_KEY, RUN_FORMAT_VERSION, RUN_SCHEMA, run_batch
from dense_pt.runs.checksum import batch_metadata, schema_metadata
from dense_pt.runs.chunk import RunChunk, as_utf8, chunks_of_mapping, duplicate_in_query, first_bad_id
from dense_pt.runs.rank import rank_order
from dense_pt.runs.read import RunReader, run_format
from dense_pt.runs.trec import DEFAULT_TAG, trec_lines


class RunWriter:
    """Write a run atomically, a chunk of queries at a time (the format from the name: see the
    module docstring). Use as a context manager; the file appears when the block ends without
    an error (an error leaves any previous file in place and no partial one)::

        with RunWriter("run.arrow", tag="bm25") as w:
            w.write(qids, offsets, docids, scores)   # per chunk of queries

    ``ids``: a passage-id table (e.g. ``CorpusStore.ids``) so that ``docids`` may be given as
    integer rows into it. Queries must not repeat across chunks; a query without hits writes
    nothing (as ``write_run`` always did)."""

    def __init__(self, path: str | Path, tag: str = DEFAULT_TAG, tie_break: str = DEFAULT_TIE_BREAK,
                 ids: pa.Array | Sequence[str] | None = None, depth: int | None = None):  # fmt: skip
        if not tag or any(c.isspace() for c in tag):
            raise InvalidArgumentError(f"run tag must be one word, got {tag!r}")
        if tie_break not in TIE_BREAKS:
            raise InvalidArgumentError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
        self.path, self.tag, self.tie_break = Path(path), tag, tie_break
        self.depth = depth  # the k the run was cut to (recorded in an Arrow run: merges read it)
        self.format = run_format(self.path, write=True)
        self.ids = None if ids is None else as_utf8(ids, "ids")
        self.rows = 0  # rows written so far
        self.queries = 0
        self._qids: set[str] = set()
        self._stack = contextlib.ExitStack()
        self._sink: Any = None
        self._arrow: Any = None

    def __enter__(self) -> RunWriter:
        self._sink = self._stack.enter_context(atomic_file(self.path, "wb"))
        if self.format == "arrow":
            meta = {"dense_pt.run": RUN_FORMAT_VERSION, "tag": self.tag, "tie_break": self.tie_break,
                    **schema_metadata()}  # fmt: skip
            if self.depth is not None:
                meta[DEPTH_KEY] = str(int(self.depth))
            opts = pa.ipc.IpcWriteOptions(compression="zstd")
            self._arrow = pa.ipc.new_file(self._sink, RUN_SCHEMA.with_metadata(meta), options=opts)
        return self

    def __exit__(self, *exc: Any) -> bool | None:
        try:
            if self._arrow is not None and exc[0] is None:
                self._arrow.close()
        except BaseException:
            if not self._stack.__exit__(*sys.exc_info()):
                raise
            return None
        return self._stack.__exit__(*exc)

    def write(self, qids: Any, offsets: Any, docids: Any, scores: Any) -> None:
        """One chunk: query ``i`` (``qids[i]``) has the hits ``offsets[i]:offsets[i + 1]`` of
        ``docids`` (strings, or integer rows into ``ids``) and ``scores`` (float64), in any order:
        they are ranked here (see the class docstring)."""
        q = as_utf8(qids, "qids")
        off = np.asarray(offsets, dtype=np.int64)
        sc = np.ascontiguousarray(scores, dtype=np.float64)
        docs = self._docids(docids)
        if len(off) != len(q) + 1 or (len(off) and off[0] != 0) or np.any(np.diff(off) < 0):
            raise InvalidArgumentError(
                f"offsets must have len(qids) + 1 = {len(q) + 1} non-decreasing entries from 0"
            )
        if int(off[-1]) != len(docs) or len(docs) != len(sc):
            raise InvalidArgumentError(
                f"offsets end at {int(off[-1])} but there are {len(docs)} docids and {len(sc)} scores"
            )
        groups = np.repeat(np.arange(len(q), dtype=np.int64), np.diff(off))
        bad = np.flatnonzero(~np.isfinite(sc))
        if len(bad):  # the readers refuse it: never write it
            r = int(bad[0])
            raise InvalidArgumentError(
                f"{self.path}: score of passage {docs[r].as_py()!r} for query "
                f"{q[int(groups[r])].as_py()!r} is {sc[r]}"
            )
        dup = duplicate_in_query(groups, docs)
        if dup is not None:
            raise InvalidArgumentError(
                f"{self.path}: passage {docs[dup[1]].as_py()!r} is given twice for query "
                f"{q[int(groups[dup[1]])].as_py()!r}"
            )
        order = rank_order(groups, sc, docs, self.tie_break)
        counts = np.diff(off)
        ranks = np.arange(len(sc), dtype=np.int64) - np.repeat(off[:-1], counts) + 1
        self._emit(q, off, docs.take(pa.array(order)), sc[order], ranks)

    def write_chunk(self, chunk: RunChunk) -> None:
        """A chunk as it is: its row order and ranks kept (a chunk read from a run, or merged)."""
        self._emit(chunk.qids, chunk.offsets, chunk.docids, chunk.scores, chunk.ranks)

    def _docids(self, docids: Any) -> pa.Array:
        if self.ids is not None and not isinstance(docids, pa.Array | pa.ChunkedArray | list):
            rows = np.asarray(docids)
            if rows.dtype.kind in "iu":
                if len(rows) and (rows.min() < 0 or rows.max() >= len(self.ids)):
                    raise InvalidArgumentError(f"docid rows must lie in [0, {len(self.ids)})")
                return self.ids.take(pa.array(rows.astype(np.int64, copy=False)))
        return as_utf8(docids, "docids")

    def _emit(self, qids: pa.Array, offsets: np.ndarray, docids: pa.Array, scores: np.ndarray,
              ranks: np.ndarray) -> None:  # fmt: skip
        if self._sink is None:
            raise InvalidArgumentError("RunWriter is used as a context manager: `with RunWriter(...) as w:`")
        counts = np.diff(offsets)
        keep = counts > 0  # a query without hits has no row to hold it
        names = qids.filter(pa.array(keep)).to_pylist() if not keep.all() else qids.to_pylist()
        for name in names:
            if not name:
                raise InvalidArgumentError(f"{self.path}: a query id is empty")
            if name in self._qids:
                raise InvalidArgumentError(f"{self.path}: query {name!r} is written twice (in two chunks)")
            self._qids.add(name)
        n = len(scores)
        self.rows += n
        self.queries += len(names)
        if n == 0:
            return
        for what, col in (("query", qids), ("passage", docids)):
            _check_ids(col, what, self.path)
        qcol = qids.take(pa.array(np.repeat(np.arange(len(qids)), counts)))
        if self.format == "arrow":
            batch = run_batch(qcol, docids, scores, ranks)
            self._arrow.write_batch(batch, custom_metadata=batch_metadata(batch))
        else:
            self._sink.write(trec_lines(qcol, docids, scores, ranks, self.tag).encode("utf-8"))


def _check_ids(col: pa.Array, what: str, path: Path) -> None:
    """The ids rule over a column about to be written."""
    bad = first_bad_id(col)
    if bad is not None:
        raise InvalidArgumentError(f"{path}: {what} id {bad[1]}")


def write_run(path: str | Path, run: Mapping[str, Mapping[str, float]], tag: str = DEFAULT_TAG) -> int:
    """Write a ``{qid: {docid: score}}`` run atomically (TREC text or Arrow by the name), each
    query's hits ranked by ``rank_hits``' rule, so the rank column is the order the evaluation
    uses and the file does not depend on dict order; scores are kept exactly. Returns the rows."""
    with RunWriter(path, tag=tag) as w:
        for c in chunks_of_mapping(run):
            w.write(c.qids, c.offsets, c.docids, c.scores)
    return w.rows


def convert_run(src: str | Path, out: str | Path, tag: str | None = None) -> dict[str, Any]:
    """Copy a run into the format ``out``'s name asks for (``.arrow``: Arrow; any other: TREC
    text), rows, order, scores and ranks unchanged; ``tag`` replaces the run's own. Streams: a
    100M-row run never sits in memory. Returns the queries and rows written."""
    reader = RunReader(src)
    with RunWriter(out, tag=tag or reader.tag) as w:
        for chunk in reader.chunks():
            w.write_chunk(chunk)
    return {"queries": w.queries, "rows": w.rows, "format": w.format}
