"""The one exception hierarchy of dense-pt, shared by the Rust core (mapped in ``rust/py``) and the
Python code. Catch ``DensePtError`` for everything; the subclasses also derive from the builtin a
caller would naturally catch (ValueError, OSError, ImportError)."""

from __future__ import annotations

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
        if self.strerror and self.filename is not None:
            return str(self.strerror)
        return super().__str__()


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
    "DataWarning",
    "DensePtError",
    "DensePtIOError",
    "FormatError",
    "InternalError",
    "InvalidArgumentError",
    "MismatchError",
    "MissingExtraError",
]
