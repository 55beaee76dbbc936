"""Running ``dense-pt`` as a user does, for the tests of what a terminal shows: in-process through
the console entry point (``dense_pt.cli.main``), or in a fresh interpreter."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

from typer.core import TyperCommand, TyperGroup

CHILD = "import sys; from dense_pt.cli import main; sys.argv[0] = 'dense-pt'; main()"


def run_cli(argv: list[str], capsys, monkeypatch, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``dense-pt ARGV`` in-process: (exit code, stdout, stderr). An exception escaping the entry
    point would be a traceback for the user: the test fails."""
    from dense_pt.cli import main

    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(sys, "argv", ["dense-pt", *argv])
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps long lines at the terminal width
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out = capsys.readouterr()
    return code, out.out, out.err


def subcommand(cmd: object, *path: str) -> TyperCommand | TyperGroup:
    """The command at ``path`` under ``cmd`` (``typer.main.get_command(app)``: the root group).
    Typed through typer's classes: typer >= 0.26 builds them on its own copy of click."""
    for name in path:
        assert isinstance(cmd, TyperGroup), f"{cmd!r} has no subcommands"
        cmd = cmd.commands[name]
    assert isinstance(cmd, TyperCommand | TyperGroup), cmd
    return cmd


def subgroup(cmd: object, *path: str) -> TyperGroup:
    """The group at ``path`` under ``cmd`` (``cmd`` itself for no path)."""
    group = subcommand(cmd, *path)
    assert isinstance(group, TyperGroup), f"{group.name!r} has no subcommands"
    return group


def cli_child(argv: list[str], env: dict[str, str] | None = None, **kwargs) -> subprocess.Popen:
    """``dense-pt ARGV`` in a fresh interpreter, stdout and stderr pipes (not a terminal), with
    SIGINT at its default as at a terminal: a test run started in the background (``cmd &``) has
    SIGINT ignored, which a child inherits and Python then leaves ignored (no KeyboardInterrupt)."""
    full = {**os.environ, "OMP_NUM_THREADS": "1", "DENSE_PT_CACHE_DIR": "", "COLUMNS": "250", **(env or {})}
    full.pop("DENSE_PT_LOG", None)
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full,
        preexec_fn=_default_sigint,
        **kwargs,
    )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def one_line(argv: list[str], capsys, monkeypatch) -> tuple[int, str]:
    """Run ``dense-pt -q ARGV`` in-process (no log or debug variables) and return its exit code and
    its one line on stderr: an error is one line, never a traceback."""
    monkeypatch.delenv("DENSE_PT_LOG", raising=False)
    monkeypatch.delenv("DENSE_PT_DEBUG", raising=False)
    code, _, err = run_cli(["-q", *argv], capsys, monkeypatch)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return code, lines[0]


def leaf_commands(hidden: bool = False) -> dict[tuple[str, ...], Any]:
    """Every leaf command of ``dense-pt``'s tree by its path (the hidden aliases too with ``hidden``)."""
    import typer

    from dense_pt.cli import app

    found: dict[tuple[str, ...], Any] = {}

    def walk(cmd: Any, path: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs is None:
            found[path] = cmd
        for name, sub in (subs or {}).items():
            if hidden or not sub.hidden:
                walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found
