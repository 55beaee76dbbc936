"""The pipeline end to end on the demo corpus: a SIGKILLed run resumes (finished stages skipped,
the interrupted training continues from its checkpoint), a changed setting redoes only the
stages downstream of it, and the report is written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dense_pt.pipeline import dev_split


def test_dev_split_is_fixed_and_disjoint():
    ids = [str(i) for i in range(50)]
    tr, dev = dev_split(ids, 0.1, 13)
    assert len(dev) == 5 and not set(tr) & set(dev) and sorted(tr + dev) == sorted(ids)
    assert dev_split(list(reversed(ids)), 0.1, 13) == (tr, dev)


@pytest.mark.slow
def test_killed_pipeline_resumes(tmp_path: Path):
    out = tmp_path / "demo"
    code = f"from dense_pt.pipeline import demo_stage; demo_stage({str(out)!r}, steps=8)"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    ckpts = out / "pipeline" / "r1" / "train" / "checkpoints"
    deadline = time.time() + 900  # generous: shared CI machines can be slow
    seen = False
    try:
        while time.time() < deadline and proc.poll() is None and not seen:
            seen = ckpts.exists() and any(p.name.startswith("checkpoint-") for p in ckpts.iterdir())
            time.sleep(0.05)
        assert seen and proc.poll() is None, "no R1 checkpoint appeared while the pipeline ran"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    r1 = json.loads((out / "pipeline" / "r1" / "manifest.json").read_text())
    assert r1["status"] == "running"

    from dense_pt.pipeline import demo_stage

    lines: list[str] = []
    res = demo_stage(out, steps=8, log=lines.append)
    assert "[bm25] up to date, skipped" in lines and "[r1] resuming an interrupted run" in lines
    train = json.loads((out / "pipeline" / "r1" / "train" / "manifest.json").read_text())
    assert train["resumed_from"] > 0 and train["steps"] == 8
    assert all(res[s]["status"] == "done" for s in ("r1", "mine", "r2", "reranker", "score", "distill"))
    report = (out / "pipeline" / "report" / "report.md").read_text()
    assert "distilled retriever" in report and (out / "pipeline" / "report" / "stages.png").stat().st_size > 0
    assert res["bm25"]["metrics"]["nDCG@10"] > 0.2

    # everything is up to date now
    lines.clear()
    demo_stage(out, steps=8, log=lines.append)
    assert not any("running" in x for x in lines)
