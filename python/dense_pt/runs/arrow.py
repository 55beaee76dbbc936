"""Arrow IPC runs: the columns, the reader of record batches, the batch a writer writes.

Columns ``query_id`` utf8, ``doc_id`` utf8, ``score`` float64 (the bits computed), ``rank`` int32:
ir-measures' names for a run (``query_id, doc_id, score``, also ir_datasets' ``ScoredDoc``), so
``ir_measures.calc_aggregate(measures, qrels, pandas.read_feather(run))`` evaluates the file with no
renaming (ir-measures ignores ``rank``; it ranks by score). Runs written before 0.x's rename name
them ``qid, docid, score, rank`` (``LEGACY_COLUMNS``): they are read as they are, and their
checksums still verify (a batch's digest covers its values, not the column names).

One record batch per written chunk, zstd-compressed; the schema metadata keeps the run's tag, tie
rule and depth, and each batch carries its checksum (``runs.checksum``). Files written by other
tools need the four columns (either naming) and no checksum.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dense_pt.errors import FormatError, is_out_of_memory
from dense_pt.runs.checksum import declared, impossible_allocation, verify_batch
from dense_pt.runs.chunk import Locate, RunChunk, as_utf8, duplicate_in_query, first_bad_id

RUN_FORMAT_VERSION = "1"
ARROW_SUFFIXES = (".arrow", ".feather", ".ipc")
ARROW_MAGIC = b"ARROW1"
COLUMNS = ("query_id", "doc_id", "score", "rank")
LEGACY_COLUMNS = ("qid", "docid", "score", "rank")
RUN_SCHEMA = pa.schema(
    [(COLUMNS[0], pa.utf8()), (COLUMNS[1], pa.utf8()), (COLUMNS[2], pa.float64()), (COLUMNS[3], pa.int32())]
)
DEPTH_KEY = "dense_pt.depth"  # schema metadata: the k a run was cut to (its hits per query at most)
KINDS = ("strings", "strings", "floating point", "integers")


def open_arrow_run(source: Any, path: Path) -> pa.ipc.RecordBatchFileReader:
    """``pyarrow.ipc.open_file`` on an Arrow run, a damaged or cut-short file refused as one line
    naming ``path`` (pyarrow raises ArrowInvalid, or an OSError, for a damaged footer)."""
    try:
        return pa.ipc.open_file(source)
    except (pa.ArrowInvalid, OSError) as exc:
        if is_out_of_memory(exc):  # the map or a read failed for memory: not the file's fault
            raise
        raise FormatError(
            f"not a readable Arrow IPC file ({exc}): the file is damaged or was cut short; write it again",
            path=path,
        ) from None


def run_metadata(path: Path) -> dict[bytes, bytes]:
    """The schema metadata of an Arrow run."""
    with pa.OSFile(str(path)) as f:
        return dict(open_arrow_run(f, path).schema.metadata or {})


def column_names(schema: pa.Schema, path: Path) -> tuple[str, ...]:
    """The file's names for ``COLUMNS``: today's, or the legacy ones; each column's type checked."""
    names = (
        LEGACY_COLUMNS if schema.get_field_index(COLUMNS[0]) < 0 <= schema.get_field_index("qid") else COLUMNS
    )
    for name, kind in zip(names, KINDS, strict=True):
        if schema.get_field_index(name) < 0:
            raise FormatError(
                f"the Arrow run has no {name!r} column (columns: {schema.names}); a run has "
                f"{', '.join(COLUMNS)} (or, written before dense-pt 0.x renamed them, {', '.join(LEGACY_COLUMNS)})",
                path=path,
            )
        t = schema.field(name).type
        ok = {
            "strings": pa.types.is_string(t) or pa.types.is_large_string(t),
            "floating point": pa.types.is_floating(t),
            "integers": pa.types.is_integer(t),
        }[kind]
        if not ok:
            raise FormatError(f"column {name!r} must hold {kind}, found {t}", path=path)
    return names


def standard(batch: pa.RecordBatch, names: tuple[str, ...]) -> pa.RecordBatch:
    """The batch's four run columns under today's names."""
    return pa.RecordBatch.from_arrays(batch.select(list(names)).columns, names=list(COLUMNS))


def run_batch(qids: pa.Array, docids: pa.Array, scores: np.ndarray, ranks: np.ndarray) -> pa.RecordBatch:
    """Rows (one query id per row) as the record batch a writer writes."""
    cols = [qids, docids, pa.array(scores, type=pa.float64()), pa.array(ranks, type=pa.int32())]
    return pa.record_batch(cols, schema=RUN_SCHEMA)


def _check_batch(b: pa.RecordBatch, names: tuple[str, ...], row0: int, path: Path) -> None:
    """Nulls, empty or bad ids, scores that are not finite, negative ranks: refused naming the
    row and the file's column."""
    for name in names:
        col = b.column(name)
        if col.null_count:
            row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
            raise FormatError(f"row {row0 + row + 1}: {name} is missing (null)", path=path)
    for name, what in zip(names[:2], ("query", "passage"), strict=True):
        col = b.column(name)
        empty = np.flatnonzero(pc.equal(pc.binary_length(col), 0).to_numpy(zero_copy_only=False))
        if len(empty):
            raise FormatError(f"row {row0 + int(empty[0]) + 1}: empty {name}", path=path)
        bad_id = first_bad_id(col)
        if bad_id is not None:
            raise FormatError(f"row {row0 + bad_id[0] + 1}: {what} id {bad_id[1]}", path=path)
    scores = b.column(names[2]).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    bad = np.flatnonzero(~np.isfinite(scores))
    if len(bad):
        r = int(bad[0])
        raise FormatError(f"row {row0 + r + 1}: score must be a finite number, found {scores[r]}", path=path)
    ranks = b.column(names[3]).to_numpy(zero_copy_only=False)
    neg = np.flatnonzero(ranks < 0)
    if len(neg):
        r = int(neg[0])
        raise FormatError(f"row {row0 + r + 1}: rank must be >= 0, found {ranks[r]}", path=path)


def _read_batch(reader: pa.ipc.RecordBatchFileReader, i: int, path: Path) -> tuple[pa.RecordBatch, Any]:
    """Batch ``i`` and its custom metadata; a damaged batch refused as one line."""
    try:
        return reader.get_batch_with_custom_metadata(i)
    except (pa.ArrowInvalid, OSError) as exc:
        if is_out_of_memory(exc):
            raise
        raise FormatError(f"record batch {i} cannot be read ({exc})", path=path) from None
    except pa.ArrowMemoryError as exc:
        if not impossible_allocation(exc):
            raise  # memory ran out: not the file's fault
        raise FormatError(f"record batch {i} is damaged ({exc})", path=path) from None


def _rows_from(row0: int) -> Locate:
    return lambda row: (None, f"row {row0 + row + 1}: ")


def arrow_chunks(path: Path, chunk_rows: int, batch_rows: list[int]) -> Iterator[tuple[RunChunk, Locate]]:
    """An Arrow run in chunks of whole queries (about ``chunk_rows`` rows), each with where its
    rows are in the file; every batch's checksum and values checked as it is read. The rows of
    each record batch are appended to ``batch_rows`` (``RunIndex`` reads batches by number)."""
    # Read through a plain file, not a memory map: a scan of a 2 GB run must not leave 2 GB of
    # mapped pages resident in the process.
    with pa.OSFile(str(path)) as f:
        reader = open_arrow_run(f, path)
        names = column_names(reader.schema, path)
        checked = declared(reader.schema, path)
        pending: list[pa.RecordBatch] = []
        held = 0
        row0 = 0  # file row of pending's first row
        for i in range(reader.num_record_batches):
            batch, meta = _read_batch(reader, i, path)
            if checked:  # before any other check: a damaged byte is damage, not a bad value
                verify_batch(batch, meta, i, row0 + held, path)
            _check_batch(batch, names, row0 + held, path)
            batch_rows.append(batch.num_rows)
            pending.append(standard(batch, names))
            held += batch.num_rows
            if held >= chunk_rows:
                chunk, rest = _split(pa.Table.from_batches(pending).combine_chunks(), row0, False, path)
                if chunk is not None:
                    yield chunk, _rows_from(row0)
                    row0 += chunk.num_rows
                pending = rest.to_batches()
                held = rest.num_rows
        if held:
            chunk, _ = _split(pa.Table.from_batches(pending).combine_chunks(), row0, True, path)
            assert chunk is not None
            yield chunk, _rows_from(row0)


def _split(table: pa.Table, row0: int, final: bool, path: Path) -> tuple[RunChunk | None, pa.Table]:
    """The table's complete queries as a chunk, and the rows of its last query when that one may
    continue in the next batch (``final``: it does not)."""
    q = as_utf8(table.column(COLUMNS[0]), "qid")
    n = len(q)
    change = pc.not_equal(q.slice(1), q.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    starts = np.concatenate([[0], np.flatnonzero(change) + 1]).astype(np.int64)
    end = n if final else int(starts[-1])
    if end == 0:
        return None, table
    starts = starts[starts < end]
    offsets = np.append(starts, end)
    docids = as_utf8(table.column(COLUMNS[1]).slice(0, end), "docid")
    groups = np.repeat(np.arange(len(starts), dtype=np.int64), np.diff(offsets))
    dup = duplicate_in_query(groups, docids)
    if dup is not None:
        raise FormatError(
            f"row {row0 + dup[1] + 1}: passage {docids[dup[1]].as_py()!r} is ranked twice for query "
            f"{q[int(starts[groups[dup[1]]])].as_py()!r} (first on row {row0 + dup[0] + 1})",
            path=path,
        )
    chunk = RunChunk(
        q.take(pa.array(starts)),
        offsets,
        docids,
        table.column(COLUMNS[2]).slice(0, end).to_numpy().astype(np.float64, copy=False),
        table.column(COLUMNS[3]).slice(0, end).to_numpy().astype(np.int64, copy=False),
    )
    return chunk, table.slice(end)
