"""Writing files the way every dense-pt command does: atomically, readable like any file the user
writes, with errors that name the user's path, and without leaving temporaries behind.

- **Atomic**: ``atomic_file`` / ``atomic_dir`` write under a hidden temporary name in the target's
  folder and rename it into place, so an interrupted command leaves the old artifact or none.
- **Ordinary permissions**: temporaries are created with mode 0666 / 0777 and the process umask
  applies, as for any file the user creates (``mkstemp``/``mkdtemp`` would leave 0600 / 0700).
- **Errors name the user's path**: an ``OSError`` while writing (a full disk, a quota, a file size
  limit, a read-only or forbidden folder) becomes a one-line ``DensePtIOError`` naming the target,
  never the hidden temporary (``writing(path)`` gives the same to writers that do not rename).
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
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

from dense_pt.errors import DensePtIOError, FormatError, InvalidArgumentError, already_exists, io_error

TEMP_KINDS = ("tmp", "partial", "old")

# errno values that mean "this write cannot go through" (and not "the input is missing").
_WRITE_ERRNOS = {
    _errno.ENOSPC,
    _errno.EDQUOT,
    _errno.EFBIG,
    _errno.EROFS,
    _errno.EACCES,
    _errno.EPERM,
    _errno.EIO,
}
# How libraries that do not raise OSError (pyarrow, torch, safetensors) word the same failures.
_WRITE_FAILURE_TEXT = re.compile(
    r"no space left on device|file too large|disk quota exceeded|read-only file system|"
    r"file write failed|os error (?:28|27|122|30)\b|errno (?:28|27|122|30)\b|"
    r"\d+ requested and \d+ written|enforce fail at inline_container\.cc",
    re.IGNORECASE,
)


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


# ---- names -----------------------------------------------------------------------------------
def check_name(name: str, what: str, reserved: tuple[str, ...] = (), plain: bool = False) -> str:
    """``name`` if it is a plain identifier (ASCII letters, digits, ``_``; not starting with a
    digit; at most 100 characters; with ``plain``: ``-`` and ``.`` too, see
    ``dense_pt.config.names``) and not reserved. Every user-given name that becomes part of a file
    name goes through here, so ``../evil`` never leaves the folder it is meant for."""
    from dense_pt.config.names import IDENTIFIER, PLAIN_NAME, name_problem

    problem = name_problem(name, PLAIN_NAME if plain else IDENTIFIER)
    if problem is not None:
        raise InvalidArgumentError(f"{what} {problem}")
    if name in reserved:
        raise InvalidArgumentError(f"{what} {name!r} is reserved (reserved: {', '.join(reserved)})")
    return name


# ---- names a manifest gives ------------------------------------------------------------------
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


# ---- errors that name the user's path --------------------------------------------------------
def _is_write_failure(exc: BaseException, temps: tuple[Path, ...]) -> bool:
    if isinstance(exc, DensePtIOError):
        return False
    if isinstance(exc, OSError):
        names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
        if any(str(t) in n for n in names for t in temps):
            return True
        if exc.errno in _WRITE_ERRNOS and not names:
            return True
    return bool(_WRITE_FAILURE_TEXT.search(str(exc)))


def write_error(exc: BaseException, target: str | Path, temps: tuple[Path, ...] = ()) -> DensePtIOError:
    """A one-line ``DensePtIOError`` for a failed write of ``target`` (temporary names hidden)."""
    code = getattr(exc, "errno", None)
    if code is None:
        m = re.search(r"(?:os error|errno) (\d+)", str(exc), re.IGNORECASE)
        code = int(m.group(1)) if m else None
        if code is None and re.search(r"no space left", str(exc), re.IGNORECASE):
            code = _errno.ENOSPC
        if code is None and re.search(r"file too large", str(exc), re.IGNORECASE):
            code = _errno.EFBIG
    reason = os.strerror(code) if code else str(exc)
    if not code and re.search(r"requested and \d+ written|enforce fail at inline_container", str(exc)):
        # numpy's short fwrite; torch.save's zip writer ("unexpected pos 704 vs 598")
        detail = str(exc).splitlines()[0]
        reason = f"the write stopped short ({detail}): the disk is full or a file size limit was reached"
    for t in temps:
        reason = reason.replace(str(t), str(target))
    return io_error(code, f"cannot write {target}: {reason}", target)


@contextlib.contextmanager
def writing(target: str | Path, temps: tuple[Path, ...] = ()) -> Iterator[None]:
    """Turn a failed write inside the block into a one-line error naming ``target``."""
    try:
        yield
    except Exception as exc:
        if _is_write_failure(exc, temps):
            raise write_error(exc, target, temps) from exc
        raise


# ---- atomic writes ---------------------------------------------------------------------------
def _mkdir_parent(path: Path) -> None:
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
    _mkdir_parent(path)
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


@contextlib.contextmanager
def atomic_dir(path: str | Path, force: bool = False, owned: Collection[str] | None = None) -> Iterator[Path]:
    """Build a directory under a temporary sibling name and rename it into place on success.

    With ``force`` an existing directory is replaced only after the new one is complete, and only
    when everything in it is dense-pt's (``check_replaceable``: the names the new folder has, and
    ``owned``, the names the old folder's manifest proves dense-pt wrote); ``owned`` given, that
    is checked before the block runs too. A symbolic link to a folder is followed: the new folder
    takes its target's place (the link, and the disk it points to, stay), by the same rule."""
    path = Path(path)
    if path.is_symlink() and path.is_dir():
        path = Path(os.path.realpath(path))
    if os.path.lexists(path) and not force:
        raise already_exists(path, f"{path} already exists (use --force to replace it)")
    if owned is not None:
        check_replaceable(path, owned)
    _mkdir_parent(path)
    tmp = temp_path(path, "partial")
    try:
        with writing(path, (tmp,)):
            os.mkdir(tmp, 0o777)
            yield tmp
            check_replaceable(path, owned or (), new=tmp)
            if os.path.lexists(path):
                old = temp_path(path, "old")
                os.replace(path, old)
                os.replace(tmp, path)
                remove_tree(old)
            else:
                os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def foreign_entries(folder: Path, owned: Collection[str] = (), new: Path | None = None) -> list[Path]:
    """What in ``folder`` dense-pt cannot prove it wrote, so that replacing the folder would lose it:
    every entry but dense-pt's mark, its temporaries, the names in ``owned`` and (to be replaced by
    files of the same names) the names ``new`` holds; inside a folder that ``new`` holds too, the
    same, recursively."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found: list[Path] = []
    for e in entries:
        if e.name == OWNER_FILE or _owner_of(e.name) is not None or e.name in owned:
            continue
        twin = None if new is None else new / e.name
        if twin is None or not os.path.lexists(twin):
            found.append(Path(e.path))
        elif e.is_dir(follow_symlinks=False):
            inner = twin if twin.is_dir() and not twin.is_symlink() else None
            found += foreign_entries(Path(e.path), (), inner) if inner else [Path(e.path)]
    return found


def check_replaceable(path: Path, owned: Collection[str] = (), new: Path | None = None) -> None:
    """Refuse to replace folder ``path`` when it holds anything dense-pt did not write (see
    ``foreign_entries``), naming the first such entry: ``--force`` replaces dense-pt's files, never
    a user's."""
    if not path.is_dir():
        return
    found = foreign_entries(path, owned, new)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise already_exists(
            found[0],
            f"cannot replace {path}: it holds {found[0]}{more}, which dense-pt did not write; move "
            "it away or choose another folder (--force replaces only what dense-pt wrote)",
        )


def remove_tree(path: str | Path) -> None:
    """Remove a folder dense-pt wrote (or a file, or a symbolic link: the link only, never what it
    points to); a missing path is not an error."""
    path = Path(path)
    if path.is_symlink() or (os.path.lexists(path) and not path.is_dir()):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    shutil.rmtree(path, ignore_errors=True)


# ---- what dense-pt may replace ---------------------------------------------------------------
# dense-pt deletes or replaces only what it can prove it wrote: a folder that carries its mark
# (OWNER_FILE, naming the command that wrote it) or, for older folders, the command's own manifest
# (``proof``); a pipeline stage's folder, its manifest with its fingerprint. A non-empty folder it
# did not write, and any existing file (a single file carries no mark), are refused unless the
# user passes --force.
OWNER_FILE = ".dense-pt.json"


def folder_owner(folder: str | Path) -> str | None:
    """The dense-pt command whose mark ``folder`` carries, or None (no mark, or not ours)."""
    mark = Path(folder) / OWNER_FILE
    try:
        if mark.is_symlink() or mark.stat().st_size > 4096:
            return None
        data = json.loads(mark.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        isinstance(data, dict)
        and data.get("written_by") == "dense-pt"
        and isinstance(data.get("command"), str)
    ):
        return data["command"]
    return None


def _is_empty(folder: Path) -> bool:
    """No entry but dense-pt's own temporaries (another process of the same command may be
    writing the mark right now: torchrun's ranks claim the folder together)."""
    with os.scandir(folder) as entries:
        return all(_owner_of(e.name) is not None for e in entries)


def check_output_file(path: str | Path, force: bool = False) -> Path:
    """Refuse to replace an existing ``path`` unless ``force``: dense-pt cannot prove it wrote a
    single file (a TREC run, a table, a PNG). Checked before any work."""
    path = Path(path)
    if path.is_dir():
        raise io_error(_errno.EISDIR, f"cannot write {path}: it is a folder, expected a file name", path)
    if os.path.lexists(path) and not force:
        raise already_exists(path, f"{path} already exists (use --force to replace it)")
    return path


def check_output_dir(
    path: str | Path, command: str, force: bool = False, proof: tuple[str, ...] = ()
) -> bool:
    """Whether dense-pt ``command`` may write into folder ``path``: it does not exist, is empty,
    carries ``command``'s mark, or (a folder written before the marks) holds one of ``proof``;
    anything else is refused unless ``force``. True when ``path`` exists. Writes nothing."""
    path = Path(path)
    if not os.path.lexists(path):
        return False
    if not path.is_dir():
        raise io_error(_errno.ENOTDIR, f"cannot write {path}: it is a file, expected a folder", path)
    if force or _is_empty(path):
        return True
    owner = folder_owner(path)
    if owner == command or (owner is None and any(os.path.lexists(path / p) for p in proof)):
        return True
    if owner is not None:
        why = f"{path} was written by dense-pt {owner}, not {command}"
    else:
        why = f"{path} is not empty and dense-pt did not write it (it has no {OWNER_FILE})"
    raise already_exists(path, f"{why}: choose another folder, or pass --force to write into it")


def mark_output_dir(path: str | Path, command: str) -> None:
    """Create folder ``path`` if needed and mark it as written by ``command``."""
    path = Path(path)
    if folder_owner(path) == command:
        return
    write_json_atomic(path / OWNER_FILE, {"written_by": "dense-pt", "command": command})


@contextlib.contextmanager
def output_dir(
    path: str | Path, command: str, force: bool = False, proof: tuple[str, ...] = ()
) -> Iterator[Path]:
    """Claim folder ``path`` for ``command`` (``check_output_dir``), mark it, and run the block;
    when the block fails before writing anything but the mark, the folder is left as it was (one
    this call created is removed, the mark taken out of one that was empty): a refused input
    leaves nothing behind."""
    path = Path(path)
    existed = check_output_dir(path, command, force, proof)
    was_empty = existed and _is_empty(path)
    mark_output_dir(path, command)
    try:
        yield path
    except BaseException:
        with contextlib.suppress(OSError):
            if [e.name for e in os.scandir(path)] == [OWNER_FILE]:
                if not existed:
                    shutil.rmtree(path)
                elif was_empty:
                    (path / OWNER_FILE).unlink()
        raise


# ---- checksums of large files, verified cheaply --------------------------------------------
# A file's xxh3-128 is computed in Rust (streamed, ~GB/s); a verification is remembered per
# inode with the file's size, mtime and ctime, so opening a store again costs a stat: any write
# to the file (or a copy, a touch, a chmod) changes one of them and forces a new hash.
CACHE_ENV = "DENSE_PT_CACHE_DIR"
_verified: dict[tuple[int, int], tuple[int, int, int, str]] = {}


def file_checksum(path: str | Path) -> str:
    """xxh3-128 of the file's bytes, 32 hex digits."""
    from dense_pt import _native

    return _native.file_checksum(str(path))


def checksum_entry(path: str | Path) -> dict[str, Any]:
    """What a manifest records for a file: ``{"bytes": size, "xxh3_128": digest}`` (the digest
    is remembered as verified)."""
    digest = file_checksum(path)
    remember_verified(path, digest)
    return {"bytes": Path(path).stat().st_size, "xxh3_128": digest}


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


def file_checksum_cached(path: str | Path) -> str:
    """``file_checksum``, or the digest remembered for this very file (same inode, size, mtime and
    ctime: see ``remember_verified``) without reading it again."""
    known = _remembered(os.stat(path))
    if known is not None:
        return known
    digest = file_checksum(path)
    remember_verified(path, digest)
    return digest


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns


def remember_verified(path: str | Path, digest: str) -> None:
    """Record that ``path``, as it is now, has checksum ``digest`` (in memory and in the cache
    folder, ``$DENSE_PT_CACHE_DIR`` or ``~/.cache/dense-pt``; an empty variable turns the folder
    off). A cache that cannot be written is not an error."""
    st = os.stat(path)
    _verified[(st.st_dev, st.st_ino)] = (*_stamp(st), digest)
    folder = _cache_dir()
    if folder is None:
        return
    entry = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "xxh3_128": digest}
    with contextlib.suppress(OSError, DensePtIOError):
        write_json_atomic(folder / f"{st.st_dev}-{st.st_ino}.json", entry)


def _remembered(st: os.stat_result) -> str | None:
    hit = _verified.get((st.st_dev, st.st_ino))
    if hit is not None and hit[:3] == _stamp(st):
        return hit[3]
    folder = _cache_dir()
    if folder is None:
        return None
    try:
        entry = json.loads((folder / f"{st.st_dev}-{st.st_ino}.json").read_text(encoding="utf-8"))
        if (entry["size"], entry["mtime_ns"], entry["ctime_ns"]) == _stamp(st):
            return str(entry["xxh3_128"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


VERIFY_MODES = ("cached", "full", "none")


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
            "truncated or replaced after the store was written; rebuild it",
            path=path,
        )
    want = expected.get("xxh3_128")
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
