"""Replacing a folder whole: it is built under a temporary name and renamed into place, and an
existing folder is replaced only when everything in it is dense-pt's (a user's file is refused, named,
never lost: ``--force`` replaces what dense-pt wrote)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Collection, Iterator
from pathlib import Path

from dense_pt.artifacts import legacy
from dense_pt.errors import already_exists
from dense_pt.fsutil import is_temporary, mkdir_parent, remove_tree, temp_path
from dense_pt.write_errors import writing


def foreign_entries(folder: Path, owned: Collection[str] = (), new: Path | None = None) -> list[Path]:
    """What in ``folder`` dense-pt cannot prove it wrote, so that replacing the folder would lose it:
    every entry but an old ownership mark, its temporaries, the names in ``owned`` and (to be replaced by
    files of the same names) the names ``new`` holds; inside a folder that ``new`` holds too, the
    same, recursively."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found: list[Path] = []
    for e in entries:
        if e.name == legacy.OLD_MARK or is_temporary(e.name) or e.name in owned:
            continue
        twin = None if new is None else new / e.name
        if twin is None or not os.path.lexists(twin):
            found.append(Path(e.path))
        elif e.is_dir(follow_symlinks=False):
            inner = twin if twin.is_dir() and not twin.is_symlink() else None
            found += foreign_entries(Path(e.path), (), inner) if inner else [Path(e.path)]
    return found


def first_of(found: list[Path]) -> str:
    """The first of the entries found, and how many more: what a refusal names."""
    return f"{found[0]} (and {len(found) - 1} more)" if len(found) > 1 else str(found[0])


def check_replaceable(path: Path, owned: Collection[str] = (), new: Path | None = None) -> None:
    """Refuse to replace folder ``path`` when it holds anything dense-pt did not write (see
    ``foreign_entries``), naming the first such entry: ``--force`` replaces dense-pt's files, never
    a user's."""
    if not path.is_dir():
        return
    found = foreign_entries(path, owned, new)
    if found:
        raise already_exists(
            found[0],
            f"cannot replace {path}: it holds {first_of(found)}, which dense-pt did not write; move "
            "it away or choose another folder (--force replaces only what dense-pt wrote)",
        )


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
    mkdir_parent(path)
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
