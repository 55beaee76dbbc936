"""`bash scripts/dev.sh demo` with its output going to a file: every setup step says what it
installs or builds before pip (run quietly) takes minutes over it. The venv's python and dense-pt
are stand-ins that record their arguments: the real setup downloads GBs (it runs in CI's
`dev.sh test`); what is tested here is what the script tells a newcomer, in order."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _stub(path: Path, body: str) -> None:
    path.write_text(f"#!/usr/bin/env bash\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_dev_sh_demo_says_what_it_installs_before_each_quiet_step(tmp_path):
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    _stub(bin_dir / "python", 'echo "PIP $*" >&2')
    _stub(bin_dir / "dense-pt", 'echo "DENSE-PT $*" >&2')
    log = tmp_path / "log.txt"
    with open(log, "w") as f:  # not a terminal: as under nohup or `> log 2>&1`
        r = subprocess.run(
            ["bash", str(REPO / "scripts" / "dev.sh"), "demo", "--out", "x"],
            stdout=f, stderr=subprocess.STDOUT, env={**os.environ, "VENV": str(tmp_path / "venv")}, timeout=60,
        )  # fmt: skip
    lines = log.read_text().splitlines()
    assert r.returncode == 0, lines
    pips = [i for i, line in enumerate(lines) if line.startswith("PIP ")]
    assert len(pips) == 3, lines
    for i in pips:  # each quiet pip step follows a line that says what it does
        assert lines[i - 1].startswith("dev.sh: "), lines
    assert "torch" in lines[pips[1] - 1] and "Rust extension" in lines[pips[1] - 1], lines
    assert (
        lines[-2].startswith("dev.sh: running: dense-pt demo --out x")
        and lines[-1] == "DENSE-PT demo --out x"
    )


def test_mypy_checks_the_package_the_tests_and_the_benchmarks():
    """`dev.sh test` runs plain `mypy`, so pyproject.toml's [tool.mypy] decides what is checked: the
    package, the tests and the benchmarks, the bodies of unannotated functions included, no module
    exempted (issue 25 item 6). Dropping a folder or a flag fails here instead of going unseen."""
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert sorted(cfg["files"]) == ["benches", "python/dense_pt", "tests"]
    assert cfg["check_untyped_defs"] is True and cfg["warn_unused_ignores"] is True
    assert not [o for o in cfg.get("overrides", []) if o.get("ignore_errors")]
    script = (REPO / "scripts" / "dev.sh").read_text(encoding="utf-8")
    assert re.search(r'^\s*"\$VENV/bin/mypy"$', script, re.M), "mypy with paths would not read files ="
