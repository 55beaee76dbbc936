"""The `dense-pt` command line: a thin Typer layer over the library.

Each command group lives in its own module and registers itself on ``app``; commands parse and
validate, then call a library function that is tested without the CLI. Heavy imports (torch,
transformers) happen inside the commands, so ``dense-pt --help`` stays fast.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

import typer

from dense_pt import __version__
from dense_pt.errors import DensePtError, InvalidArgumentError, is_out_of_memory, refused_pickle

# Only typer's public API: no typer or click internal is patched (a test keeps it so). Flags show no
# type through their metavar (``options.flag``); choices are Enums (``options.choice_type``).
app = typer.Typer(
    name="dense-pt",
    help="Pre-train and fine-tune dense passage retrievers.",
    epilog="Results (runs, JSON, tables) go to stdout; status, progress and errors to stderr "
    "($DENSE_PT_LOG: debug, info, warning, error). Exit codes: 0 done, 1 an error in the data or "
    "the system, 2 a usage error, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM).",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion: commands, options, choices
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",  # what every typer version then does; the texts are escaped (plain_help)
)

# The command names: `dense-pt [GROUP] VERB`. A top-level command is one step of the pipeline,
# named by what it does (`pretrain`, `encode`, `search`, `fuse`, `score`, `evaluate`; `bm25` by its
# method, `beir` by its benchmark: corpus build, encode, search and evaluate on BEIR folders); a
# group is named for the thing its commands act on (`corpus`, `pmi`, `mask`, `negatives`,
# `pipeline`, `study`, `hub`) and its commands are verbs (`build`, `inspect`, `mine`, `export`,
# `run`), hyphenated with their object when it is not the group's (`corpus
# train-tokenizer`); `train` groups the training stages by what they train. An old name stays a
# hidden alias (ALIASES): it works as before and is not listed or completed.
ALIASES: dict[str, tuple[str, ...]] = {}  # old top-level name -> the command's path now


def alias(group: typer.Typer, old: str, fn: Callable[..., Any], now: tuple[str, ...]) -> None:
    """Keep ``old`` (a name the command had) working on ``group``: the same command, hidden from
    ``--help`` and from completion, its help ending with its name now."""
    ALIASES[old] = now
    group.command(old, hidden=True, epilog=f"The old name of `dense-pt {' '.join(now)}`, kept working.")(fn)


# Command-group modules, in pipeline order. Only groups that work are listed here.
GROUPS = [
    "dense_pt.cli.corpus",
    "dense_pt.cli.pmi",
    "dense_pt.cli.mask",
    "dense_pt.cli.expand",
    "dense_pt.cli.pretrain",
    "dense_pt.cli.retrieval",
    "dense_pt.cli.fusion",
    "dense_pt.cli.runs",
    "dense_pt.cli.finetune",
    "dense_pt.cli.hub",
    "dense_pt.cli.evaluate",
    "dense_pt.cli.beir",
    "dense_pt.cli.pipeline",
    "dense_pt.cli.study",
    "dense_pt.cli.demo",
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dense-pt {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit.", metavar=""
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug messages too.", metavar=""),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="Warnings and errors only: no status lines, no progress.", metavar=""
    ),
) -> None:
    """dense-pt: bottleneck pre-training (SimLM, CDMAE, SEED) and multi-stage fine-tuning."""
    from dense_pt import logs

    logs.configure(logs.level_from(verbose, quiet))


for _module in GROUPS:
    importlib.import_module(_module)


def plain_help(group: typer.Typer, seen: set[int] | None = None) -> None:
    """Every help text of ``group`` (its own, its commands', their options', its subgroups') is
    plain text: typer renders help as rich markup, which silently drops what looks like a tag
    (``[mine]``, a TOML table); rich's ``escape`` keeps it. Each text object is escaped once."""
    from rich.markup import escape

    seen = set() if seen is None else seen
    infos: list[Any] = [group.info, *group.registered_commands, *group.registered_groups]
    for info in infos:
        if id(info) in seen:
            continue
        seen.add(id(info))
        callback = getattr(info, "callback", None)
        callback = callback if callable(callback) else None  # typer's DefaultPlaceholder: none given
        help_text = info.help if isinstance(info.help, str) else None
        if help_text is None and callback is not None and callback.__doc__:
            help_text = inspect.getdoc(callback)
        if help_text is not None:
            info.help = escape(help_text)
        if isinstance(getattr(info, "epilog", None), str):
            info.epilog = escape(info.epilog)
        for param in inspect.signature(callback).parameters.values() if callback is not None else ():
            given = param.default
            if isinstance(given, typer.models.ParameterInfo) and given.help and id(given) not in seen:
                seen.add(id(given))
                given.help = escape(given.help)
        sub = getattr(info, "typer_instance", None)
        if isinstance(sub, typer.Typer):
            plain_help(sub, seen)


plain_help(app)

# Commands that pick up where they stopped when run again with the same arguments (the hint
# printed on Ctrl-C); pretrain needs --resume.
RESUMABLE = {
    ("encode",): "re-run the same command to resume",
    ("expand",): "re-run the same command to resume",
    ("pipeline", "run"): "re-run the same command to resume",
    ("study", "run"): "re-run the same command to resume",
    ("demo",): "re-run the same command to resume",
    ("train", "retriever"): "re-run the same command to resume",
    ("train", "reranker"): "re-run the same command to resume",
    ("train", "distill"): "re-run the same command to resume",
    ("pretrain",): "re-run the same command with --resume to continue",
}
DEBUG_ENV = "DENSE_PT_DEBUG"


def command_path(argv: list[str]) -> tuple[str, ...]:
    """The (sub)command names at the start of ``argv`` (options before them skipped)."""
    node = typer.main.get_command(app)
    path: list[str] = []
    for word in argv:
        if word.startswith("-"):
            continue
        commands = getattr(node, "commands", None)  # a group
        if not commands or word not in commands:
            break
        node = commands[word]
        path.append(word)
    return tuple(path)


ROOT_FLAGS = ("-q", "--quiet", "-v", "--verbose")


def hoist_root_flags(argv: list[str]) -> list[str]:
    """``dense-pt encode ... -q`` read as ``dense-pt -q encode ...``: the root's ``-q`` / ``-v`` may
    come anywhere before ``--``, unless the command has an option of that name itself
    (``pipeline run --quiet``: its progress bars). Values of the command's options are skipped."""
    if not any(a in ROOT_FLAGS for a in argv[1:]):
        return argv
    node = typer.main.get_command(app)
    for name in command_path(argv):
        node = node.commands[name]  # type: ignore[attr-defined]
    own = {o for p in getattr(node, "params", []) for o in (*p.opts, *p.secondary_opts)}
    takes_value = {o for p in getattr(node, "params", []) if not getattr(p, "is_flag", True) and p.nargs != 0
                   for o in p.opts}  # fmt: skip
    hoisted: list[str] = []
    rest: list[str] = []
    words = iter(argv)
    for word in words:
        if word == "--":
            rest += [word, *words]
            break
        if word in ROOT_FLAGS and word not in own:
            hoisted.append(word)
            continue
        rest.append(word)
        if word in takes_value:  # its value, even if it looks like -q
            value = next(words, None)
            if value is not None:
                rest.append(value)
    return hoisted + rest


# click's usage errors, from typer's own copy of click (typer >= 0.26 vendors it) and from click.
USAGE_ERRORS: tuple[type[Exception], ...] = tuple(
    {c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"}
)


def _fail(message: str, code: int) -> None:
    typer.secho(message, fg=typer.colors.RED, err=True)
    sys.exit(code)


class Terminated(KeyboardInterrupt):
    """SIGTERM (what `kill`, Slurm and other schedulers send), raised where the program is, like
    Ctrl-C: every ``finally`` and cleanup runs (temporaries removed), then one line and exit 143."""


_terminated: list[bool] = []  # set by the handler: typer turns the exception into Exit(130)


def _on_sigterm(signum: int, frame: object) -> None:
    _terminated.append(True)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM during the cleanup ends it at once
    raise Terminated()


def _interrupted(exc: BaseException | None = None) -> None:
    hint = RESUMABLE.get(command_path(sys.argv[1:]))
    terminated = bool(_terminated) or isinstance(exc, Terminated)
    what, code = ("terminated (SIGTERM)", 143) if terminated else ("interrupted", 130)
    _fail(what + (f"; {hint}" if hint else ""), code)


def exit_code(exc: BaseException) -> int:
    """2 for a usage error (a value the caller gave is unusable), 1 for anything else."""
    return 2 if isinstance(exc, InvalidArgumentError) else 1


def _not_utf8_argument() -> str | None:
    """The first command-line argument that is not UTF-8 (a latin-1 file name), as its bytes."""
    for arg in sys.argv[1:]:
        if any(0xDC80 <= ord(c) <= 0xDCFF for c in arg):  # how Python keeps undecodable bytes
            return os.fsencode(arg).decode("utf-8", errors="backslashreplace")
    return None


# How a thread start that failed reads: rayon's pool (ThreadPoolBuildError, and the Rust core's
# "cannot start N threads: ..."), EAGAIN from pthread_create, Python's threading, Arrow's workers.
_THREAD_FAILURES = ("ThreadPoolBuildError", "Resource temporarily unavailable", "can't start new thread",
                    "Failed to launch worker thread")  # fmt: skip


def resource_message(exc: BaseException) -> str | None:
    """One line for a failure of the machine's resources rather than of dense-pt: out of memory
    (Python's, Arrow's, torch's, CUDA's), threads that could not start (a Rust library's thread
    pool, Arrow's workers) under a memory or process limit (``ulimit -v`` / ``-u``), a file name
    that is not UTF-8. None for anything else."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if is_out_of_memory(exc):
        return (
            f"out of memory ({text}): the process reached the memory it may use (the machine's, "
            "`ulimit -v`, or the job's limit); raise the limit, or lower the batch size or --threads"
        )
    if any(t in text for t in _THREAD_FAILURES) or re.search(r"cannot start \d+ threads", text):
        return (
            f"could not start worker threads ({text}): a memory or process limit (`ulimit -v` / "
            "`ulimit -u`) leaves no room for them; raise it, or use fewer threads ($RAYON_NUM_THREADS, "
            "--threads)"
        )
    if isinstance(exc, UnicodeEncodeError) and "surrogates not allowed" in text:
        arg = _not_utf8_argument()
        if arg is not None:
            return (
                f"{arg}: the file name is not UTF-8 text: dense-pt records paths in its manifests "
                "and hands them to libraries as UTF-8; rename the file (or folder)"
            )
    return None


def main() -> None:
    """Entry point. Exit codes: 0 done; 2 usage (unknown option, a value out of range:
    InvalidArgumentError); 1 an error in the data or the system (any other DensePtError, an
    OSError, out of memory), one line naming the file, line or option; 130 on Ctrl-C and 143 on
    SIGTERM, with one line, after the command's cleanup; any other exception (a panic in a
    library included) is a bug: one line, and the traceback only with $DENSE_PT_DEBUG set."""
    _terminated.clear()
    previous = signal.getsignal(signal.SIGTERM)
    if previous in (signal.SIG_DFL, _on_sigterm) and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _run()
    finally:
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:
            signal.signal(signal.SIGTERM, previous)


def _run() -> None:
    try:
        sys.argv[1:] = hoist_root_flags(sys.argv[1:])
        rv = app(standalone_mode=False)
    except USAGE_ERRORS as exc:  # usage: unknown option, invalid value, missing argument
        exc.show()  # type: ignore[attr-defined]
        sys.exit(exc.exit_code)  # type: ignore[attr-defined]
    except (typer.Abort, KeyboardInterrupt) as exc:
        _interrupted(exc)
    except BrokenPipeError as exc:
        if not stdout_closed():
            _known(exc)
        _end_quietly()
    except SystemExit as exc:
        # typer and rich answer a closed stdout themselves, with exit 1 (rich after pointing stdout
        # at /dev/null): the same quiet end as ours.
        if isinstance(exc.__context__, BrokenPipeError):
            _end_quietly()
        raise
    except (DensePtError, OSError) as exc:
        _known(exc)
    except BaseException as exc:  # a bug, a panic in a library, or the machine's limits
        if isinstance(exc, SystemExit | GeneratorExit):
            raise
        _unexpected(exc)
    if rv == 130:  # typer turns Ctrl-C inside a command into Exit(130)
        _interrupted()
    try:
        sys.stdout.flush()  # what is still buffered, now: at the interpreter's exit it would be noise
    except BrokenPipeError:
        _end_quietly()
    sys.exit(rv if isinstance(rv, int) else 0)


def stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (``dense-pt ... | head -1`` after head's
    line): polling the write end of such a pipe reports an error (Linux, macOS)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no poll (Windows), or stdout is not a file
        return False


def _end_quietly() -> None:
    """The reader of stdout went away: end as ``ls | head`` does, without a word and with exit 0
    (the reader has what it wanted). stdout is pointed at /dev/null first, so that flushing what is
    still buffered at exit raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    sys.exit(0)


def _known(exc: DensePtError | OSError) -> None:
    """One line for an error dense-pt raised on purpose or an ``OSError``; the machine's limits
    (memory, threads) first: an ``OSError`` of a failed memory map is out of memory, not a file."""
    from dense_pt.errors import from_os_error

    # transformers 4 wraps torch.load's refusal in an OSError (ours say what they mean already)
    refused = None if isinstance(exc, DensePtError) else refused_pickle(exc)
    if refused is not None:
        _fail(f"error: {refused}", 1)
    resource = resource_message(exc)
    if resource is not None:
        _fail(f"error: {resource}", 1)
    if isinstance(exc, DensePtError):
        _fail(f"error: {exc}", exit_code(exc))
    else:
        _fail(f"error: {from_os_error(exc)}", 1)


def _unexpected(exc: BaseException) -> None:
    """One line for an exception nobody planned for: the machine's limits (exit 1), else a bug,
    a Rust panic raised inside a library (pyo3's PanicException is a BaseException) included."""
    if os.environ.get(DEBUG_ENV):
        traceback.print_exception(exc)
    refused = refused_pickle(exc)  # torch.load's refusal (transformers loading a .bin, say)
    if refused is not None:
        _fail(f"error: {refused}", 1)
    resource = resource_message(exc)
    if resource is not None:
        _fail(f"error: {resource}", 1)
    detail = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    if type(exc).__name__ == "PanicException":
        module = type(exc).__module__
        detail = f"a library panicked ({module}): {str(exc).splitlines()[0] if str(exc) else 'no message'}"
    _fail(f"internal error: {detail} (set {DEBUG_ENV}=1 for the traceback)", 1)
