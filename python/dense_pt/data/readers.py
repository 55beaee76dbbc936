"""Streaming readers for corpora and queries.

Every reader is a generator: one record in memory at a time, so an 8.8M-passage MS MARCO collection
streams through in constant memory (plus 8 bytes per id to refuse duplicates, see ``unique.py``).

Formats (auto-detected from the extension and the first line; ``format=`` overrides):

========== ======================================= =========================================
format     corpus                                  queries
========== ======================================= =========================================
``jsonl``  BEIR: ``{"_id", "title", "text"}``        BEIR: ``{"_id", "text"}``
``tsv``    MS MARCO: ``pid<TAB>text``               ``qid<TAB>text``
``parquet`` columns ``id`` (or ``_id``), ``text``,    --
           optional ``title``; read in record batches
``arrow``  same columns, Arrow IPC file or stream   --
========== ======================================= =========================================

A BEIR folder (with ``corpus.jsonl`` / ``queries.jsonl``) is accepted in place of the file.
``.gz`` files are read transparently. Title and text are joined for tokenization by
:func:`passage_text` (``title + sep + text``, ``sep`` defaulting to a space; no title, no separator).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from dense_pt.config.corpus import TITLE_SEP
from dense_pt.data.ids import check_id
from dense_pt.data.lines import first_line, iter_lines, max_record_bytes, record_too_large
from dense_pt.data.unique import UniqueIds
from dense_pt.errors import FormatError, InvalidArgumentError, is_out_of_memory

CORPUS_FORMATS = ("jsonl", "tsv", "parquet", "arrow")
QUERY_FORMATS = ("jsonl", "tsv")
DEFAULT_TITLE_SEP = TITLE_SEP  # the one default: dense_pt.config.corpus


class Passage(NamedTuple):
    id: str
    title: str
    text: str


class Query(NamedTuple):
    id: str
    text: str


def passage_text(p: Passage, sep: str = DEFAULT_TITLE_SEP) -> str:
    """The string that gets tokenized: ``title + sep + text``, or just the text without a title."""
    if p.title and p.text:
        return p.title + sep + p.text
    return p.title or p.text


def corpus_texts(
    path: str | Path,
    format: str | None = None,
    sep: str = DEFAULT_TITLE_SEP,
    max_record_bytes: int | None = None,
) -> Iterator[tuple[str, str]]:
    """``(id, passage_text)`` pairs of a corpus: what BM25 and answer matching read."""
    return ((p.id, passage_text(p, sep)) for p in read_corpus(path, format, max_record_bytes))


# ---- format detection ------------------------------------------------------------------------
def _strip_gz(path: Path) -> str:
    name = path.name.lower()
    return name[:-3] if name.endswith(".gz") else name


def resolve_beir(path: str | Path, kind: str) -> Path:
    """A BEIR folder stands for its ``corpus.jsonl`` / ``queries.jsonl``; a file stands for itself."""
    path = Path(path)
    if path.is_dir():
        for name in (f"{kind}.jsonl", f"{kind}.jsonl.gz"):
            if (path / name).exists():
                return path / name
        raise FormatError(f"folder has no {kind}.jsonl (expected a BEIR dataset folder)", path=path)
    return path


def detect_format(path: str | Path, allowed: tuple[str, ...]) -> str:
    """Guess the format from the extension, then from the first line (``{`` means jsonl)."""
    path = Path(path)
    name = _strip_gz(path)
    by_ext = {
        ".jsonl": "jsonl",
        ".json": "jsonl",
        ".ndjson": "jsonl",
        ".parquet": "parquet",
        ".arrow": "arrow",
        ".feather": "arrow",
        ".ipc": "arrow",
    }
    for ext, fmt in by_ext.items():
        if name.endswith(ext):
            if fmt not in allowed:
                raise FormatError(
                    f"{fmt} is not a supported format here (supported: {', '.join(allowed)})", path=path
                )
            return fmt
    head = first_line(path)
    if head is None:
        raise FormatError("file is empty", path=path)
    if head.lstrip().startswith("{") and "jsonl" in allowed:
        return "jsonl"
    if "\t" in head and "tsv" in allowed:
        return "tsv"
    raise FormatError(
        f"cannot tell the format from the name or the first line; pass format= one of {allowed}", path=path
    )


def _check_format(fmt: str, allowed: tuple[str, ...]) -> str:
    if fmt not in allowed:
        raise InvalidArgumentError(f"unknown format {fmt!r}; expected one of {', '.join(allowed)}")
    return fmt


# ---- field helpers ---------------------------------------------------------------------------
def _parse_json(path: Path, lineno: int, line: str) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise FormatError(f"invalid JSON ({exc.msg} at column {exc.colno})", path=path, line=lineno) from None
    except RecursionError:  # [[[[... 100,000 levels deep
        raise FormatError("invalid JSON: nested too deeply", path=path, line=lineno) from None
    if not isinstance(obj, dict):
        raise FormatError(f"expected a JSON object, found {type(obj).__name__}", path=path, line=lineno)
    if "\\ud" in line or "\\uD" in line:  # an escaped surrogate: valid only as half of a pair
        _check_surrogates(obj, path, lineno)
    return obj


def _check_surrogates(obj: dict[str, Any], path: Path, lineno: int) -> None:
    """Refuse a string field holding a lone UTF-16 surrogate (``"\\ud800"`` in the JSON): no
    UTF-8 text can hold it, so the tokenizer and every file written later would fail on it."""
    for key, value in obj.items():
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                bad = value[exc.start]
                raise FormatError(
                    f'field "{key}" holds a lone UTF-16 surrogate ({bad!r} at character {exc.start}), '
                    "which is not text",
                    path=path,
                    line=lineno,
                ) from None


def _json_id(obj: dict[str, Any], path: Path, lineno: int) -> str:
    key = "_id" if "_id" in obj else "id"
    raw = obj.get(key)
    if raw is None:
        raise FormatError('missing field "_id"', path=path, line=lineno)
    if not isinstance(raw, str):
        # An integer id would be read back as a string elsewhere ("7" vs 7 vs 7.0): refused, as
        # BEIR's own files always quote their ids.
        raise FormatError(
            f'field "{key}" must be a string, found {type(raw).__name__} {raw!r} (quote the id)',
            path=path,
            line=lineno,
        )
    pid = raw.strip()
    if not pid:
        raise FormatError('field "_id" is empty', path=path, line=lineno)
    return check_id(pid, f'field "{key}":', path, lineno)


def _json_str(obj: dict[str, Any], key: str, path: Path, lineno: int, required: bool) -> str:
    if key not in obj or obj[key] is None:
        if required:
            raise FormatError(f'missing field "{key}"', path=path, line=lineno)
        return ""
    val = obj[key]
    if not isinstance(val, str):
        raise FormatError(
            f'field "{key}" must be a string, found {type(val).__name__}', path=path, line=lineno
        )
    return val.strip()


def _split_tsv(line: str, ncols: int, what: str, path: Path, lineno: int) -> list[str]:
    cols = line.split("\t")
    if len(cols) != ncols:
        raise FormatError(
            f"expected {ncols} tab-separated columns ({what}), found {len(cols)}", path=path, line=lineno
        )
    return [c.strip() for c in cols]


def _raise_duplicate(ids: UniqueIds, rescan, path: Path, what: str, unit: str) -> None:
    dup = ids.first_duplicate(rescan)
    if dup is None:
        return
    key, first, second = dup
    msg = f"duplicate {what} id {key!r} (first seen on {unit} {first})"
    if unit == "line":
        raise FormatError(msg, path=path, line=second)
    raise FormatError(f"{unit} {second}: {msg}", path=path)


# ---- corpus ----------------------------------------------------------------------------------
def read_corpus(
    path: str | Path, format: str | None = None, max_record_bytes: int | None = None
) -> Iterator[Passage]:
    """Stream the passages of a corpus file (or BEIR folder). Raises FormatError on bad input:
    invalid JSON, a missing field, an id that is not a string, a wrong column count, empty
    passages, invalid UTF-8, a BOM inside the file, a record longer than ``max_record_bytes``
    (default: ``dense_pt.data.lines.max_record_bytes()``); a duplicate id is reported once the
    stream ends (ids are checked in 8 bytes each, see ``dense_pt.data.unique``). A passage needs a
    non-empty text or title."""
    path = resolve_beir(path, "corpus")
    fmt = _check_format(format, CORPUS_FORMATS) if format else detect_format(path, CORPUS_FORMATS)
    limit = _limit(max_record_bytes)
    ids = UniqueIds()
    for _, p in _passages(path, fmt, limit):
        ids.add(p.id)
        yield p
    unit = "row" if fmt in ("parquet", "arrow") else "line"
    _raise_duplicate(ids, lambda: ((w, p.id) for w, p in _passages(path, fmt, limit)), path, "passage", unit)


def _limit(value: int | None) -> int:
    return max_record_bytes(value)


def _passages(path: Path, fmt: str, limit: int) -> Iterator[tuple[int, Passage]]:
    """``(line or row number, passage)`` without the duplicate check."""
    if fmt in ("parquet", "arrow"):
        yield from _read_columnar(path, fmt, limit)
        return
    for lineno, line in iter_lines(path, limit):
        if fmt == "jsonl":
            obj = _parse_json(path, lineno, line)
            pid = _json_id(obj, path, lineno)
            title = _json_str(obj, "title", path, lineno, required=False)
            text = _json_str(obj, "text", path, lineno, required=True)
        else:
            pid, text = _split_tsv(line, 2, "pid, text", path, lineno)
            title = ""
            if not pid:
                raise FormatError("empty passage id in column 1", path=path, line=lineno)
            check_id(pid, "passage id", path, lineno)
        if not text and not title:
            raise FormatError(f"passage {pid!r} has empty text (and no title)", path=path, line=lineno)
        yield lineno, Passage(pid, title, text)


def _read_columnar(path: Path, fmt: str, limit: int) -> Iterator[tuple[int, Passage]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(str(path))
        except (pa.ArrowInvalid, OSError) as exc:
            if is_out_of_memory(exc):  # the machine's limit, not a damaged file
                raise
            raise FormatError(f"not a readable Parquet file ({exc})", path=path) from None
        names = pf.schema_arrow.names
        id_col = _columnar_columns(names, path)
        cols = [id_col, "text", *(["title"] if "title" in names else [])]
        batches: Iterator[pa.RecordBatch] = pf.iter_batches(batch_size=8192, columns=cols)
    else:
        source = pa.memory_map(str(path), "r")
        try:
            reader: Any = pa.ipc.open_file(source)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        except pa.ArrowInvalid:
            try:
                reader = pa.ipc.open_stream(pa.memory_map(str(path), "r"))
            except pa.ArrowInvalid as exc:
                raise FormatError(f"not a readable Arrow IPC file or stream ({exc})", path=path) from None
            batches = iter(reader)
        names = reader.schema.names
        id_col = _columnar_columns(names, path)
    row = 0
    for batch in batches:
        _check_row_sizes(batch, row, limit, path, pa, pc)
        ids = batch.column(id_col).to_pylist()
        texts = batch.column("text").to_pylist()
        titles = batch.column("title").to_pylist() if "title" in batch.schema.names else [None] * len(ids)
        for pid, title, text in zip(ids, titles, texts, strict=True):
            row += 1
            if pid is None or str(pid).strip() == "":
                raise FormatError(f"row {row}: empty or null id", path=path)
            pid = str(pid).strip()
            check_id(pid, f"row {row}: passage id", path)
            if text is not None and not isinstance(text, str):
                raise FormatError(f"row {row}: column 'text' must be a string", path=path)
            title = (title or "").strip()
            text = (text or "").strip()
            if not text and not title:
                raise FormatError(f"row {row}: passage {pid!r} has empty text (and no title)", path=path)
            yield row, Passage(pid, title, text)


def _check_row_sizes(batch: Any, row: int, limit: int, path: Path, pa: Any, pc: Any) -> None:
    """Refuse a row whose string columns together exceed the maximum record size (checked on
    the batch's lengths, before any row becomes a Python string)."""
    total = None
    for col in batch.columns:
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            lengths = pc.fill_null(pc.binary_length(col), 0).cast(pa.int64())
            total = lengths if total is None else pc.add(total, lengths)
    if total is None or len(total) == 0 or pc.max(total).as_py() <= limit:
        return
    first = int(pc.index(pc.greater(total, limit), True).as_py())
    raise FormatError(f"row {row + first + 1}: {record_too_large(limit)}", path=path)


def _columnar_columns(names: list[str], path: Path) -> str:
    id_col = "id" if "id" in names else "_id" if "_id" in names else None
    if id_col is None or "text" not in names:
        raise FormatError(
            f"expected columns 'id' (or '_id'), 'text' and optionally 'title'; found {names}", path=path
        )
    return id_col


# ---- queries ---------------------------------------------------------------------------------
def read_queries(
    path: str | Path, format: str | None = None, max_record_bytes: int | None = None
) -> Iterator[Query]:
    """Stream the queries of a jsonl (``{"_id", "text"}``) or tsv (``qid<TAB>text``) file or a BEIR
    folder. Empty query text is a FormatError, and so is a duplicate id (once the stream ends)."""
    path = resolve_beir(path, "queries")
    fmt = _check_format(format, QUERY_FORMATS) if format else detect_format(path, QUERY_FORMATS)
    limit = _limit(max_record_bytes)
    ids = UniqueIds()
    for _, q in _queries(path, fmt, limit):
        ids.add(q.id)
        yield q
    _raise_duplicate(ids, lambda: ((w, q.id) for w, q in _queries(path, fmt, limit)), path, "query", "line")


def _queries(path: Path, fmt: str, limit: int) -> Iterator[tuple[int, Query]]:
    for lineno, line in iter_lines(path, limit):
        if fmt == "jsonl":
            obj = _parse_json(path, lineno, line)
            qid = _json_id(obj, path, lineno)
            text = _json_str(obj, "text", path, lineno, required=True)
        else:
            qid, text = _split_tsv(line, 2, "qid, text", path, lineno)
            if not qid:
                raise FormatError("empty query id in column 1", path=path, line=lineno)
            check_id(qid, "query id", path, lineno)
        if not text:
            raise FormatError(f"query {qid!r} has empty text", path=path, line=lineno)
        yield lineno, Query(qid, text)


def load_queries(
    path: str | Path, format: str | None = None, max_record_bytes: int | None = None
) -> dict[str, str]:
    """All queries as ``{qid: text}`` (query files are small)."""
    return {q.id: q.text for q in read_queries(path, format, max_record_bytes)}
