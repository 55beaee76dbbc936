"""The GPU study (``benches/gpu_study.py``, issue 29) cannot rot: its bundle packs the model in fp16
and the data xz-compressed and restores both exactly (the weights to fp16's values in their own
dtype), ``scripts/gpu-bundle.sh --study`` packs and checks the size (the wheel build left out: it
takes minutes), and ``--smoke`` runs the whole study on a tiny model on the CPU, writing its table
and the runs of every arm and seed over every query."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from pipeline_fixtures import synthetic_corpus, tiny_model, write_beir  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benches" / "gpu_study.py"


def _bench():
    spec = importlib.util.spec_from_file_location("gpu_study", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_study"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpu-study")
    docs, queries, qrels = synthetic_corpus(n_per_topic=4, queries_per_topic=2)
    beir = write_beir(root / "beir", docs, queries, qrels)
    model = tiny_model(root / "model", [t for _, t in docs] + list(queries.values()))
    return model, beir


def test_pack_and_unpack_restore_the_model_and_the_data(inputs, tmp_path):
    from safetensors.torch import load_file

    model, beir = inputs
    bench = _bench()
    packed = bench.pack(model, beir, tmp_path / "bundle")
    half = load_file(str(tmp_path / "bundle" / "model" / "model.safetensors"))
    assert {str(v.dtype) for v in half.values() if v.is_floating_point()} == {"torch.float16"}
    assert packed["bytes"] == sum(p.stat().st_size for p in (tmp_path / "bundle").rglob("*") if p.is_file())
    restored, data = bench.unpack(tmp_path / "bundle", tmp_path / "work")
    original = load_file(str(model / "model.safetensors"))
    back = load_file(str(restored / "model.safetensors"))
    assert back.keys() == original.keys()
    for k, v in original.items():
        assert back[k].dtype == v.dtype, k  # fp32 again (integer buffers untouched)
        want = v.half().to(v.dtype) if v.is_floating_point() else v
        assert torch.equal(back[k], want), k
    for name in ("tokenizer.json", "config.json", "vocab.txt"):
        if (model / name).exists():
            assert (restored / name).read_bytes() == (model / name).read_bytes(), name
    assert not (restored / "dtypes.json").exists()
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/train.tsv"):
        assert (data / name).read_bytes() == (beir / name).read_bytes(), name
        assert (tmp_path / "bundle" / "data" / f"{name}.xz").stat().st_size < (beir / name).stat().st_size


def test_bundle_script_packs_the_study_and_checks_the_size(inputs, tmp_path):
    """``gpu-bundle.sh --study --no-wheels``: the packing and the 64 MiB check without the minutes
    of the wheel build; a limit the bundle exceeds fails, naming it."""
    model, beir = inputs
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT / "python"), "OUT_DIR": str(tmp_path / "b"),
           "STUDY_MODEL": str(model), "STUDY_DATA": str(beir)}  # fmt: skip
    cmd = ["bash", str(ROOT / "scripts" / "gpu-bundle.sh"), "--study", "--no-wheels"]
    ok = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert (tmp_path / "b" / "study" / "model" / "model.safetensors").is_file()
    assert (tmp_path / "b" / "study" / "data" / "corpus.jsonl.xz").is_file()
    assert "(limit 64 MiB)" in ok.stderr and not list((tmp_path / "b").glob("*.whl"))
    over = subprocess.run(cmd, env={**env, "LIMIT_MIB": "0"}, capture_output=True, text=True, timeout=300)
    assert over.returncode == 1 and "is over 0 MiB" in over.stderr
    bad = subprocess.run([*cmd, "--bogus"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown option --bogus" in bad.stderr


@pytest.mark.slow
def test_gpu_study_smoke_writes_its_table_and_every_run(tmp_path):
    import numpy as np

    from dense_pt.data import load_queries
    from dense_pt.runs import read_run

    env = {**os.environ, "PYTHONPATH": str(ROOT / "python"), "OMP_NUM_THREADS": "1"}
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--out", str(out), "--work", str(tmp_path / "w")],
                         env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    chart = ["study.png"] if importlib.util.find_spec("matplotlib") else []  # the plot extra
    assert sorted(p.name for p in out.iterdir()) == ["gpu_study.json", "gpu_study.md", "runs-1.tar", *chart]
    report = json.loads((out / "gpu_study.json").read_text())
    arms = ["none", "mlm", "cdmae", "simlm", "contrastive", "condenser", "seed"]
    names = [f"{a}-seed{s}" for s in (1, 2) for a in arms]
    assert sorted(report["cells"]) == sorted(names) and not report["skipped"] and not report["failed"]
    for arm in arms[1:]:
        assert report["cells"][f"{arm}-seed1"]["pretrain"]["steps"] == 2
        assert report["cells"][f"{arm}-seed2"]["pretrained_by"] == f"{arm}-seed1"
        assert report["versus_none"]["objectives"][arm]["seeds"] == [1, 2]
        assert set(report["versus_none"]["objectives"][arm]) == {"seeds", "nDCG@10", "R@100", "RR@10"}
    table = (out / "gpu_study.md").read_text()
    assert table in res.stdout and "## Against none, R1" in table and "## Wall time" in table
    queries = set(load_queries(tmp_path / "w" / "data" / "queries.jsonl"))
    with tarfile.open(out / "runs-1.tar") as t:
        assert sorted(t.getnames()) == sorted(f"runs/{n}.arrow" for n in names)
        t.extractall(tmp_path / "x", filter="data")
    for name in names:
        seen: dict[str, int] = {}
        for chunk in read_run(tmp_path / "x" / "runs" / f"{name}.arrow"):
            seen.update(zip(chunk.qids.to_pylist(), np.diff(chunk.offsets).tolist(), strict=True))
        assert set(seen) == queries and max(seen.values()) == 100, name  # every query, test ones too


def test_runs_are_tarred_in_parts_that_come_back(tmp_path, monkeypatch):
    """Parts under ``PART_BYTES`` each, at most ``MAX_PARTS``: the runs that do not fit are named,
    never written as files the machine would not give back."""
    bench = _bench()
    runs = tmp_path / "runs"
    runs.mkdir()
    for i in range(7):
        (runs / f"arm{i}-seed1.arrow").write_bytes(bytes([i]) * 3000)
    monkeypatch.setattr(bench, "PART_BYTES", 8100)  # two runs (with their tar headers) a part
    monkeypatch.setattr(bench, "MAX_PARTS", 3)
    names, left_out = bench.tar_parts(runs, tmp_path)
    assert names == ["runs-1.tar", "runs-2.tar", "runs-3.tar"] and left_out == ["arm6-seed1.arrow"]
    got = {}
    for name in names:
        with tarfile.open(tmp_path / name) as t:
            got.update({m.name: t.extractfile(m).read() for m in t.getmembers()})  # type: ignore[union-attr]
    assert got == {f"runs/arm{i}-seed1.arrow": bytes([i]) * 3000 for i in range(6)}
