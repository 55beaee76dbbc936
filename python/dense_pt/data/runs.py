"""Run files, written and read in query chunks: the one module that knows their formats.

A run lists each query's retrieved passages with their scores and ranks. Every command that
writes one writes it through ``RunWriter``; every command that reads one reads it through
``RunReader`` / ``read_run_chunks``, a chunk of whole queries at a time, so no stage holds a run
as Python objects (``dense_pt.data.judgements``' ``write_run`` / ``read_run`` / ``load_run`` are
built on these for the small runs a test or a notebook holds as a dict).

Formats, decided in ``run_format`` only:

* **Arrow IPC file** (written for names ending ``.arrow``, ``.feather`` or ``.ipc``; read
  whenever a file starts with Arrow's magic bytes, whatever its name): columns ``qid`` utf8,
  ``docid`` utf8, ``score`` float64 (the bits computed), ``rank`` int32; one record batch per
  written chunk, zstd-compressed; the schema metadata keeps the run's tag and tie rule. pandas
  (``read_feather``), polars (``read_ipc``) and DuckDB read it as it is. Chosen over Parquet by
  measurement (BENCHMARKS.md, "Run files"): on 10M rows, zstd Arrow writes 6x and reads 2x faster
  than zstd Parquet and reads one chunk at random 3x faster, for 35% more bytes (16 vs 12 per row;
  TREC text: 50); against today's TREC text it writes 36x and reads 70x faster.
* **TREC text** ``qid Q0 docid rank score tag`` (written for any other name: the export every
  evaluation tool reads; read whenever a file is not Arrow). Scores are written with
  ``format_score`` (``repr``), which reads back as the same float64.

Rows: a query's hits are contiguous and in rank order. ``RunWriter.write`` ranks each query's hits
as ``dense_pt.data.judgements.rank_hits`` does (score descending; ties by passage id descending,
trec_eval's rule, or in the given order with ``tie_break="score-only"``) and writes rank 1, 2, ...
Readers keep the file's order and ranks, and refuse a query listed in two places, a passage listed
twice for one query, a missing, empty or null id, a score that is not a finite number and a
negative rank, naming the line (TREC) or row (Arrow).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dense_pt.config.choices import DEFAULT_TIE_BREAK, TIE_BREAKS
from dense_pt.data import run_checksum
from dense_pt.data.ids import id_problem
from dense_pt.errors import FormatError, InvalidArgumentError, is_out_of_memory, not_found

RUN_FORMAT_VERSION = "1"
ARROW_SUFFIXES = (".arrow", ".feather", ".ipc")
ARROW_MAGIC = b"ARROW1"
RUN_SCHEMA = pa.schema(
    [("qid", pa.utf8()), ("docid", pa.utf8()), ("score", pa.float64()), ("rank", pa.int32())]
)
DEFAULT_TAG = "dense-pt"
DEPTH_KEY = "dense_pt.depth"  # schema metadata: the k a run was cut to (its hits per query at most)
# Rows a reader gathers before handing out a chunk (whole queries, so a chunk may hold more):
# ~40 MB of columns, small enough for any stage, large enough that per-chunk costs vanish.
CHUNK_ROWS = 1 << 20


def run_format(path: str | Path, write: bool = False) -> str:
    """``"arrow"`` or ``"trec"``: by the name's suffix for a file to write, by its first bytes for
    one to read (a run named ``.trec`` that is Arrow inside is read as Arrow)."""
    path = Path(path)
    if write:
        return "arrow" if path.suffix.lower() in ARROW_SUFFIXES else "trec"
    if not path.exists():
        raise not_found(path, "no such run file")
    if path.is_dir():
        raise FormatError("expected a run file, found a folder", path=path)
    with open(path, "rb") as f:
        head = f.read(len(ARROW_MAGIC))
    if not head and path.suffix.lower() in ARROW_SUFFIXES:
        # dense-pt never writes an empty Arrow run (one without queries still has a header and a
        # footer): this one was cut short, or never written
        raise FormatError(
            "empty file (0 bytes): not an Arrow run; it was cut short or never written", path=path
        )
    return "arrow" if head == ARROW_MAGIC else "trec"


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


def _utf8(values: Any, what: str) -> pa.Array:
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


def _duplicate_in_query(groups: np.ndarray, docids: pa.Array) -> tuple[int, int] | None:
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
        self.ids = None if ids is None else _utf8(ids, "ids")
        self.rows = 0  # rows written so far
        self.queries = 0
        self._qids: set[str] = set()
        self._stack = contextlib.ExitStack()
        self._sink: Any = None
        self._arrow: Any = None

    def __enter__(self) -> RunWriter:
        from dense_pt.fsutil import atomic_file

        self._sink = self._stack.enter_context(atomic_file(self.path, "wb"))
        if self.format == "arrow":
            meta = {"dense_pt.run": RUN_FORMAT_VERSION, "tag": self.tag, "tie_break": self.tie_break,
                    **run_checksum.schema_metadata()}  # fmt: skip
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
        q = _utf8(qids, "qids")
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
        dup = _duplicate_in_query(groups, docs)
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
        return _utf8(docids, "docids")

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
            batch = pa.record_batch(
                [qcol, docids, pa.array(scores, type=pa.float64()), pa.array(ranks, type=pa.int32())],
                schema=RUN_SCHEMA,
            )
            self._arrow.write_batch(batch, custom_metadata=run_checksum.batch_metadata(batch))
        else:
            self._sink.write(trec_lines(qcol, docids, scores, ranks, self.tag).encode("utf-8"))


def _first_bad_id(col: pa.Array) -> tuple[int, str] | None:
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


def _check_ids(col: pa.Array, what: str, path: Path) -> None:
    """The ids rule over a column about to be written."""
    bad = _first_bad_id(col)
    if bad is not None:
        raise InvalidArgumentError(f"{path}: {what} id {bad[1]}")


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


def trec_lines(qids: pa.Array, docids: pa.Array, scores: np.ndarray, ranks: np.ndarray, tag: str) -> str:
    """Rows as TREC run lines, byte for byte what ``write_run`` has always written (scores by
    ``format_score``: ``repr`` of the float64)."""
    tail = f" {tag}\n"
    return "".join(
        f"{q} Q0 {d} {r} {s!r}{tail}"
        for q, d, r, s in zip(
            qids.to_pylist(), docids.to_pylist(), ranks.tolist(), scores.tolist(), strict=True
        )
    )


class RunReader:
    """A run file (either format, sniffed), read in chunks of whole queries::

    for chunk in RunReader("run.arrow").chunks():
        ...  # chunk.qids, chunk.offsets, chunk.docids, chunk.scores, chunk.ranks
    """

    def __init__(self, path: str | Path, max_record_bytes: int | None = None):
        self.path = Path(path)
        self.format = run_format(self.path)
        self.max_record_bytes = max_record_bytes
        self.batch_rows: list[int] = []  # rows of each Arrow record batch read so far (RunIndex)

    @property
    def tag(self) -> str:
        """The run's tag: the Arrow file's metadata, or the first TREC line's last column."""
        if self.format == "arrow":
            with pa.OSFile(str(self.path)) as f:
                meta = open_arrow_run(f, self.path).schema.metadata or {}
            return meta.get(b"tag", DEFAULT_TAG.encode()).decode(errors="replace")
        from dense_pt.data.lines import first_line

        head = first_line(self.path)
        cols = head.split() if head else []
        return cols[5] if len(cols) == 6 else DEFAULT_TAG

    @property
    def depth(self) -> int | None:
        """The k the run was cut to, when an Arrow run by dense-pt records it (None otherwise)."""
        if self.format != "arrow":
            return None
        with pa.OSFile(str(self.path)) as f:
            value = (open_arrow_run(f, self.path).schema.metadata or {}).get(DEPTH_KEY.encode())
        try:
            return None if value is None else int(value)
        except ValueError:
            raise FormatError(f"recorded depth {value!r} is not a number", path=self.path) from None

    def chunks(self, chunk_rows: int = CHUNK_ROWS) -> Iterator[RunChunk]:
        """Whole queries, about ``chunk_rows`` rows at a time (at least one query each)."""
        if chunk_rows < 1:
            raise InvalidArgumentError(f"chunk_rows must be >= 1, got {chunk_rows}")
        seen: set[str] = set()
        source = self._arrow_chunks(chunk_rows) if self.format == "arrow" else self._trec_chunks(chunk_rows)
        for chunk, locate in source:
            for i, q in enumerate(chunk.qids.to_pylist()):
                if q in seen:
                    line, row = locate(int(chunk.offsets[i]))
                    raise FormatError(
                        f"{row}query {q!r} is listed again after other queries: a run lists each query's "
                        "hits together (sort it by query, keeping the order within each query)",
                        path=self.path,
                        line=line,
                    )
                seen.add(q)
            yield chunk

    # --- TREC text ----------------------------------------------------------------------------

    def _trec_chunks(self, chunk_rows: int) -> Iterator[tuple[RunChunk, Any]]:
        from dense_pt.data.judgements import _run_entries

        qids: list[str] = []
        offsets = [0]
        docs: list[str] = []
        scores: list[float] = []
        ranks: list[int] = []
        lines: list[int] = []
        in_query: dict[str, int] = {}  # the current query's passages and their lines

        def flush() -> tuple[RunChunk, Any]:
            chunk = RunChunk(pa.array(qids, pa.utf8()), np.asarray(offsets, dtype=np.int64),
                             pa.array(docs, pa.utf8()), np.asarray(scores, dtype=np.float64),
                             np.asarray(ranks, dtype=np.int64))  # fmt: skip
            at = np.asarray(lines, dtype=np.int64)
            return chunk, lambda row: (int(at[row]), "")

        for lineno, e in _run_entries(self.path, self.max_record_bytes):
            if not qids or e.qid != qids[-1]:
                if qids:
                    offsets.append(len(docs))
                    if len(docs) >= chunk_rows:
                        yield flush()
                        qids, offsets, docs, scores, ranks, lines = [], [0], [], [], [], []
                qids.append(e.qid)
                in_query = {}
            first = in_query.setdefault(e.pid, lineno)
            if first != lineno:
                raise FormatError(
                    f"passage {e.pid!r} is ranked twice for query {e.qid!r} (first on line {first})",
                    path=self.path,
                    line=lineno,
                )
            if e.rank < 0:
                raise FormatError(f"rank must be >= 0, found {e.rank}", path=self.path, line=lineno)
            docs.append(e.pid)
            scores.append(e.score)
            ranks.append(e.rank)
            lines.append(lineno)
        if qids:
            offsets.append(len(docs))
            yield flush()

    # --- Arrow IPC ----------------------------------------------------------------------------

    def _arrow_chunks(self, chunk_rows: int) -> Iterator[tuple[RunChunk, Any]]:
        # Read through a plain file, not a memory map: a scan of a 2 GB run must not leave 2 GB of
        # mapped pages resident in the process.
        with pa.OSFile(str(self.path)) as f:
            reader = open_arrow_run(f, self.path)
            cols = self._check_schema(reader.schema)
            checked = run_checksum.declared(reader.schema, self.path)
            pending: list[pa.RecordBatch] = []
            held = 0
            row0 = 0  # file row of pending's first row
            for i in range(reader.num_record_batches):
                try:
                    batch, meta = reader.get_batch_with_custom_metadata(i)
                except (pa.ArrowInvalid, OSError) as exc:
                    if is_out_of_memory(exc):
                        raise
                    raise FormatError(f"record batch {i} cannot be read ({exc})", path=self.path) from None
                except pa.ArrowMemoryError as exc:
                    if not run_checksum.impossible_allocation(exc):
                        raise  # memory ran out: not the file's fault
                    raise FormatError(f"record batch {i} is damaged ({exc})", path=self.path) from None
                if checked:  # before any other check: a damaged byte is damage, not a bad value
                    run_checksum.verify_batch(batch, meta, i, row0 + held, self.path)
                batch = self._check_batch(batch.select(cols), row0 + held)
                self.batch_rows.append(batch.num_rows)
                pending.append(batch)
                held += batch.num_rows
                if held >= chunk_rows:
                    table = pa.Table.from_batches(pending).combine_chunks()
                    chunk, rest = self._split(table, row0, final=False)
                    if chunk is not None:
                        yield chunk, self._rows_from(row0)
                        row0 += chunk.num_rows
                    pending = rest.to_batches()
                    held = rest.num_rows
            if held:
                chunk, _ = self._split(pa.Table.from_batches(pending).combine_chunks(), row0, final=True)
                assert chunk is not None
                yield chunk, self._rows_from(row0)

    @staticmethod
    def _rows_from(row0: int) -> Any:
        return lambda row: (None, f"row {row0 + row + 1}: ")

    def _check_schema(self, schema: pa.Schema) -> list[str]:
        want = {"qid": "strings", "docid": "strings", "score": "floating point", "rank": "integers"}
        for name, kind in want.items():
            if schema.get_field_index(name) < 0:
                raise FormatError(
                    f"the Arrow run has no {name!r} column (columns: {schema.names}); a run has qid, "
                    "docid, score and rank",
                    path=self.path,
                )
            t = schema.field(name).type
            ok = {
                "strings": pa.types.is_string(t) or pa.types.is_large_string(t),
                "floating point": pa.types.is_floating(t),
                "integers": pa.types.is_integer(t),
            }[kind]
            if not ok:
                raise FormatError(f"column {name!r} must hold {kind}, found {t}", path=self.path)
        return list(want)

    def _check_batch(self, b: pa.RecordBatch, row0: int) -> pa.RecordBatch:
        for name in ("qid", "docid", "score", "rank"):
            col = b.column(name)
            if col.null_count:
                row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
                raise FormatError(f"row {row0 + row + 1}: {name} is missing (null)", path=self.path)
        for name in ("qid", "docid"):
            empty = np.flatnonzero(
                pc.equal(pc.binary_length(b.column(name)), 0).to_numpy(zero_copy_only=False)
            )
            if len(empty):
                raise FormatError(f"row {row0 + int(empty[0]) + 1}: empty {name}", path=self.path)
            bad_id = _first_bad_id(b.column(name))
            if bad_id is not None:
                what = "query" if name == "qid" else "passage"
                raise FormatError(f"row {row0 + bad_id[0] + 1}: {what} id {bad_id[1]}", path=self.path)
        scores = b.column("score").to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        bad = np.flatnonzero(~np.isfinite(scores))
        if len(bad):
            r = int(bad[0])
            raise FormatError(
                f"row {row0 + r + 1}: score must be a finite number, found {scores[r]}", path=self.path
            )
        ranks = b.column("rank").to_numpy(zero_copy_only=False)
        neg = np.flatnonzero(ranks < 0)
        if len(neg):
            r = int(neg[0])
            raise FormatError(f"row {row0 + r + 1}: rank must be >= 0, found {ranks[r]}", path=self.path)
        return b

    def _split(self, table: pa.Table, row0: int, final: bool) -> tuple[RunChunk | None, pa.Table]:
        """The table's complete queries as a chunk, and the rows of its last query when that one
        may continue in the next batch (``final``: it does not)."""
        q = _utf8(table.column("qid"), "qid")
        n = len(q)
        change = pc.not_equal(q.slice(1), q.slice(0, n - 1)).to_numpy(zero_copy_only=False)
        starts = np.concatenate([[0], np.flatnonzero(change) + 1]).astype(np.int64)
        end = n if final else int(starts[-1])
        if end == 0:
            return None, table
        starts = starts[starts < end]
        offsets = np.append(starts, end)
        docids = _utf8(table.column("docid").slice(0, end), "docid")
        groups = np.repeat(np.arange(len(starts), dtype=np.int64), np.diff(offsets))
        dup = _duplicate_in_query(groups, docids)
        if dup is not None:
            raise FormatError(
                f"row {row0 + dup[1] + 1}: passage {docids[dup[1]].as_py()!r} is ranked twice for query "
                f"{q[int(starts[groups[dup[1]]])].as_py()!r} (first on row {row0 + dup[0] + 1})",
                path=self.path,
            )
        chunk = RunChunk(
            q.take(pa.array(starts)),
            offsets,
            docids,
            table.column("score").slice(0, end).to_numpy().astype(np.float64, copy=False),
            table.column("rank").slice(0, end).to_numpy().astype(np.int64, copy=False),
        )
        return chunk, table.slice(end)


def read_run_chunks(path: str | Path, chunk_rows: int = CHUNK_ROWS,
                    max_record_bytes: int | None = None) -> Iterator[RunChunk]:  # fmt: skip
    """``RunReader(path).chunks(chunk_rows)``: a run in chunks of whole queries."""
    return RunReader(path, max_record_bytes).chunks(chunk_rows)


def chunks_of_mapping(
    run: Mapping[str, Mapping[str, float]], chunk_rows: int = CHUNK_ROWS
) -> Iterator[RunChunk]:
    """A ``{qid: {docid: score}}`` run as chunks, in its order (ranks: the position in each
    query's mapping). A query without hits stays, with no rows."""
    qids: list[str] = []
    offsets = [0]
    docids: list[str] = []
    scores: list[float] = []

    def chunk() -> RunChunk:
        off = np.asarray(offsets, dtype=np.int64)
        counts = np.diff(off)
        ranks = np.arange(int(off[-1]), dtype=np.int64) - np.repeat(off[:-1], counts) + 1
        return RunChunk(pa.array(qids, pa.utf8()), off, pa.array(docids, pa.utf8()),
                        np.asarray(scores, dtype=np.float64), ranks)  # fmt: skip

    for qid, hits in run.items():
        qids.append(qid)
        docids.extend(hits)
        scores.extend(float(s) for s in hits.values())
        offsets.append(len(docids))
        if len(docids) >= chunk_rows:
            yield chunk()
            qids, offsets, docids, scores = [], [0], [], []
    if qids:
        yield chunk()


RunSource: TypeAlias = str | Path | Mapping[str, Mapping[str, float]] | Iterable[RunChunk]


def run_chunks(run: RunSource, chunk_rows: int = CHUNK_ROWS) -> Iterator[RunChunk]:
    """Chunks of a run given as a file (either format), a ``{qid: {docid: score}}`` mapping, or
    chunks already: what every stage that reads a run accepts."""
    if isinstance(run, str | Path):
        return read_run_chunks(run, chunk_rows)
    if isinstance(run, Mapping):
        return chunks_of_mapping(run, chunk_rows)
    return iter(run)


def convert_run(src: str | Path, out: str | Path, tag: str | None = None) -> dict[str, Any]:
    """Copy a run into the format ``out``'s name asks for (``.arrow``: Arrow; any other: TREC
    text), rows, order, scores and ranks unchanged; ``tag`` replaces the run's own. Streams: a
    100M-row run never sits in memory. Returns the queries and rows written."""
    reader = RunReader(src)
    with RunWriter(out, tag=tag or reader.tag) as w:
        for chunk in reader.chunks():
            w.write_chunk(chunk)
    return {"queries": w.queries, "rows": w.rows, "format": w.format}
