"""The one exception hierarchy of dense-pt, shared by the Rust core (mapped in ``rust/py``) and the
Python code. Catch ``DensePtError`` for everything; the subclasses also derive from the builtin a
caller would naturally catch (ValueError, OSError, ImportError), and a missing, forbidden or
misplaced path is both a ``DensePtIOError`` and the matching builtin (``NotFoundError`` is a
``FileNotFoundError``, ``PermissionDeniedError`` a ``PermissionError``, ...), whether the Rust core
or Python raised it (polars does the same).

The command line maps them to exit codes (``dense_pt/cli/__init__.py``): ``InvalidArgumentError``
(a value the caller gave is unusable) exits 2 like a usage error, every other error 1."""

from __future__ import annotations

import errno as _errno
import re
from pathlib import Path


class DensePtError(Exception):
    """Base class of every error dense-pt raises on purpose."""


class InvalidArgumentError(DensePtError, ValueError):
    """A value passed by the caller is unusable (shape mismatch, probability outside [0, 1], ...)."""


class FormatError(DensePtError, ValueError):
    """A file's content is not what its format requires. Carries the path and, when known, the
    1-based line number, and renders them as ``path:line: message``."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.path = None if path is None else str(path)
        self.line = line
        self.message = message
        where = ""
        if self.path is not None:
            where = self.path + (f":{line}" if line is not None else "") + ": "
        super().__init__(where + message)


class DataWarning(UserWarning):
    """Input was accepted but looks suspicious (a byte-order mark, judgements for unknown ids)."""


class MismatchError(DensePtError, ValueError):
    """An artifact was built for something else (another tokenizer, another corpus)."""


class DensePtIOError(DensePtError, OSError):
    """An operating-system level failure reading or writing a file. Built as
    ``DensePtIOError(errno, message, path)`` it prints just ``message`` (which names the path),
    one line, instead of OSError's ``[Errno N] message: 'path'``; ``.errno`` and ``.filename`` stay."""

    def __str__(self) -> str:
        if self.strerror:
            return str(self.strerror)
        return super().__str__()


class NotFoundError(DensePtIOError, FileNotFoundError):
    """A path that must exist does not (a missing input file, model or store folder)."""


class PermissionDeniedError(DensePtIOError, PermissionError):
    """The operating system refused to read or write a path."""


class IsDirectoryError(DensePtIOError, IsADirectoryError):
    """A file was expected and the path is a folder."""


class NotDirectoryError(DensePtIOError, NotADirectoryError):
    """A folder was expected (or a path runs through a file)."""


class AlreadyExistsError(DensePtIOError, FileExistsError):
    """An output exists and the command was not told to replace it (``--force``)."""


# errno -> the class for it; any other errno stays a plain DensePtIOError.
_IO_CLASSES: dict[int, type[DensePtIOError]] = {
    _errno.ENOENT: NotFoundError,
    _errno.EACCES: PermissionDeniedError,
    _errno.EPERM: PermissionDeniedError,
    _errno.EISDIR: IsDirectoryError,
    _errno.ENOTDIR: NotDirectoryError,
    _errno.EEXIST: AlreadyExistsError,
}


def io_error(code: int | None, message: str, path: str | Path | None = None) -> DensePtIOError:
    """The ``DensePtIOError`` subclass for errno ``code``, printing ``message`` (which names the
    path) once: ``io_error(errno.ENOENT, f"{p}: no such file", p)`` is a ``FileNotFoundError``."""
    cls = _IO_CLASSES.get(code or 0, DensePtIOError)
    return cls(code or 0, message, None if path is None else str(path))


def from_os_error(exc: OSError, path: str | Path | None = None) -> DensePtIOError:
    """A builtin ``OSError`` as the matching dense-pt class, one line: ``path: reason``."""
    if isinstance(exc, DensePtIOError):
        return exc
    if exc.errno is None:
        return DensePtIOError(str(exc))
    where = path if path is not None else exc.filename
    reason = exc.strerror or str(exc)
    message = f"{where}: {reason}" if where is not None else reason
    return io_error(exc.errno, message, where)


def not_found(path: str | Path, what: str = "no such file or folder") -> NotFoundError:
    """``path: what`` as a NotFoundError (a FileNotFoundError)."""
    err = io_error(_errno.ENOENT, f"{path}: {what}", path)
    assert isinstance(err, NotFoundError)
    return err


def already_exists(path: str | Path, message: str) -> AlreadyExistsError:
    """An output that exists and was not to be replaced (a FileExistsError)."""
    err = io_error(_errno.EEXIST, message, path)
    assert isinstance(err, AlreadyExistsError)
    return err


# How libraries word a failed allocation or memory map when they raise no MemoryError: the C
# library's strerror(ENOMEM) (pyarrow's "Memory mapping file failed: Cannot allocate memory", Rust's
# io errors, "(os error 12)"), torch's CPU allocator, and the dynamic loader mapping a library
# (``import torch`` under ``ulimit -v``: "libtorch_cpu.so: failed to map segment from shared object").
_OUT_OF_MEMORY_TEXT = ("cannot allocate memory", "can't allocate memory", "os error 12)", "std::bad_alloc",
                       "failed to map segment from shared object")  # fmt: skip


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says the process could not get memory (an allocation, a memory map, a
    library's load), whichever library raised it, rather than that a file or a value is bad.
    Readers ask this before calling a file damaged; the command line prints the one "out of
    memory" line for it."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    if isinstance(exc, OSError) and exc.errno == _errno.ENOMEM:
        return True
    text = str(exc).lower()
    if "operation not permitted" in text:  # a library on a noexec mount, not memory
        return False
    return any(t in text for t in _OUT_OF_MEMORY_TEXT)


def refused_pickle(exc: BaseException, path: str | Path | None = None) -> str | None:
    """One line for a pickle that ``torch.load(weights_only=True)`` refused (a model's or a
    checkpoint's ``.bin`` / ``.pt`` asking for a global that no file of weights needs, such as a
    class of ``os``), naming the file (``path``, else the one torch was loading) and the global;
    None for any other exception."""
    import pickle

    # transformers before 5 wraps torch's refusal in an OSError ("Unable to load weights ..."),
    # raised while handling it: the refusal is then down the exception's chain
    seen: set[int] = set()
    while not isinstance(exc, pickle.UnpicklingError) and id(exc) not in seen:
        seen.add(id(exc))
        nxt = exc.__cause__ or exc.__context__
        if nxt is None:
            return None
        exc = nxt
    if not isinstance(exc, pickle.UnpicklingError) or "weights only load failed" not in str(exc).lower():
        return None
    found = re.search(r"GLOBAL ([\w.]+)", str(exc))
    what = f"it asks for {found.group(1)}" if found else "it asks for more than tensors"
    where = path if path is not None else _file_torch_was_loading(exc)
    return (
        f"{where or 'a model or checkpoint file'}: refused to load: {what}, which a file of weights "
        "never needs (dense-pt loads pickles with torch.load(weights_only=True), so that a model or "
        "checkpoint cannot run code); use a safetensors file, or one from a source you trust"
    )


def _file_torch_was_loading(exc: BaseException) -> str | None:
    """The file argument of the ``torch.load`` call that raised ``exc`` (from its frame)."""
    tb = exc.__traceback__
    found = None
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "load" and frame.f_code.co_filename.endswith("serialization.py"):
            f = frame.f_locals.get("f")
            if isinstance(f, str | Path):
                found = str(f)
        tb = tb.tb_next
    return found


class DivergedError(DensePtError, FloatingPointError):
    """Training produced a loss (or weights) that is not a finite number: the run stops before
    saving anything non-finite, naming the step, the loss and the setting to change."""


class InternalError(DensePtError, RuntimeError):
    """A bug in dense-pt (for instance a panic in the Rust core): the message says so and what
    failed; it is never the user's fault, and the process stays usable."""


class MissingExtraError(DensePtError, ImportError):
    """A feature needs an optional dependency group that is not installed."""

    def __init__(self, module: str, extra: str = "train"):
        self.extra = extra
        super().__init__(
            f"this command needs the '{module}' package from the '{extra}' extra: "
            f"pip install 'dense-pt[{extra}]'"
        )


__all__ = [
    "AlreadyExistsError",
    "DataWarning",
    "DensePtError",
    "DensePtIOError",
    "DivergedError",
    "FormatError",
    "InternalError",
    "InvalidArgumentError",
    "IsDirectoryError",
    "MismatchError",
    "MissingExtraError",
    "NotDirectoryError",
    "NotFoundError",
    "PermissionDeniedError",
    "already_exists",
    "from_os_error",
    "io_error",
    "is_out_of_memory",
    "not_found",
    "refused_pickle",
]
