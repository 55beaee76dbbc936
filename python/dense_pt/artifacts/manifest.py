"""The one manifest schema: what an output is, who wrote it, from what, and whether it is complete.

Every output folder of dense-pt holds one ``manifest.json`` whose top level carries the header
(``Header``: ``kind``, ``format``, ``written_by`` {command, version}, ``key``, ``settings``,
``files`` {name: {bytes, xxh3_128}}, ``complete``) beside what its kind adds (an index's stats,
a stage's fingerprint, the shards of embeddings). It is written last and atomically
(``write``); ``open`` is the one reader (older layouts are translated by ``legacy``).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dense_pt import __version__
from dense_pt.artifacts.checksums import checksum_entry, verify_file
from dense_pt.artifacts.legacy import OLD_FILES, translate
from dense_pt.errors import FormatError, InvalidArgumentError, MismatchError, not_found
from dense_pt.fsutil import write_json_atomic

MANIFEST = "manifest.json"
HEADER_KEYS = ("kind", "format", "written_by", "key", "settings", "files", "complete")


@dataclass(frozen=True)
class WrittenBy:
    command: str  # the dense-pt command (or library job) that wrote the output
    version: str  # dense-pt's version


@dataclass(frozen=True)
class Header:
    """The fields every manifest has (its kind's own fields follow them in the same object)."""

    kind: str  # what the output is: "embeddings", "bm25 index", "pipeline stage", ...
    format: int  # the kind's format version
    written_by: WrittenBy
    key: Any = None  # what identifies its inputs (a fingerprint, an index key), when it has one
    settings: dict[str, Any] = field(default_factory=dict)  # the settings, as model_dump() gives them
    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # name: {bytes, xxh3_128}
    complete: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def header(
    kind: str,
    command: str,
    *,
    format: int = 1,
    key: Any = None,
    settings: dict[str, Any] | None = None,
    files: dict[str, dict[str, Any]] | None = None,
    complete: bool = False,
) -> dict[str, Any]:
    """A manifest's header fields as JSON (``Header``), written by ``command`` of this dense-pt."""
    return Header(kind, format, WrittenBy(command, __version__), key, settings or {}, files or {},
                  complete).to_json()  # fmt: skip


def inside(folder: str | Path, name: object, manifest: str | Path) -> Path:
    """``folder / name`` for a file name that ``manifest`` (a file in ``folder``) lists: a store's
    column, an embeddings shard, an index file, a model's module. Every reader of a name from a
    manifest goes through here, so a folder copied from someone else cannot make dense-pt read or
    write outside it: the name must be relative, without ``..``, and lead (symbolic links
    followed) into ``folder``; anything else is an ``InvalidArgumentError`` naming the manifest and
    the name."""
    problem = None
    if not isinstance(name, str) or not name or "\x00" in name:
        problem = "which is not a file name"
    elif os.path.isabs(name) or name.startswith("~") or ".." in re.split(r"[/\\]", name):
        problem = "a path that leads outside its folder"
    else:
        try:
            outside = not (Path(folder) / name).resolve().is_relative_to(Path(folder).resolve())
        except (OSError, RuntimeError):  # a symbolic link loop
            outside = True
        if outside:
            problem = "a symbolic link that leads outside its folder"
    if problem is not None or not isinstance(name, str):
        raise InvalidArgumentError(
            f"{manifest}: names {name!r}, {problem} ({folder}): refused; a manifest may name only "
            "files inside its own folder"
        )
    return Path(folder) / name


def _field_error(path: Path, name: str, want: str, got: Any) -> FormatError:
    return FormatError(f"'{name}' must be {want}, got {got!r}", path)


def parse_header(data: Any, path: Path) -> Header:
    """The header of manifest ``data`` (read from ``path``), or a FormatError naming the field."""
    if not isinstance(data, dict):
        raise FormatError("not a dense-pt manifest (expected a JSON object)", path)
    missing = [k for k in HEADER_KEYS if k not in data]
    if missing:
        raise FormatError(f"not a dense-pt manifest: no {', '.join(repr(k) for k in missing)}", path)
    wb = data["written_by"]
    checks = (
        ("kind", isinstance(data["kind"], str), "a string"),
        ("format", isinstance(data["format"], int) and not isinstance(data["format"], bool), "an integer"),
        ("written_by", isinstance(wb, dict) and all(isinstance(wb.get(k), str) for k in ("command", "version")),
         "an object with 'command' and 'version'"),
        ("settings", isinstance(data["settings"], dict), "an object"),
        ("files", isinstance(data["files"], dict) and all(isinstance(v, dict) for v in data["files"].values()),
         "an object of file entries"),
        ("complete", isinstance(data["complete"], bool), "true or false"),
    )  # fmt: skip
    for name, ok, want in checks:
        if not ok:
            raise _field_error(path, name, want, data[name])
    return Header(data["kind"], data["format"], WrittenBy(wb["command"], wb["version"]), data["key"],
                  data["settings"], data["files"], data["complete"])  # fmt: skip


def is_header(data: Any) -> bool:
    """Whether ``data`` is a manifest of this schema (an older layout is not)."""
    try:
        parse_header(data, Path(MANIFEST))
    except FormatError:
        return False
    return True


def where(folder: str | Path) -> Path:
    """The file that holds ``folder``'s manifest: ``manifest.json``, or an older layout's file."""
    path = Path(folder) / MANIFEST
    if not path.exists():
        return next((Path(folder) / n for n in OLD_FILES if (Path(folder) / n).is_file()), path)
    return path


def read(folder: str | Path, kind: str | None = None) -> dict[str, Any] | None:
    """``folder``'s manifest (this schema, or an older layout translated to it), or None when it has
    none that dense-pt wrote (no manifest, unreadable, or another program's) or, with ``kind``,
    one of another kind."""
    try:
        data = json.loads(where(folder).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    found = data if is_header(data) else translate(data, Path(folder))
    return found if found is not None and kind in (None, found["kind"]) else None


def open(
    folder: str | Path,
    kind: str,
    key: Any = None,
    *,
    format: int | None = None,
    complete: bool = False,
    verify: str = "none",
) -> dict[str, Any]:
    """The manifest of output ``folder`` of ``kind`` (of ``format``, with ``key`` and finished,
    when asked), the files it names checked to lie inside the folder and, unless ``verify`` is
    "none", against their sizes and checksums (``verify_file``: "cached" or "full"); anything
    else is one clear error."""
    folder = Path(folder)
    if not folder.exists():
        raise not_found(folder, f"no such {kind} folder")
    data = read(folder)
    if data is None:
        if (folder / MANIFEST).is_file():
            parse_header(_raw(folder / MANIFEST), folder / MANIFEST)  # names what is wrong with it
        raise FormatError(f"not a dense-pt {kind} (no {MANIFEST})", folder)
    found = parse_header(data, folder / MANIFEST)
    if found.kind != kind:
        raise InvalidArgumentError(f"{folder} holds a dense-pt {found.kind}, not a {kind}")
    if format is not None and found.format != format:
        raise FormatError(f"{kind} format version {found.format!r} is not supported (this dense-pt reads "
                          f"version {format})", where(folder))  # fmt: skip
    if key is not None and found.key != key:
        raise MismatchError(f"{folder}: the {kind} was made from other inputs or settings (its key differs)")
    if complete and not found.complete:
        raise FormatError(f"the {kind} is incomplete: run `dense-pt {found.written_by.command}` again to finish it",
                          folder)  # fmt: skip
    for name in found.files:
        inside(folder, name, folder / MANIFEST)
    for name, entry in found.files.items():
        verify_file(folder / name, entry, verify)
    return data


def _raw(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(f"invalid JSON ({exc})", path) from None


def write(folder: str | Path, head: dict[str, Any], body: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write ``folder``'s manifest atomically: ``head`` (``header(...)``) and the kind's own
    fields (``body``; a header field there is an error: the header says it once)."""
    body = body or {}
    clash = sorted(set(body) & set(HEADER_KEYS))
    if clash:
        raise ValueError(f"the body of a manifest repeats header fields {clash}")
    data = {**head, **body}
    parse_header(data, Path(folder) / MANIFEST)
    write_json_atomic(Path(folder) / MANIFEST, data)
    return data


def beside(path: str | Path) -> Path:
    """The manifest of a single-file output (a negatives file): ``<file>.manifest.json``."""
    return Path(f"{path}.{MANIFEST}")


def write_beside(path: str | Path, head: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """Write the manifest of the single file ``path`` (``beside``), listing the file with its
    checksum; like ``write``, atomically and last."""
    data = {**head, "files": {Path(path).name: checksum_entry(path)}, **body}
    if set(body) & set(HEADER_KEYS):
        raise ValueError(
            f"the body of a manifest repeats header fields {sorted(set(body) & set(HEADER_KEYS))}"
        )
    parse_header(data, beside(path))
    write_json_atomic(beside(path), data)
    return data


def body(data: dict[str, Any]) -> dict[str, Any]:
    """A manifest's own fields, without the header's."""
    return {k: v for k, v in data.items() if k not in HEADER_KEYS}
