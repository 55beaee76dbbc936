"""A failed write, said in one line naming the user's path: an ``OSError`` while writing (a full
disk, a quota, a file size limit, a read-only or forbidden folder) becomes a ``DensePtIOError``
naming the target, never the hidden temporary ``dense_pt.fsutil`` wrote under."""

from __future__ import annotations

import contextlib
import errno as _errno
import os
import re
from collections.abc import Iterator
from pathlib import Path

from dense_pt.errors import DensePtIOError, io_error

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
