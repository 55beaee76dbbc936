"""The device check (``benches/gpu_check.py``) cannot rot: its ``--smoke`` mode runs the same code
on a tiny model on the CPU, every item, and must succeed and report every figure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ITEMS = {"mlm", "cdmae", "simlm (joint generator)", "simlm (frozen ELECTRA-small-shaped generator)", "seed",
         "condenser", "contrastive (cache_chunk)", "retriever, cached", "retriever, uncached", "re-ranker",
         "encoding", "dense search", "mlm (torch_compile layers)", "plain loop (HF), eager",
         "plain loop (HF), compiled"}  # fmt: skip
PROFILED = "plain loop (HF), eager"
LENGTH_ITEMS = {f"{what}, MS MARCO-like, {how}" for what in ("mlm", "simlm (frozen generator)", "retriever")
                for how in ("padded", "unpadded")}  # fmt: skip
ITEMS |= LENGTH_ITEMS


@pytest.mark.slow
def test_gpu_check_smoke_runs_every_item(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python"), "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, str(ROOT / "benches" / "gpu_check.py"), "--smoke", "--out", str(tmp_path),
                          "--profile", PROFILED], env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    results = {r["item"]: r for r in report["results"]}
    assert set(results) == ITEMS
    assert not [r for r in results.values() if "error" in r or "skipped" in r]
    for item, r in results.items():
        if r["group"] == "pretrain":
            assert r["seq_per_s"] > 0 and r["flops_per_step"] > 0 and 0 <= r["data_stall"] < 1, item
            loss = r["losses"]  # the CPU is the device here: fp32 twice, then bf16 autocast
            assert loss["cpu_fp32"] == pytest.approx(loss["device_fp32"], rel=1e-6), item
            assert loss["device_bf16"] == pytest.approx(loss["cpu_fp32"], rel=2e-2), item
    assert results["retriever, cached"]["queries"] == results["retriever, uncached"]["queries"] == 4
    assert results["dense search"]["queries_per_s"] > 0 and results["encoding"]["passages_per_s"] > 0
    for item in LENGTH_ITEMS:  # real tokens/s and the padding the collators' dynamic padding leaves
        r = results[item]
        assert r["unpad"] == ("on" if item.endswith("unpadded") else "off"), item
        assert r["tokens_per_s"] == pytest.approx(r["seq_per_s"] * r["real_tokens_per_seq"]), item
        assert 0.1 < r["padding_fraction"] < 0.7 and "% padding" in r["setting"], item
    assert report["table"] in res.stdout and len(report["table"].splitlines()) == 2 + len(ITEMS)
    rows = {
        line.split(" | ")[0].removeprefix("| "): line.split(" | ")
        for line in report["table"].splitlines()[2:]
    }
    for item, r in results.items():  # the first-step loss check: bf16 within 0.5% of CPU fp32, else flagged
        if r["group"] == "pretrain":
            off = abs(r["losses"]["device_bf16"] / r["losses"]["cpu_fp32"] - 1)
            assert rows[item][8] == ("ok" if off <= 0.005 else f"OFF BY {100 * off:.2f}%"), item
    check_compile_items(results, tmp_path)


def check_compile_items(results: dict, out: Path) -> None:
    """Issue 28's items: dense-pt's mlm compiled (its compile time), the plain Hugging Face loop
    eager and compiled at the mlm item's shapes, the ratios, and ``--profile``'s kernel table."""
    compiled, eager, plain = (
        results[k] for k in ("mlm (torch_compile layers)", PROFILED, "plain loop (HF), compiled")
    )
    assert compiled["compile_s"] > 0 and plain["compile_s"] > 0 and eager["compile_s"] is None
    assert (
        compiled["setting"].startswith("batch 8 x 32") and "batch 8 x 32" in plain["setting"]
    )  # the same shapes
    assert compiled["vs_plain"] == pytest.approx(compiled["seq_per_s"] / plain["seq_per_s"])
    assert results["mlm"]["vs_plain"] == pytest.approx(results["mlm"]["seq_per_s"] / eager["seq_per_s"])
    assert "vs_plain" not in eager and "vs_plain" not in results["cdmae"]  # the ratio sits on the mlm rows
    profile = (out / "profile-plain-loop-hf-eager.txt").read_text()
    assert eager["profile"].endswith("profile-plain-loop-hf-eager.txt") and "Self CPU" in profile
    assert "aten::" in profile and len(profile.splitlines()) >= 30
