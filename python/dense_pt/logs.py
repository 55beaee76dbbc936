"""Status messages of every dense-pt command: stdlib ``logging`` under the ``dense_pt`` logger, to
stderr (stdout carries results only: runs, JSON, tables).

``configure`` is called once by the command line (``dense-pt --verbose/--quiet``, or the level in
``$DENSE_PT_LOG``): a rich handler when stderr is a terminal, plain ``message`` lines otherwise (a
log file, a pipe, nohup). A library user who never configures logging sees warnings only, as
with any library; ``logging.getLogger("dense_pt").setLevel("INFO")`` plus a handler shows the rest.
"""

from __future__ import annotations

import logging
import os
import sys

from dense_pt.errors import InvalidArgumentError

LOGGER = "dense_pt"
LEVEL_ENV = "DENSE_PT_LOG"
LEVELS = ("debug", "info", "warning", "error")

log = logging.getLogger(LOGGER)
_console = None  # the rich Console of the terminal handler, shared with progress bars


def level_from(verbose: bool = False, quiet: bool = False, env: str | None = None) -> int:
    """The level for ``--verbose`` (debug) / ``--quiet`` (warnings only) / ``$DENSE_PT_LOG``
    (a name of LEVELS), in that order; INFO by default."""
    if verbose and quiet:
        raise InvalidArgumentError("--verbose and --quiet exclude each other")
    if verbose:
        return logging.DEBUG
    if quiet:
        return logging.WARNING
    env = os.environ.get(LEVEL_ENV) if env is None else env
    if env is None or not env.strip():
        return logging.INFO
    name = env.strip().lower()
    if name not in LEVELS:
        raise InvalidArgumentError(f"${LEVEL_ENV} must be one of {', '.join(LEVELS)}, got {env!r}")
    return getattr(logging, name.upper())


def stderr_is_terminal() -> bool:
    stream = sys.stderr
    return bool(getattr(stream, "isatty", None) and stream.isatty())


class _StderrHandler(logging.StreamHandler):
    """Plain lines to whatever ``sys.stderr`` is at the time of each record (a test harness or
    a redirect may swap it after ``configure``)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def configure(level: int = logging.INFO) -> None:
    """Send ``dense_pt`` records of ``level`` and above to the current stderr (replacing a
    previous configuration: the CLI may run several times in one process, as in tests)."""
    global _console
    _console = None
    if stderr_is_terminal():
        from rich.console import Console
        from rich.logging import RichHandler

        _console = Console(stderr=True, soft_wrap=True)
        handler: logging.Handler = RichHandler(
            console=_console,
            show_time=False,
            show_path=False,
            show_level=False,
            markup=False,
            rich_tracebacks=False,
        )
    else:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
    log.handlers = [handler]
    log.setLevel(level)
    log.propagate = False


def terminal_console():
    """The rich Console that status lines go to when stderr is a terminal, else None."""
    if _console is not None:
        return _console
    if stderr_is_terminal():
        from rich.console import Console

        return Console(stderr=True, soft_wrap=True)
    return None


def info_enabled() -> bool:
    """Whether status and progress are shown (the command line's default; off with --quiet)."""
    return log.isEnabledFor(logging.INFO)


def status(message: str) -> None:
    """One status line on stderr (``--quiet`` hides it)."""
    log.info(message)
