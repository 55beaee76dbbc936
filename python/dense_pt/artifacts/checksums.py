"""The one way dense-pt hashes a file: ``file_digest``, remembered per inode with the file's size,
mtime and ctime, so hashing the same file again costs a stat (any write to the file, a copy, a
touch or a chmod changes one of them and forces a new hash).

The digest is xxh3-128 (computed in Rust, streamed, ~GB/s): manifests record it for their files,
and every new record of an input names it. SHA-256 goes through the same cache where an identity
recorded by older versions is compared with a new one (the pipeline's fingerprints, which a test
pins, the embeddings' and corpus stores' source hashes): a finished folder stays up to date, and
its inputs are still read once per change, not once per run."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from dense_pt.errors import DensePtIOError, FormatError, InvalidArgumentError
from dense_pt.fsutil import write_json_atomic

HASH = "xxh3_128"  # the name manifests record beside a digest
HASHES = (HASH, "sha256")
CACHE_ENV = "DENSE_PT_CACHE_DIR"
VERIFY_MODES = ("cached", "full", "none")
_verified: dict[tuple[int, int, str], tuple[int, int, int, str]] = {}


def file_checksum(path: str | Path) -> str:
    """xxh3-128 of the file's bytes, 32 hex digits."""
    from dense_pt import _native

    return _native.file_checksum(str(path))


def checksum_entry(path: str | Path) -> dict[str, Any]:
    """What a manifest records for a file: ``{"bytes": size, "xxh3_128": digest}`` (the digest
    is remembered as verified)."""
    digest = file_checksum(path)
    remember_verified(path, digest)
    return {"bytes": Path(path).stat().st_size, HASH: digest}


def cache_root() -> Path | None:
    """dense-pt's cache folder: ``$DENSE_PT_CACHE_DIR`` (empty: none), else ``~/.cache/dense-pt``."""
    env = os.environ.get(CACHE_ENV)
    if env is not None:
        return Path(env) if env else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dense-pt"


def _cache_dir() -> Path | None:
    root = cache_root()
    return root / "verified" if root is not None else None


def _sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def file_digest(path: str | Path, name: str = HASH) -> str:
    """The ``name`` digest (``HASHES``) of the file, or the one remembered for this very file (same
    inode, size, mtime and ctime: see ``remember_verified``) without reading it again."""
    if name not in HASHES:
        raise InvalidArgumentError(f"unknown hash {name!r} (known: {', '.join(HASHES)})")
    known = _remembered(os.stat(path), name)
    if known is not None:
        return known
    digest = file_checksum(path) if name == HASH else _sha256(path)
    remember_verified(path, digest, name)
    return digest


def file_checksum_cached(path: str | Path) -> str:
    """``file_digest`` with xxh3-128."""
    return file_digest(path)


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns


def remember_verified(path: str | Path, digest: str, name: str = HASH) -> None:
    """Record that ``path``, as it is now, has the ``name`` digest ``digest`` (in memory and in the
    cache folder, ``$DENSE_PT_CACHE_DIR`` or ``~/.cache/dense-pt``, one small file per inode
    holding its digests; an empty variable turns the folder off). A cache that cannot be written
    is not an error."""
    st = os.stat(path)
    _verified[(st.st_dev, st.st_ino, name)] = (*_stamp(st), digest)
    folder = _cache_dir()
    if folder is None:
        return
    entry = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns}
    old = _cache_entry(folder, st)
    digests = {k: old[k] for k in HASHES if old is not None and isinstance(old.get(k), str)}
    with contextlib.suppress(OSError, DensePtIOError):
        write_json_atomic(folder / f"{st.st_dev}-{st.st_ino}.json", {**entry, **digests, name: digest})


def _cache_entry(folder: Path, st: os.stat_result) -> dict[str, Any] | None:
    """The cache folder's entry for this inode, when it was made for the file as it is now."""
    try:
        entry = json.loads((folder / f"{st.st_dev}-{st.st_ino}.json").read_text(encoding="utf-8"))
        if (entry["size"], entry["mtime_ns"], entry["ctime_ns"]) == _stamp(st):
            return dict(entry)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _remembered(st: os.stat_result, name: str = HASH) -> str | None:
    hit = _verified.get((st.st_dev, st.st_ino, name))
    if hit is not None and hit[:3] == _stamp(st):
        return hit[3]
    folder = _cache_dir()
    entry = None if folder is None else _cache_entry(folder, st)
    found = None if entry is None else entry.get(name)
    return found if isinstance(found, str) else None


def verify_file(path: str | Path, expected: dict[str, Any], verify: str = "cached") -> None:
    """Check ``path`` against a manifest entry (``checksum_entry``): its size always, its
    checksum unless the same file (inode, size, mtime, ctime) was verified before (``"cached"``),
    always (``"full"``) or never (``"none"``: not even the size). A mismatch is a FormatError
    naming the file."""
    if verify not in VERIFY_MODES:
        raise InvalidArgumentError(f"verify must be one of {', '.join(VERIFY_MODES)}, got {verify!r}")
    if verify == "none":
        return
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FormatError("missing file of the corpus store", path=path) from None
    if st.st_size != expected.get("bytes"):
        raise FormatError(
            f"file has {st.st_size:,} bytes but the manifest recorded {expected.get('bytes')!r}: it was "
            "truncated or replaced after it was written; rebuild it",
            path=path,
        )
    want = expected.get(HASH)
    if verify == "cached" and _remembered(st) == want:
        return
    got = file_checksum(path)
    if got != want:
        raise FormatError(
            f"checksum mismatch (xxh3-128 {got}, the manifest recorded {want}): the file was "
            "modified or corrupted after it was written; rebuild it",
            path=path,
        )
    remember_verified(path, got)
