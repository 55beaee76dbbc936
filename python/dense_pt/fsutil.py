"""Writing files the way every dense-pt command does: atomically, readable like any file the user
writes, with errors that name the user's path, and without leaving temporaries behind.

- **Atomic**: ``atomic_file`` (and ``dense_pt.artifacts.replace.atomic_dir``) write under a hidden temporary name in the target's
  folder and rename it into place, so an interrupted command leaves the old artifact or none.
- **Ordinary permissions**: temporaries are created with mode 0666 / 0777 and the process umask
  applies, as for any file the user creates (``mkstemp``/``mkdtemp`` would leave 0600 / 0700).
- **Errors name the user's path**: an ``OSError`` while writing (a full disk, a quota, a file size
  limit, a read-only or forbidden folder) becomes a one-line ``DensePtIOError`` naming the target,
  never the hidden temporary (``writing(path)`` gives the same to writers that do not rename;
  ``dense_pt.write_errors``).
- **No leftovers**: a temporary's name carries its owner, ``.<target>.<pid>-<host>.<random>.<kind>``
  (kind ``tmp``, ``partial`` or ``old``); the first write into a folder in a process removes the
  temporaries there whose owner process (on this host) is dead, e.g. after kill -9. The Rust core
  names its temporaries (n-gram tables, spilled runs, negatives files) the same way
  (``rust/core/src/atomic.rs``). Live processes' files, other hosts' files on a shared file system
  and names in any other form are never touched.
"""

from __future__ import annotations

import contextlib
import errno as _errno
import json
import os
import re
import secrets
import shutil
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dense_pt.errors import io_error
from dense_pt.write_errors import writing

TEMP_KINDS = ("tmp", "partial", "old")


# ---- owners of temporaries -------------------------------------------------------------------
def _host() -> str:
    # Only [A-Za-z0-9_]: the tag must not contain the "." and "-" that separate its parts.
    return re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname()) or "host"


def owner_tag() -> str:
    """``<pid>-<host>`` of this process (computed per call: a forked child has its own pid)."""
    return f"{os.getpid()}-{_host()}"


def temp_path(target: Path, kind: str) -> Path:
    """A fresh hidden name beside ``target`` that says who owns it (see the module docstring)."""
    return target.with_name(f".{target.name}.{owner_tag()}.{secrets.token_hex(4)}.{kind}")


def _owner_of(name: str) -> tuple[int, str] | None:
    """(pid, host) of a dense-pt temporary's name, or None for any other name."""
    if not name.startswith("."):
        return None
    parts = name.rsplit(".", 3)
    if len(parts) != 4 or parts[3] not in TEMP_KINDS or not re.fullmatch(r"[0-9a-f]+", parts[2]):
        return None
    pid, sep, host = parts[1].partition("-")
    if not sep or not pid.isdigit() or not host:
        return None
    return int(pid), host


def is_temporary(name: str) -> bool:
    """Whether ``name`` is a dense-pt temporary's (``temp_path``): never a user's file."""
    return _owner_of(name) is not None


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (a zombie, killed but not reaped, is dead)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def _target_of(name: str) -> str:
    return name[1:].rsplit(".", 3)[0]


def remove_stale_temporaries(folder: str | Path) -> list[Path]:
    """Remove the dense-pt temporaries in ``folder`` whose owner process on this host is dead.

    A stale ``.old`` (the previous version of a folder, moved aside for the instant between two
    renames) is put back when its target is missing, else removed. Returns what was removed."""
    folder = Path(folder)
    removed: list[Path] = []
    host = _host()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        owner = _owner_of(entry.name)
        if owner is None or owner[1] != host or pid_alive(owner[0]):
            continue
        path = Path(entry.path)
        try:
            if entry.name.endswith(".old") and not (folder / _target_of(entry.name)).exists():
                os.replace(path, folder / _target_of(entry.name))
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path)
            else:
                path.unlink()
            removed.append(path)
        except OSError:
            pass  # someone else cleaned it, or we may not: not our business to fail over it
    return removed


_cleaned: set[tuple[int, str]] = set()


def _clean_once(folder: Path) -> None:
    """Clean ``folder`` on the first write into it by this process (one scan, not one per file)."""
    key = (os.getpid(), str(folder.resolve()))
    if key not in _cleaned:
        _cleaned.add(key)
        remove_stale_temporaries(folder)


# ---- atomic writes ---------------------------------------------------------------------------
def mkdir_parent(path: Path) -> None:
    for folder in (path.parent, *path.parent.parents):
        if folder.exists():
            if not folder.is_dir():
                raise io_error(_errno.ENOTDIR, f"cannot write {path}: {folder} is not a folder", str(path))
            break
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
    _clean_once(path.parent)


@contextlib.contextmanager
def atomic_file(
    path: str | Path,
    mode: str = "w",
    *,
    before_replace: Callable[[Path], None] | None = None,
    **kwargs: Any,
) -> Iterator[Any]:
    """Write to a temporary file in the same folder, fsync, then rename over ``path``.
    ``before_replace(tmp)`` runs on the complete temporary just before the rename (e.g. to
    checksum it)."""
    path = Path(path)
    mkdir_parent(path)
    tmp = temp_path(path, "tmp")
    try:
        with writing(path, (tmp,)):
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
            with os.fdopen(fd, mode, **kwargs) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            if before_replace is not None:
                before_replace(tmp)
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json_atomic(path: str | Path, obj: Any) -> None:
    with atomic_file(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


def remove_tree(path: str | Path) -> None:
    """Remove a folder dense-pt wrote (or a file, or a symbolic link: the link only, never what it
    points to); a missing path is not an error."""
    path = Path(path)
    if path.is_symlink() or (os.path.lexists(path) and not path.is_dir()):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    shutil.rmtree(path, ignore_errors=True)
