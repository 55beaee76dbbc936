"""Random access to a run's queries, and several runs read query by query together: what merging
shard runs and fusing two runs need, since their inputs hold the same queries in chunks of
different sizes (and possibly in another order).

``RunIndex(path)`` reads the run once through ``RunReader`` (every check of the format applies)
and keeps each query's row range (O(queries) memory); ``get(qids)`` then gathers those queries'
rows, decoding the record batches they lie in and keeping the last few decoded, so that reading in
the file's order decodes each batch once. A TREC file is first copied to a temporary Arrow file
(text has no random access)."""

from __future__ import annotations

import tempfile
from collections import OrderedDict
from collections.abc import Container, Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from dense_pt.runs.arrow import COLUMNS, column_names, open_arrow_run, standard
from dense_pt.runs.chunk import CHUNK_ROWS, RunChunk, no_rows
from dense_pt.runs.read import RunReader, run_format
from dense_pt.runs.write import convert_run

CACHED_BATCHES = 4


class RunIndex:
    """A run file whose queries can be read in any order (see the module docstring)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if run_format(self.path) == "trec":
            self._tmp = tempfile.TemporaryDirectory(prefix="dense-pt-run-")
            arrow = Path(self._tmp.name) / "run.arrow"
            convert_run(self.path, arrow)
            self._file = arrow
        else:
            self._file = self.path
        reader = RunReader(self._file)
        qids: list[str] = []
        counts: list[np.ndarray] = []
        for chunk in reader.chunks():
            qids.extend(chunk.qids.to_pylist())
            counts.append(np.diff(chunk.offsets))
        self.qids = qids
        n = np.concatenate(counts) if counts else np.zeros(0, np.int64)
        self.starts = np.concatenate([[0], np.cumsum(n)]).astype(np.int64)
        self.position = {q: i for i, q in enumerate(qids)}
        self.batch_starts = np.concatenate([[0], np.cumsum(reader.batch_rows)]).astype(np.int64)
        self.tag = reader.tag
        # the depth to which this run holds every hit: the k it records, else its most hits per query
        self.depth = reader.depth or int(n.max(initial=0))
        self._batches: OrderedDict[int, pa.RecordBatch] = OrderedDict()
        self._handle = pa.OSFile(str(self._file))
        self._reader = open_arrow_run(self._handle, self._file)
        self._names = column_names(self._reader.schema, self._file)  # a legacy run keeps its names

    def close(self) -> None:
        self._handle.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> RunIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def rows_of(self, qid: str) -> int:
        i = self.position.get(qid)
        return 0 if i is None else int(self.starts[i + 1] - self.starts[i])

    def _batch(self, i: int) -> pa.RecordBatch:
        b = self._batches.pop(i, None)
        if b is None:
            b = standard(self._reader.get_batch(i), self._names)
        self._batches[i] = b
        while len(self._batches) > CACHED_BATCHES:
            self._batches.popitem(last=False)
        return b

    def get(self, qids: Sequence[str]) -> RunChunk:
        """The rows of ``qids``, in that order (a query the run lacks: no rows)."""
        pos = [self.position.get(q, -1) for q in qids]
        counts = np.array([self.starts[p + 1] - self.starts[p] if p >= 0 else 0 for p in pos], dtype=np.int64)
        first = np.array([self.starts[p] if p >= 0 else 0 for p in pos], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        rows = np.repeat(first - offsets[:-1], counts) + np.arange(int(offsets[-1]), dtype=np.int64)
        which = np.searchsorted(self.batch_starts, rows, side="right") - 1
        order = np.argsort(which, kind="stable")
        docs, scores, ranks = [], [], []
        for b in np.unique(which).tolist():
            local = rows[which == b] - self.batch_starts[b]
            batch = self._batch(b)
            docs.append(batch.column(COLUMNS[1]).take(pa.array(local)).cast(pa.utf8()))
            scores.append(batch.column(COLUMNS[2]).to_numpy().astype(np.float64, copy=False)[local])
            ranks.append(batch.column(COLUMNS[3]).to_numpy().astype(np.int64, copy=False)[local])
        back = np.empty_like(order)
        back[order] = np.arange(len(order))
        if not docs:
            return no_rows(qids)
        return RunChunk(pa.array(list(qids), pa.utf8()), offsets, pa.concat_arrays(docs).take(pa.array(back)),
                        np.concatenate(scores)[back], np.concatenate(ranks)[back])  # fmt: skip


class AlignedRuns:
    """Several runs read query by query together: each step of ``chunks`` gives one chunk per run,
    all with the same queries in the same order (a query a run lacks has no rows there). The
    queries come in the first run's order, then those of the second run the first lacks, and so
    on. Each run is read once to be indexed; ``chunks`` may then be iterated any number of times."""

    def __init__(self, paths: Sequence[str | Path]):
        self.indexes: list[RunIndex] = []
        try:
            for p in paths:
                self.indexes.append(RunIndex(p))
        except BaseException:
            self.close()
            raise
        seen: set[str] = set()
        self.qids: list[str] = []
        for ix in self.indexes:
            for q in ix.qids:
                if q not in seen:
                    seen.add(q)
                    self.qids.append(q)

    def close(self) -> None:
        for ix in self.indexes:
            ix.close()

    def __enter__(self) -> AlignedRuns:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def chunks(
        self, chunk_rows: int = CHUNK_ROWS, only: Container[str] | None = None
    ) -> Iterator[list[RunChunk]]:
        """The aligned chunks (``only``: just these queries)."""
        batch: list[str] = []
        rows = 0
        for q in self.qids:
            if only is not None and q not in only:
                continue
            batch.append(q)
            rows += sum(ix.rows_of(q) for ix in self.indexes)
            if rows >= chunk_rows:
                yield [ix.get(batch) for ix in self.indexes]
                batch, rows = [], 0
        if batch:
            yield [ix.get(batch) for ix in self.indexes]
