"""Who may write into a folder: ``claim`` (the one ownership rule) and ``claimed`` (claim, work,
and leave nothing behind when the work fails before writing anything).

dense-pt writes into, replaces or deletes only what it can prove it wrote: a folder whose manifest
(``manifest.json``, any layout: see ``legacy``) says the same kind, or an empty or new one;
anything else is refused unless the user passes ``--force``, and a ``manifest.json`` that is not
dense-pt's is never overwritten, ``--force`` or not.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dense_pt.artifacts import legacy
from dense_pt.artifacts.manifest import HEADER_KEYS, MANIFEST, body, header, read, write
from dense_pt.errors import already_exists, io_error
from dense_pt.fsutil import is_temporary


def _writer(folder: Path) -> tuple[str, str] | None:
    """(kind, command) of the dense-pt output ``folder`` holds by its manifest or an old mark."""
    data = read(folder)
    if data is not None:
        return str(data["kind"]), str(data["written_by"]["command"])
    command = legacy.old_mark(folder)
    return None if command is None else (legacy.kind_of_command(command), command)


def owner(folder: str | Path) -> str | None:
    """The kind of dense-pt output ``folder`` holds according to its manifest or an old mark, or
    None."""
    found = _writer(Path(folder))
    return None if found is None else found[0]


def _is_empty(folder: Path) -> bool:
    """No entry but dense-pt's own temporaries (another process of the same command may be
    claiming the folder right now: torchrun's ranks claim it together)."""
    with os.scandir(folder) as entries:
        return all(is_temporary(e.name) for e in entries)


def proven(folder: Path, kind: str) -> bool:
    """Whether ``folder``, written before the marks, holds a file that only ``kind``'s command
    writes (a pipeline: a stage folder with its manifest)."""
    if kind == "pipeline":
        with os.scandir(folder) as entries:
            subs = [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
        return any((read(s) or {}).get("kind") == "pipeline stage" for s in subs)
    return any(os.path.lexists(folder / name) for name in legacy.PROOF.get(kind, ()))


def _refuse(path: Path, command: str, found: tuple[str, str] | None) -> None:
    if found is not None:
        why = f"{path} was written by dense-pt {found[1]}, not {command} (it holds a dense-pt {found[0]})"
    else:
        why = f"{path} is not empty and dense-pt did not write it (it has no dense-pt {MANIFEST})"
    raise already_exists(path, f"{why}: choose another folder, or pass --force to write into it")


def check(path: str | Path, kind: str, force: bool = False, command: str | None = None) -> bool:
    """Whether a ``kind`` may be written (by ``command``, named in the refusal) into folder
    ``path`` (see the module docstring); True when ``path`` exists. Writes nothing."""
    path = Path(path)
    if not os.path.lexists(path):
        return False
    if not path.is_dir():
        raise io_error(errno.ENOTDIR, f"cannot write {path}: it is a file, expected a folder", path)
    if _is_empty(path):
        return True
    found = _writer(path)
    if (path / MANIFEST).exists() and read(path) is None:
        raise already_exists(
            path / MANIFEST,
            f"{path / MANIFEST} is not dense-pt's: dense-pt writes its manifest there; move it away or "
            "choose another folder (--force never overwrites it)",
        )
    if force or (found is not None and found[0] == kind) or (found is None and proven(path, kind)):
        return True
    _refuse(path, command or kind, found)
    return True


def claim(path: str | Path, kind: str, command: str, *, key: Any = None, force: bool = False,
          settings: dict[str, Any] | None = None) -> bool:  # fmt: skip
    """Claim folder ``path`` for a ``kind`` that ``command`` writes (``check``), creating it, and
    give it the kind's manifest (``complete`` false) unless it has one already (an output being
    resumed keeps its own); an old ownership mark is replaced by it. True when ``path`` existed."""
    path = Path(path)
    existed = check(path, kind, force, command)
    if not _main_process():  # torchrun's other ranks check; the main one writes
        path.mkdir(parents=True, exist_ok=True)
        return existed
    data = read(path)
    # a new claim, or one of a finished output written again (it is incomplete until it ends)
    if data is None or data["kind"] != kind or (not body(data) and data["complete"]):
        write(path, header(kind, command, key=key, settings=settings))
    with contextlib.suppress(FileNotFoundError):
        (path / legacy.OLD_MARK).unlink()
    return existed


def _main_process() -> bool:
    """Whether this is the process that writes manifests (torchrun's rank 0, or no torchrun):
    the ranks of one command claim and finish one folder together."""
    return os.environ.get("RANK", "0") == "0"


def finish(path: str | Path, **fields: Any) -> dict[str, Any] | None:
    """Mark ``path``'s manifest complete (with header ``fields``, e.g. ``files``), written last:
    the command that claimed it has finished. An older layout's file (``expansion.json``) is
    replaced by the manifest it was read into."""
    data = read(path) if _main_process() else None
    if data is None or (data["complete"] and not fields):
        return data
    done = write(path, {**{k: data[k] for k in HEADER_KEYS}, **fields, "complete": True}, body(data))
    for name in legacy.OLD_FILES:
        with contextlib.suppress(FileNotFoundError):
            (Path(path) / name).unlink()
    return done


@contextlib.contextmanager
def claimed(path: str | Path, kind: str, command: str, *, key: Any = None, force: bool = False,
            settings: dict[str, Any] | None = None) -> Iterator[Path]:  # fmt: skip
    """``claim`` folder ``path``, run the block, and ``finish`` it; when the block fails before
    writing anything but the manifest, the folder is left as it was (one this call created is
    removed, the manifest taken out of one that was empty): a refused input leaves nothing
    behind."""
    path = Path(path)
    existed = path.is_dir() and _is_empty(path)
    created = not os.path.lexists(path)
    claim(path, kind, command, key=key, force=force, settings=settings)
    try:
        yield path
    except BaseException:
        with contextlib.suppress(OSError):
            if _main_process() and [e.name for e in os.scandir(path)] == [MANIFEST]:
                if created:
                    shutil.rmtree(path)
                elif existed:
                    (path / MANIFEST).unlink()
        raise
    finish(path)


# ---- single files --------------------------------------------------------------------------------
# A single file carries no manifest: an existing one is refused unless the user passes --force.
def check_output_file(path: str | Path, force: bool = False) -> Path:
    """Refuse to replace an existing ``path`` unless ``force``: dense-pt cannot prove it wrote a
    single file (a TREC run, a table, a PNG). Checked before any work."""
    path = Path(path)
    if path.is_dir():
        raise io_error(errno.EISDIR, f"cannot write {path}: it is a folder, expected a file name", path)
    if os.path.lexists(path) and not force:
        raise already_exists(path, f"{path} already exists (use --force to replace it)")
    return path
