"""Messages of the Rust core (`log::warn!`, `log::info!`) reach Python `logging` under the
`dense_pt` logger (pyo3-log), so `--quiet`, `$DENSE_PT_LOG` and caplog see them like any other."""

from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np

from dense_pt import fsutil
from dense_pt.pmi import build_arrays

RUST = "dense_pt.dense_pt_core"


def flatten(passages):
    values = np.array([t for p in passages for t in p], dtype=np.uint32)
    offsets = np.zeros(len(passages) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in passages], out=offsets[1:])
    return values, offsets


def spilling_build(tmp_path):
    # three token ids over long passages with no memory budget: every pass of order >= 2 spills
    rng = np.random.default_rng(0)
    values, offsets = flatten([list(rng.integers(0, 3, size=60)) for _ in range(30)])
    return build_arrays(values, offsets, tmp_path / "t.pmi", vocab_size=3, memory_bytes=0, threads=1)


def test_a_rust_warning_arrives_through_python_logging(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="dense_pt")
    stats = spilling_build(tmp_path)
    assert stats["spilled_runs"] > 0
    spills = [r for r in caplog.records if r.name.startswith(RUST) and "spilled to" in r.getMessage()]
    assert spills, [(r.name, r.getMessage()) for r in caplog.records]
    rec = spills[0]
    assert rec.levelno == logging.WARNING
    assert rec.name == f"{RUST}.pmi.count"
    assert str(tmp_path) in rec.getMessage() and "memory budget" in rec.getMessage()


def test_levels_set_after_import_are_honoured(tmp_path, caplog):
    # no caching of levels on the Rust side: a logger raised to ERROR drops the warning
    caplog.set_level(logging.ERROR, logger="dense_pt")
    spilling_build(tmp_path)
    assert not [r for r in caplog.records if r.name.startswith(RUST)]


def test_rust_info_on_removing_a_stale_temporary(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="dense_pt")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = fsutil._host()
    stale = tmp_path / f".pmi-run.{dead.pid}-{host}.00cc.tmp"
    stale.write_bytes(b"x")
    spilling_build(tmp_path)  # the spill folder is cleaned of dead processes' runs first
    assert not stale.exists()
    infos = [r for r in caplog.records if r.name == f"{RUST}.atomic" and r.levelno == logging.INFO]
    assert any(str(stale) in r.getMessage() and f"process {dead.pid}" in r.getMessage() for r in infos)
