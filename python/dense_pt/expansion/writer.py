"""The queries folder: Parquet shards written atomically, plus a manifest; resumable.

Layout of ``--out QUERIES``::

    manifest.json        what generated the queries (``dense_pt.artifacts``): model, backend, prompt
                         (name, hash, template), number of queries, sampling parameters, seed,
                         passage truncation (``expansion.json`` in folders of older versions)
    part-00000.parquet   one shard per chunk of passages, each written to a temporary name and
    part-00001.parquet   renamed into place, so a killed run leaves only complete shards

Shard columns: ``id`` (passage id), ``queries`` (list<string>, after parsing; may be empty),
``raw`` (the model's raw output), ``model``, ``prompt_hash``, ``temperature``, ``top_p``, ``top_k``,
``max_new_tokens``, ``seed`` (the passage's generation seed).

A re-run into the same folder reads the ids of the existing shards and generates only the missing
passages. It refuses (MismatchError) when the model, prompt, sampling, seed or number of queries
differ from the manifest, so one folder never mixes two configurations.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dense_pt import artifacts
from dense_pt.errors import FormatError, InvalidArgumentError, MismatchError
from dense_pt.fsutil import atomic_file

MANIFEST = artifacts.MANIFEST
OLD_MANIFEST = "expansion.json"  # the manifest of folders written before dense_pt.artifacts
KIND = "pseudo-queries"
FORMAT_VERSION = 1
_SHARD = re.compile(r"^part-(\d{5,})\.parquet$")
# Keys of the manifest that must agree between runs writing into one folder.
COMPATIBILITY_KEYS = (
    "model",
    "backend",
    "chat",
    "prompt_hash",
    "num_queries",
    "sampling",
    "seed",
    "max_passage_words",
)

SCHEMA = pa.schema(
    [
        ("id", pa.utf8()),
        ("queries", pa.list_(pa.utf8())),
        ("raw", pa.utf8()),
        ("model", pa.utf8()),
        ("prompt_hash", pa.utf8()),
        ("temperature", pa.float32()),
        ("top_p", pa.float32()),
        ("top_k", pa.int32()),
        ("max_new_tokens", pa.int32()),
        ("seed", pa.int64()),
    ]
)


def shard_paths(folder: str | Path) -> list[Path]:
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if _SHARD.match(p.name))


def shard_index(path: Path) -> int:
    """N of a shard named ``part-N.parquet`` (``shard_paths`` lists only such names)."""
    m = _SHARD.match(path.name)
    if m is None:
        raise FormatError(f"not a queries shard name (part-NNNNN.parquet): {path.name}", path)
    return int(m.group(1))


class QueryWriter:
    """Appends shards to a queries folder whose manifest matches ``manifest``."""

    def __init__(self, folder: str | Path, manifest: dict[str, Any]):
        self.folder = Path(folder)
        if self.folder.exists() and not self.folder.is_dir():
            raise InvalidArgumentError(f"--out {self.folder}: exists and is not a folder")
        self.manifest = manifest
        old = artifacts.read(self.folder, KIND)
        if old is not None and artifacts.body(old):  # an earlier run's (not only claimed)
            old = open_queries(self.folder)
            diff = [k for k in COMPATIBILITY_KEYS if old.get(k) != self.manifest.get(k)]
            if diff:
                details = "; ".join(f"{k}: {old.get(k)!r} there, {self.manifest.get(k)!r} now" for k in diff)
                raise MismatchError(
                    f"{self.folder} holds queries generated differently ({details}); use another --out folder"
                )
        elif shard_paths(self.folder):
            raise FormatError(f"shards without {MANIFEST}: not a dense-pt queries folder", self.folder)
        else:
            head = artifacts.header(KIND, "expand", format=FORMAT_VERSION, complete=False)
            artifacts.write(self.folder, head, manifest)
        shards = shard_paths(self.folder)
        self._next = 1 + max((shard_index(p) for p in shards), default=-1)

    def done_ids(self) -> set[str]:
        done: set[str] = set()
        for p in shard_paths(self.folder):
            done.update(_read(p, ["id"]).column("id").to_pylist())
        return done

    def write(self, rows: list[dict[str, Any]]) -> Path:
        """Write one shard atomically (temporary file in the folder, fsync, rename)."""
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        path = self.folder / f"part-{self._next:05d}.parquet"
        with atomic_file(path, "wb") as f:
            pq.write_table(table, f, compression="zstd")
        self._next += 1
        return path


def open_queries(folder: str | Path) -> dict[str, Any]:
    """The manifest of a queries folder (``dense_pt.artifacts.open``; one written before the
    artifact layer, ``expansion.json``, too)."""
    if not (Path(folder) / MANIFEST).exists() and not (Path(folder) / OLD_MANIFEST).exists():
        raise InvalidArgumentError(f"{folder}: not a queries folder (no {MANIFEST})")
    return artifacts.open(folder, KIND, format=FORMAT_VERSION)


def _read(path: Path, columns: list[str] | None = None) -> pa.Table:
    try:
        return pq.read_table(path, columns=columns)
    except (pa.ArrowInvalid, OSError) as exc:
        raise FormatError(f"unreadable Parquet shard ({exc})", path) from exc


def read_queries_table(folder: str | Path, columns: list[str] | None = None) -> pa.Table:
    """All shards of a queries folder as one table (an empty table with the schema if none)."""
    open_queries(folder)
    tables = [_read(p, columns) for p in shard_paths(folder)]
    if not tables:
        schema = SCHEMA if columns is None else pa.schema([SCHEMA.field(c) for c in columns])
        return schema.empty_table()
    return pa.concat_tables(tables)


def load_pseudo_queries(folder: str | Path, include_empty: bool = False) -> dict[str, list[str]]:
    """``{passage id: [query, ...]}`` of a queries folder; passages whose output yielded no query are
    left out unless ``include_empty``. A passage id in two shards is an error."""
    out: dict[str, list[str]] = {}
    seen: set[str] = set()
    for p in shard_paths(folder):
        t = _read(p, ["id", "queries"])
        for pid, qs in zip(t.column("id").to_pylist(), t.column("queries").to_pylist(), strict=True):
            if pid in seen:
                raise FormatError(f"passage {pid!r} appears in more than one shard", p)
            seen.add(pid)
            if qs or include_empty:
                out[pid] = qs or []
    if not shard_paths(folder):
        open_queries(folder)
    return out


# the old name (data.load_queries reads a queries file)
load_queries = load_pseudo_queries
