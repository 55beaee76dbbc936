"""Running ``dense-pt`` as a user does, for the tests of what a terminal shows: in-process through
the console entry point (``dense_pt.cli.main``), or in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

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


def cli_child(argv: list[str], env: dict[str, str] | None = None, **kwargs) -> subprocess.Popen:
    """``dense-pt ARGV`` in a fresh interpreter, stdout and stderr pipes (not a terminal)."""
    full = {**os.environ, "OMP_NUM_THREADS": "1", "DENSE_PT_CACHE_DIR": "", "COLUMNS": "250", **(env or {})}
    full.pop("DENSE_PT_LOG", None)
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full,
        **kwargs,
    )
