"""The tokenized corpus store: passages tokenized once, memory-mapped by every later stage.

Layout of a store directory::

    manifest.json      provenance: source + sha256, tokenizer + vocab hash, specials, counts
    tokenizer.json     the tokenizer the ids belong to
    tokens.arrow       Arrow IPC file: id (utf8), input_ids (large_list<uint32>, content tokens only,
                       no [CLS]/[SEP]), word_ids (large_list<uint32>, word index of each token)
    <name>.arrow       one file per added column (e.g. importance), row-aligned with tokens.arrow

Columns are separate files so that adding one (``add_column``) is a single atomic rename and never
rewrites the tokens. The manifest's ``files`` records the size and xxh3-128 checksum of every file;
``open`` checks tokens.arrow and tokenizer.json, a column is checked when it is first read (see
``dense_pt.artifacts.verify_file``: a stat when the same file was verified before, a hash otherwise).
Stores written before checksums existed (no ``files``) are read unchecked.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from tokenizers import Tokenizer

from dense_pt import artifacts
from dense_pt.artifacts.checksums import checksum_entry, file_checksum, remember_verified, verify_file
from dense_pt.artifacts.legacy import translate
from dense_pt.artifacts.manifest import inside
from dense_pt.artifacts.replace import atomic_dir
from dense_pt.config.names import check_name
from dense_pt.data.tokenizer import (
    encode_texts,
    special_token_ids,
    vocab_hash,
    without_padding_or_truncation,
)
from dense_pt.data.unique import UniqueIds
from dense_pt.errors import (
    FormatError,
    InvalidArgumentError,
    MismatchError,
    already_exists,
    is_out_of_memory,
    not_found,
)
from dense_pt.fsutil import atomic_file, write_json_atomic, writing

FORMAT_VERSION = 1
TOKENS_FILE = "tokens.arrow"
MANIFEST_FILE = "manifest.json"
TOKENIZER_FILE = "tokenizer.json"
ROWS_PER_BATCH = 65536
TOKENS_PER_BATCH = 1 << 23  # and at most this many tokens: a record batch is held whole once
# Column names that would collide with the store's own files or columns.
RESERVED_COLUMNS = ("id", "input_ids", "word_ids", "tokens", "manifest", "tokenizer")
_REQUIRED_MANIFEST = ("tokenizer", "special_tokens", "num_rows", "columns")
KIND = "corpus store"

TOKENS_SCHEMA = pa.schema(
    [
        ("id", pa.utf8()),
        ("input_ids", pa.large_list(pa.uint32())),
        ("word_ids", pa.large_list(pa.uint32())),
    ]
)


def _ragged_of(chunked: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(flat values, int64 offsets) of a large_list column; zero-copy for a single unsliced chunk."""
    chunks = chunked.chunks
    if len(chunks) == 1:
        arr = chunks[0]
        offsets = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        values = arr.values.to_numpy(zero_copy_only=False)
        if offsets[0] != 0:
            values = values[offsets[0] : offsets[-1]]
            offsets = offsets - offsets[0]
        return values, offsets
    parts, lengths = [], []
    for arr in chunks:
        off = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        parts.append(arr.values.to_numpy(zero_copy_only=False)[off[0] : off[-1]])
        lengths.append(np.diff(off))
    lens = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    values = np.concatenate(parts) if parts else np.zeros(0, np.uint32)
    return values, offsets


class CorpusStore:
    """Read access to a store directory (see the module docstring)."""

    def __init__(self, path: Path, manifest: dict[str, Any], tokens: pa.Table, verify: str = "cached"):
        self.path = path
        self.manifest = manifest
        self._tokens = tokens
        self._verify = verify
        self._index: dict[str, int] | None = None
        self._ragged: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    # ---- opening -------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, verify: str = "cached") -> CorpusStore:
        """Open a store. ``verify``: ``"cached"`` (default) checks each file's size and, unless
        this exact file was verified before, its checksum; ``"full"`` always hashes; ``"none"``
        skips the checks. A file that does not match the manifest is a FormatError."""
        path = Path(path)
        mpath = path / MANIFEST_FILE
        if not path.exists():
            raise not_found(path, "no such corpus store (build one with `dense-pt corpus build`)")
        if not mpath.exists():
            raise FormatError(
                "not a corpus store (no manifest.json); build one with `dense-pt corpus build`", path=path
            )
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise FormatError(f"invalid JSON ({exc})", path=mpath) from exc
        manifest = _in_schema(manifest, path, mpath)
        if manifest["format"] != FORMAT_VERSION:
            raise FormatError(
                f"store format version {manifest['format']} is not supported "
                f"(this dense-pt reads version {FORMAT_VERSION})",
                path=mpath,
            )
        files = _named_files(path, manifest, mpath)
        for name in (TOKENS_FILE, TOKENIZER_FILE):
            if name in files:
                verify_file(path / name, files[name], verify)
        for name, meta in manifest["columns"].items():  # a stat each: read when first used
            if not (path / meta["file"]).is_file():
                raise FormatError(
                    f"missing file of the corpus store (column {name!r})", path=path / meta["file"]
                )
        tokens = _read_arrow(path / TOKENS_FILE)
        if tokens.num_rows != manifest["num_rows"]:
            raise FormatError(
                f"{TOKENS_FILE} has {tokens.num_rows} rows but the manifest says {manifest['num_rows']}",
                path=path / TOKENS_FILE,
            )
        return cls(path, manifest, tokens, verify)

    # ---- metadata ------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._tokens.num_rows

    def __contains__(self, pid: object) -> bool:
        """``pid in store`` (builds the id index on first use), e.g. for ``read_qrels(corpus_ids=store)``."""
        if self._index is None:
            self._index = {p: i for i, p in enumerate(self.ids.to_pylist())}
        return pid in self._index

    def __repr__(self) -> str:
        return f"CorpusStore({str(self.path)!r}, rows={len(self)}, columns={self.column_names})"

    @property
    def ids(self) -> pa.Array:
        return self._tokens.column("id").combine_chunks()

    @property
    def vocab_hash(self) -> str:
        return self.manifest["tokenizer"]["vocab_hash"]

    @property
    def vocab_size(self) -> int:
        return int(self.manifest["tokenizer"]["vocab_size"])

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self.manifest["special_tokens"])

    @property
    def tokenizer_path(self) -> Path:
        return self.path / TOKENIZER_FILE

    def tokenizer(self) -> Tokenizer:
        """The store's tokenizer, with padding and truncation off (it encodes content)."""
        return without_padding_or_truncation(Tokenizer.from_file(str(self.tokenizer_path)))

    @property
    def column_names(self) -> list[str]:
        return ["input_ids", "word_ids", *sorted(self.manifest["columns"])]

    def has_column(self, name: str) -> bool:
        return name in self.column_names

    # ---- row access ----------------------------------------------------------------------
    def rows_of(self, pids: Sequence[str] | pa.Array) -> np.ndarray:
        """The rows of many passage ids at once (int64, -1 for an id the store lacks): one
        vectorised lookup over the Arrow id column, no Python string per stored passage."""
        import pyarrow.compute as pc

        arr = pids if isinstance(pids, pa.Array) else pa.array(list(pids), pa.utf8())
        return pc.fill_null(pc.index_in(arr, value_set=self.ids), -1).to_numpy().astype(np.int64)

    def index_of(self, pid: str) -> int:
        if self._index is None:
            self._index = {p: i for i, p in enumerate(self.ids.to_pylist())}
        try:
            return self._index[pid]
        except KeyError:
            raise KeyError(f"passage id {pid!r} is not in the store {self.path}") from None

    def ragged(
        self, column: str = "input_ids", rows: Sequence[int] | np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """A column as (flat values, int64 offsets). ``rows=None``: the whole corpus, memory-mapped
        (zero-copy for single-chunk files); otherwise the selected rows, gathered into a copy."""
        if column not in self._ragged:
            self._ragged[column] = _ragged_of(self._column(column))
        values, offsets = self._ragged[column]
        if rows is None:
            return values, offsets
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= len(self)):
            raise InvalidArgumentError(f"row index out of range for a store of {len(self)} rows")
        starts, ends = offsets[rows], offsets[rows + 1]
        out_off = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(ends - starts, out=out_off[1:])
        out = np.empty(int(out_off[-1]), dtype=values.dtype)
        for k, (s, e) in enumerate(zip(starts, ends, strict=True)):
            out[out_off[k] : out_off[k + 1]] = values[s:e]
        return out, out_off

    def row(self, i: int, column: str = "input_ids") -> np.ndarray:
        values, offsets = self.ragged(column)
        if not 0 <= i < len(self):
            raise IndexError(f"row {i} out of range for a store of {len(self)} rows")
        return values[offsets[i] : offsets[i + 1]]

    def tokens(self, i: int) -> np.ndarray:
        return self.row(i, "input_ids")

    def get(self, pid: str, column: str = "input_ids") -> np.ndarray:
        return self.row(self.index_of(pid), column)

    def lengths(self) -> np.ndarray:
        return np.diff(self.ragged("input_ids")[1])

    def _column(self, name: str) -> pa.ChunkedArray:
        if name in ("input_ids", "word_ids", "id"):
            return self._tokens.column(name)
        if name not in self.manifest["columns"]:
            raise KeyError(f"column {name!r} is not in the store {self.path} (columns: {self.column_names})")
        meta = self.manifest["columns"][name]
        files = self.manifest.get("files") or {}
        if meta["file"] in files:
            verify_file(self.path / meta["file"], files[meta["file"]], self._verify)
        table = _read_arrow(self.path / meta["file"])
        if table.num_rows != len(self):
            raise FormatError(
                f"column file has {table.num_rows} rows, the store has {len(self)}",
                path=self.path / meta["file"],
            )
        return table.column(name)

    def verify_columns(self) -> None:
        """Check every file the manifest names against its checksum now (each column is otherwise
        checked when it is first read): every file of its ``files`` (``open`` checked the tokens and
        the tokenizer). In a store with checksums, a column file without one is refused: nothing
        the manifest names goes unchecked."""
        files = self.manifest.get("files") or {}
        for name, meta in self.manifest["columns"].items():
            if TOKENS_FILE in files and meta["file"] not in files:
                raise FormatError(
                    f"column {name!r} ({meta['file']}) has no checksum in the manifest: it was not "
                    "added by dense-pt; rebuild the column (`dense-pt pmi score ... --force`)",
                    path=self.path / MANIFEST_FILE,
                )
        for file, entry in files.items():
            if file not in (TOKENS_FILE, TOKENIZER_FILE):  # checked by ``open``, in the same mode
                verify_file(self.path / file, entry, self._verify)

    # ---- adding columns ------------------------------------------------------------------
    def add_column(
        self,
        name: str,
        values: np.ndarray,
        offsets: np.ndarray,
        meta: dict[str, Any] | None = None,
        force: bool = False,
    ) -> None:
        """Atomically add a per-token column (same lengths as ``input_ids``) as ``<name>.arrow``.
        ``name`` must be a plain identifier (it becomes a file name) and not a reserved one."""
        check_name(name, "column name", RESERVED_COLUMNS)
        if name in self.manifest["columns"] and not force:
            raise already_exists(
                self.path / name, f"{self.path}: column {name!r} exists (use force to replace it)"
            )
        if name not in self.manifest["columns"] and os.path.lexists(self.path / f"{name}.arrow"):
            raise already_exists(
                self.path / f"{name}.arrow",
                f"{self.path / f'{name}.arrow'} is not a column of this store: dense-pt did not write it; "
                "move it away or choose another column name",
            )
        offsets = np.asarray(offsets, dtype=np.int64)
        if not np.array_equal(np.diff(offsets), self.lengths()):
            raise MismatchError(f"column {name!r}: row lengths do not match the store's input_ids")
        arr = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(np.asarray(values)))
        file = f"{name}.arrow"
        digest: list[str] = []
        with (
            atomic_file(
                self.path / file, "wb", before_replace=lambda tmp: digest.append(file_checksum(tmp))
            ) as f,
            pa.ipc.new_file(f, pa.schema([(name, arr.type)])) as writer,
        ):
            for start in range(0, len(arr), ROWS_PER_BATCH):
                writer.write_batch(pa.record_batch([arr.slice(start, ROWS_PER_BATCH)], names=[name]))
        remember_verified(self.path / file, digest[0])  # after the rename (it changed the ctime)
        manifest = json.loads(json.dumps(self.manifest))
        manifest["columns"][name] = {"file": file, "dtype": str(arr.type.value_type), **(meta or {})}
        if TOKENS_FILE in manifest.get("files", {}):  # a store written before checksums has none
            manifest["files"][file] = {"bytes": (self.path / file).stat().st_size, "xxh3_128": digest[0]}
        write_json_atomic(self.path / MANIFEST_FILE, manifest)
        self.manifest = manifest
        self._ragged.pop(name, None)


def _in_schema(data: Any, path: Path, mpath: Path) -> dict[str, Any]:
    """A store's manifest in the artifact schema (an older one translated), or a FormatError."""
    if artifacts.manifest.is_header(data):
        if data["kind"] != KIND:
            raise FormatError(f"not a corpus store (a dense-pt {data['kind']})", path=path)
        manifest = data
    else:
        manifest = translate(data, path) or {}
    missing = [k for k in _REQUIRED_MANIFEST if k not in manifest]
    if missing:
        raise FormatError(f"manifest lacks field(s) {missing}", path=mpath)
    return manifest


def _named_files(path: Path, manifest: dict[str, Any], mpath: Path) -> dict[str, Any]:
    """The manifest's ``files`` (name -> size and checksum), after checking that every file it
    names, and every column's file, is inside the store (``artifacts.inside``)."""
    files = manifest.get("files") or {}
    columns = manifest["columns"]
    if not isinstance(files, dict) or not isinstance(columns, dict):
        raise FormatError("'files' and 'columns' must be objects", path=mpath)
    for name, meta in columns.items():
        if not isinstance(meta, dict):
            raise FormatError(f"column {name!r}: expected an object with its 'file'", path=mpath)
        inside(path, meta.get("file"), mpath)
    for name in files:
        inside(path, name, mpath)
    return files


def _read_arrow(path: Path) -> pa.Table:
    if not path.exists():
        raise FormatError("missing file of the corpus store", path=path)
    try:
        return pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()
    except (pa.ArrowInvalid, OSError) as exc:  # a damaged footer is an OSError in pyarrow
        if is_out_of_memory(exc):  # the map failed, not the file: "out of memory", not "damaged"
            raise
        raise FormatError(f"not a readable Arrow IPC file ({exc})", path=path) from exc


def store_files(path: str | Path) -> set[str]:
    """The names in folder ``path`` that a store dense-pt wrote there holds: its own files, and the
    columns and files its manifest lists (what ``--force`` may replace; nothing else)."""
    names = {MANIFEST_FILE, TOKENS_FILE, TOKENIZER_FILE}
    try:
        manifest = json.loads((Path(path) / MANIFEST_FILE).read_text(encoding="utf-8"))
        listed = [*(manifest.get("files") or {})]
        listed += [c.get("file") for c in (manifest.get("columns") or {}).values() if isinstance(c, dict)]
    except (OSError, ValueError, AttributeError, TypeError):
        return names
    # a plain name only: a manifest naming another folder's file proves nothing here
    return names | {n for n in listed if isinstance(n, str) and n and "/" not in n and n not in (".", "..")}


def write_store(
    out: str | Path,
    rows: Iterable[tuple[str, np.ndarray, np.ndarray]],
    tokenizer: Tokenizer,
    meta: dict[str, Any] | None = None,
    force: bool = False,
) -> CorpusStore:
    """Write a store from (id, input_ids, word_ids) rows, atomically (temp folder + rename).

    Duplicate ids and empty rows are refused. ``meta`` is merged into the manifest (source,
    max_length, ...); a ``tokenizer`` dict in it (e.g. the tokenizer's name) is merged into the
    manifest's ``tokenizer`` entry rather than replacing the vocab hash.
    """
    out = Path(out)
    meta = dict(meta or {})
    tokenizer_meta = dict(meta.pop("tokenizer", None) or {})
    specials = special_token_ids(tokenizer)
    unique = UniqueIds()  # 8 bytes per id instead of a set of millions of strings
    n_rows = n_tokens = 0
    with atomic_dir(out, force=force, owned=store_files(out)) as tmp:
        with writing(out, (tmp,)):
            tokenizer.save(str(tmp / TOKENIZER_FILE))
        with pa.OSFile(str(tmp / TOKENS_FILE), "wb") as sink, pa.ipc.new_file(sink, TOKENS_SCHEMA) as writer:
            buf: list[tuple[str, np.ndarray, np.ndarray]] = []
            buf_tokens = 0
            for pid, ids, words in rows:
                unique.add(pid)
                if len(ids) == 0:
                    raise InvalidArgumentError(f"passage {pid!r} has no tokens")
                if len(words) != len(ids):
                    raise InvalidArgumentError(f"passage {pid!r}: word_ids and input_ids differ in length")
                buf.append((pid, ids, words))
                n_rows += 1
                n_tokens += len(ids)
                buf_tokens += len(ids)
                if len(buf) >= ROWS_PER_BATCH or buf_tokens >= TOKENS_PER_BATCH:
                    writer.write_batch(_batch(buf))
                    buf, buf_tokens = [], 0
            if buf or n_rows == 0:
                writer.write_batch(_batch(buf))
        dup = unique.first_duplicate(
            lambda: enumerate(_read_arrow(tmp / TOKENS_FILE).column("id").to_pylist())
        )
        if dup is not None:
            raise InvalidArgumentError(f"duplicate passage id {dup[0]!r} (rows {dup[1]} and {dup[2]})")
        # the directory's rename keeps these files' inodes and times: verified as written
        files = {name: checksum_entry(tmp / name) for name in (TOKENS_FILE, TOKENIZER_FILE)}
        # the build's settings (``CorpusSettings.model_dump()``), or what a caller passed along
        settings = meta.pop("settings", None)
        if settings is None:
            settings = {k: v for k, v in meta.items() if k not in ("source", "build")}
        head = artifacts.header(KIND, "corpus build", format=FORMAT_VERSION, key=meta.get("source"),
                                settings=settings, files=files, complete=True)  # fmt: skip
        manifest = {
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "tokenizer": {
                **tokenizer_meta,
                "vocab_hash": vocab_hash(tokenizer),
                "vocab_size": tokenizer.get_vocab_size(with_added_tokens=True),
                "file": TOKENIZER_FILE,
            },
            "special_tokens": specials,
            "num_rows": n_rows,
            "num_tokens": n_tokens,
            "columns": {},
            **meta,
        }
        artifacts.write(tmp, head, manifest)
    return CorpusStore.open(out)


def _batch(buf: list[tuple[str, np.ndarray, np.ndarray]]) -> pa.RecordBatch:
    def ragged(arrays: list[np.ndarray]) -> pa.Array:
        offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
        np.cumsum([len(a) for a in arrays], out=offsets[1:])
        flat = np.concatenate(arrays).astype(np.uint32) if arrays else np.zeros(0, np.uint32)
        return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(flat, type=pa.uint32()))

    return pa.record_batch(
        [pa.array([b[0] for b in buf], pa.utf8()), ragged([b[1] for b in buf]), ragged([b[2] for b in buf])],
        schema=TOKENS_SCHEMA,
    )


def build_store_from_texts(
    out: str | Path,
    docs: Iterable[tuple[str, str]],
    tokenizer: Tokenizer,
    max_length: int | None = None,
    meta: dict[str, Any] | None = None,
    force: bool = False,
    batch_size: int = 1024,
) -> CorpusStore:
    """Tokenize (id, text) pairs and write a store. ``max_length`` counts [CLS] and [SEP], so at most
    ``max_length - 2`` content tokens are kept, as in training."""
    max_content = None if max_length is None else max_length - 2
    if max_content is not None and max_content < 1:
        raise InvalidArgumentError(f"max_length must be at least 3, got {max_length}")

    def rows() -> Iterable[tuple[str, np.ndarray, np.ndarray]]:
        batch: list[tuple[str, str]] = []
        for item in docs:
            batch.append(item)
            if len(batch) >= batch_size:
                yield from _encode(batch)
                batch = []
        if batch:
            yield from _encode(batch)

    def _encode(batch: list[tuple[str, str]]) -> Iterable[tuple[str, np.ndarray, np.ndarray]]:
        encoded = encode_texts(tokenizer, [t for _, t in batch], max_content)
        for (pid, _), (ids, words) in zip(batch, encoded, strict=True):
            yield pid, ids, words

    return write_store(out, rows(), tokenizer, meta={"max_length": max_length, **(meta or {})}, force=force)
