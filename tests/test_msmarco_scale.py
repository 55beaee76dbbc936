"""benches/bench_msmarco_scale.py at ``--scale 0.01`` (88k passages, 5k training queries): every
stage runs in its own process and finishes, the table names each target beside its measure, and
the JSON holds every stage's time and peak RSS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benches" / "bench_msmarco_scale.py"


@pytest.mark.slow
def test_scale_001_runs_every_stage(shared_data: Path, tmp_path: Path) -> None:
    env = {**os.environ, "DENSE_PT_SHARED": str(shared_data)}
    r = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--scale",
            "0.01",
            "--out",
            str(tmp_path),
            "--threads",
            "1",
            "--batches",
            "3",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    assert r.returncode == 0, (
        r.stdout[-3000:] + r.stderr[-3000:] + (tmp_path / "stages.log").read_text()[-3000:]
    )
    out = json.loads((tmp_path / "bench.json").read_text())
    stages = {s["stage"]: s for s in out["stages"]}
    assert list(stages) == [
        "corpus build", "pmi build", "pmi score", "bm25 train", "bm25 dev", "mine-negatives",
        "negatives read", "collate finetune", "collate pretrain", "evaluate",
    ]  # fmt: skip
    assert all(s["ok"] and s["seconds"] > 0 and 0 < s["peak_rss"] < 12 << 30 for s in stages.values())
    assert stages["negatives read"]["extra"]["queries"] > 4000  # the training queries with a positive
    assert (
        stages["bm25 train"]["extra"]["queries"] > 4000 and stages["bm25 dev"]["extra"]["queries_per_s"] > 0
    )
    assert stages["evaluate"]["extra"]["RR@10"] > 0.3  # BM25 finds the synthetic queries' passages
    for name in ("collate finetune", "collate pretrain"):
        assert stages[name]["extra"]["seq_per_s"] > 0
    table = r.stdout
    for line in ("<= 12 GB RSS", "<= 12 s (20 min x 0.01)", ">= 20,000 seq/s", "(3 h x 0.01)"):
        assert line in table, table
