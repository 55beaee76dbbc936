"""Reading a run: ``read_run`` streams any run as ``RunChunk`` s of whole queries (the one way
every stage reads one), ``load_run`` gives a small run as a ``{qid: {docid: score}}`` dict.

The format is sniffed from the first bytes (Arrow's magic, else TREC text), whatever the name. A
query listed again after other queries is refused here, with its line or row, as are the per-row
problems each format's reader finds."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TypeAlias

from dense_pt.errors import FormatError, InvalidArgumentError, not_found
from dense_pt.runs.arrow import ARROW_MAGIC, ARROW_SUFFIXES, DEPTH_KEY, arrow_chunks, run_metadata
from dense_pt.runs.chunk import CHUNK_ROWS, Locate, RunChunk, chunks_of_mapping
from dense_pt.runs.trec import DEFAULT_TAG, trec_chunks, trec_tag

RunSource: TypeAlias = str | Path | Mapping[str, Mapping[str, float]] | Iterable[RunChunk]


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


class RunReader:
    """A run file (either format, sniffed): its chunks, tag and recorded depth. ``read_run`` is
    the way to read one; this class is for the package's modules that need the tag, the depth or
    the record batches' sizes too (converting, merging, indexing)."""

    def __init__(self, path: str | Path, max_record_bytes: int | None = None):
        self.path = Path(path)
        self.format = run_format(self.path)
        self.max_record_bytes = max_record_bytes
        self.batch_rows: list[int] = []  # rows of each Arrow record batch read so far (RunIndex)

    @property
    def tag(self) -> str:
        """The run's tag: the Arrow file's metadata, or the first TREC line's last column."""
        if self.format == "trec":
            return trec_tag(self.path)
        return run_metadata(self.path).get(b"tag", DEFAULT_TAG.encode()).decode(errors="replace")

    @property
    def depth(self) -> int | None:
        """The k the run was cut to, when an Arrow run by dense-pt records it (None otherwise)."""
        if self.format != "arrow":
            return None
        value = run_metadata(self.path).get(DEPTH_KEY.encode())
        try:
            return None if value is None else int(value)
        except ValueError:
            raise FormatError(f"recorded depth {value!r} is not a number", path=self.path) from None

    def chunks(self, chunk_rows: int = CHUNK_ROWS) -> Iterator[RunChunk]:
        """Whole queries, about ``chunk_rows`` rows at a time (at least one query each)."""
        if chunk_rows < 1:
            raise InvalidArgumentError(f"chunk_rows must be >= 1, got {chunk_rows}")
        source: Iterator[tuple[RunChunk, Locate]] = (
            arrow_chunks(self.path, chunk_rows, self.batch_rows)
            if self.format == "arrow"
            else trec_chunks(self.path, chunk_rows, self.max_record_bytes)
        )
        seen: set[str] = set()
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


def read_run(
    run: RunSource, chunk_rows: int = CHUNK_ROWS, max_record_bytes: int | None = None
) -> Iterator[RunChunk]:
    """A run as chunks of whole queries, about ``chunk_rows`` rows each: a file (TREC text or
    Arrow, sniffed), a ``{qid: {docid: score}}`` mapping (ranks: the position in each query's
    mapping), or chunks already (handed on as they are). What every stage that reads a run
    accepts; ``max_record_bytes`` bounds a TREC line."""
    if isinstance(run, str | Path):
        return RunReader(run, max_record_bytes).chunks(chunk_rows)
    if isinstance(run, Mapping):
        return chunks_of_mapping(run, chunk_rows)
    return iter(run)


def load_run(path: str | Path, max_record_bytes: int | None = None) -> dict[str, dict[str, float]]:
    """A run file (TREC or Arrow) as ``{qid: {docid: score}}``, each query's hits in the file's
    order. For small runs: a stage streams ``read_run`` instead."""
    out: dict[str, dict[str, float]] = {}
    for chunk in read_run(path, max_record_bytes=max_record_bytes):
        out.update(chunk.to_dict())
    return out
