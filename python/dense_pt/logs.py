"""Status messages of every dense-pt command: stdlib ``logging`` under the ``dense_pt`` logger, to
stderr (stdout carries results only: runs, JSON, tables).

``configure`` is called once by the command line (``dense-pt --verbose/--quiet``, or the level in
``$DENSE_PT_LOG``): a rich handler when stderr is a terminal, plain ``message`` lines otherwise (a
log file, a pipe, nohup). A library user who never configures logging sees warnings only, as
with any library; ``logging.getLogger("dense_pt").setLevel("INFO")`` plus a handler shows the rest.

The libraries dense-pt drives log through the same handler (``LIBRARIES``: transformers' load
reports, sentence-transformers, the Hub): their own stderr handlers are not kept, their lines are
prefixed with the library's name, and their ANSI colour codes dropped when stderr is not a
terminal; their progress bars (tqdm, \\r-redrawn) are off then too.
"""

from __future__ import annotations

import logging
import os
import re
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


LIBRARIES = ("transformers", "sentence_transformers", "huggingface_hub")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class _PlainFormatter(logging.Formatter):
    """``message`` for dense-pt's own records; ``library: message`` for a library's, without the
    ANSI escapes a library puts in for a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if record.name.split(".")[0] != LOGGER:
            text = f"{record.name.split('.')[0]}: {_ANSI.sub('', text)}"
        return text


class _LibraryLogger(logging.Logger):
    """A library's root logger that keeps only dense-pt's handler: the one transformers adds for
    itself when first imported (raw stderr, its own format) is dropped."""

    def addHandler(self, hdlr: logging.Handler) -> None:
        if getattr(hdlr, "dense_pt", False):
            super().addHandler(hdlr)


def _adopt_libraries(handler: logging.Handler, level: int) -> None:
    """Route the libraries' loggers to ``handler`` (before or after they are imported)."""
    handler.dense_pt = True  # type: ignore[attr-defined]
    old = logging.getLoggerClass()
    for name in LIBRARIES:
        existing = logging.Logger.manager.loggerDict.get(name)
        if not isinstance(existing, logging.Logger):  # not created yet: created as ours
            logging.setLoggerClass(_LibraryLogger)
            try:
                lib = logging.getLogger(name)
            finally:
                logging.setLoggerClass(old)
        else:
            lib = existing
        lib.handlers = [handler]
        lib.propagate = False
        lib.setLevel(max(level, logging.WARNING))
    if not stderr_is_terminal():  # tqdm bars redraw with \r: noise in a log file
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        if "transformers" in sys.modules:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()


def configure(level: int = logging.INFO) -> None:
    """Send ``dense_pt`` records of ``level`` and above to the current stderr (replacing a
    previous configuration: the CLI may run several times in one process, as in tests), and the
    libraries' warnings with them (``LIBRARIES``)."""
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
        handler.setFormatter(_PlainFormatter("%(message)s"))
    log.handlers = [handler]
    log.setLevel(level)
    log.propagate = False
    _adopt_libraries(handler, level)


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
