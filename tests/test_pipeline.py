"""The pipeline end to end on the demo corpus: a SIGKILLed run resumes (finished stages skipped,
the interrupted training continues from its checkpoint), a changed setting redoes only the
stages downstream of it, and the report is written."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dense_pt.artifacts import claim
from dense_pt.pipeline import dev_split


def test_dev_split_is_fixed_and_disjoint():
    ids = [str(i) for i in range(50)]
    tr, dev = dev_split(ids, 0.1, 13)
    assert len(dev) == 5 and not set(tr) & set(dev) and sorted(tr + dev) == sorted(ids)
    assert dev_split(list(reversed(ids)), 0.1, 13) == (tr, dev)


@pytest.mark.slow
def test_killed_pipeline_resumes(tmp_path: Path):
    out = tmp_path / "demo"
    tests = str(Path(__file__).resolve().parent)
    code = (
        f"import sys; sys.path.insert(0, {tests!r}); from pipeline_fixtures import run_small_pipeline; "
        f"run_small_pipeline({str(out)!r}, steps=8)"
    )
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

    from pipeline_fixtures import run_small_pipeline

    lines: list[str] = []
    res = run_small_pipeline(out, steps=8, log=lines.append)
    assert "[bm25] up to date, skipped" in lines and "[r1] resuming an interrupted run" in lines
    for stage in ("r1", "mine", "r2", "distill"):  # named when they start, timed when they end
        assert lines.index(f"[{stage}] running") < next(
            i for i, x in enumerate(lines) if re.fullmatch(rf"\[{stage}\] done in [\d,.]+ s", x)
        ), lines
    train = json.loads((out / "pipeline" / "r1" / "train" / "manifest.json").read_text())
    assert train["resumed_from"] > 0 and train["steps"] == 8
    assert all(res[s]["status"] == "done" for s in ("r1", "mine", "r2", "reranker", "score", "distill"))
    report = (out / "pipeline" / "report" / "report.md").read_text()
    assert "distilled retriever" in report and (out / "pipeline" / "report" / "stages.png").stat().st_size > 0
    assert res["bm25"]["metrics"]["nDCG@10"] > 0.2
    # Each stage against BM25 per dev query: the difference is the one of the stages' own metrics,
    # so every row read the stage's own dev run (the re-ranker's is dev_reranked.arrow).
    from dense_pt.pipeline.report import LABELS

    for stage in ("zeroshot", "r1", "r2", "reranker", "distill"):
        row = re.search(
            rf"\| {re.escape(LABELS[stage])} \| ([+-][\d.]+) \| \[([+-][\d.]+), ([+-][\d.]+)\] \| ([\d.e-]+) \|",
            report,
        )
        assert row, (stage, report)
        delta, low, high, p = map(float, row.groups())
        want = res[stage]["metrics"]["nDCG@10"] - res["bm25"]["metrics"]["nDCG@10"]
        assert delta == pytest.approx(want, abs=6e-5) and low <= delta <= high and 0 < p <= 1

    # everything is up to date now
    lines.clear()
    run_small_pipeline(out, steps=8, log=lines.append)
    assert not any("running" in x for x in lines)


def test_pretrain_stage_feeds_r1(tmp_path: Path):
    """A [pretrain] section: a few CDMAE steps on the pipeline's store (after a pmi stage that adds
    the importance column cdmae masks by), whose exported encoder is the model that zero-shot
    retrieval and R1 start from."""
    import torch

    from dense_pt.pipeline.config import validate_config
    from dense_pt.pipeline.run import StopPipeline, run_pipeline
    from pipeline_fixtures import small_config, synthetic_corpus, tiny_model, write_beir

    torch.set_num_threads(1)
    docs, queries, qrels = synthetic_corpus(n_per_topic=4, queries_per_topic=2)
    beir = write_beir(tmp_path / "data", docs, queries, qrels)
    model = tiny_model(tmp_path / "model", [t for _, t in docs] + list(queries.values()), hidden=16, layers=1)
    pretrain = {"method": "cdmae", "train": {"max_steps": 3, "batch_size": 4, "save_every": 3},
                "pmi": {"max_n": 3, "window": 3}}  # fmt: skip
    cfg = small_config(tmp_path / "pipe", beir, model, steps=2, pretrain=pretrain)
    lines: list[str] = []
    with pytest.raises(StopPipeline):
        run_pipeline(cfg, progress=False, stop_after="r1", log=lines.append)
    pm = json.loads((tmp_path / "pipe" / "pmi" / "manifest.json").read_text())
    assert pm["status"] == "done" and len(pm["totals"]) == 3 and pm["params"]["window"] == 3
    from dense_pt.data.store import CorpusStore
    from dense_pt.pmi import NgramTable

    store = CorpusStore.open(tmp_path / "pipe" / "store" / "store")
    table = NgramTable.open(tmp_path / "pipe" / "pmi" / "ngrams.pmi")
    values, offsets = store.ragged("importance")
    first = store.tokens(0)
    np.testing.assert_allclose(values[offsets[0] : offsets[1]], table.ami(first, window=3), rtol=1e-6)
    pt = json.loads((tmp_path / "pipe" / "pretrain" / "manifest.json").read_text())
    encoder = tmp_path / "pipe" / "pretrain" / "run" / "encoder"
    assert pt["status"] == "done" and pt["steps"] == 3 and pt["method"] == "cdmae"
    assert pt["inputs"]["store"] == pm["fingerprint"]
    assert Path(pt["encoder"]) == encoder and (encoder / "tokenizer.json").is_file()
    r1 = json.loads((tmp_path / "pipe" / "r1" / "manifest.json").read_text())
    assert r1["inputs"]["model"] == pt["fingerprint"] and r1["train_steps"] == 2
    train = json.loads((tmp_path / "pipe" / "r1" / "train" / "manifest.json").read_text())
    assert Path(train["inputs"]["model"]["path"]) == encoder
    zs = json.loads((tmp_path / "pipe" / "zeroshot" / "manifest.json").read_text())
    assert zs["inputs"]["model"] == pt["fingerprint"]

    # a typo in [pretrain] fails when the configuration is read, before any stage runs
    from dense_pt.errors import FormatError

    base = {"out": "x", "data": {"corpus": "c", "queries": "q", "qrels": "r"}, "model": {"init": "m"}}
    with pytest.raises(FormatError, match=r"pretrain\.train\.max_step"):
        validate_config({**base, "pretrain": {"method": "mlm", "train": {"max_step": 3}}}, tmp_path)
    with pytest.raises(FormatError, match=r"pretrain\.pmi: window 4 needs max_n >= window"):
        validate_config({**base, "pretrain": {"method": "cdmae", "pmi": {"max_n": 3}}}, tmp_path)
    with pytest.raises(FormatError, match=r"pretrain: pmi is only used by cdmae"):
        validate_config({**base, "pretrain": {"method": "mlm", "pmi": {}}}, tmp_path)


def test_set_overrides_values_and_reports_bad_ones(tmp_path: Path):
    from typer.testing import CliRunner

    from dense_pt.cli import app
    from dense_pt.errors import InvalidArgumentError
    from dense_pt.pipeline import load_pipeline_config

    cfg_file = tmp_path / "p.toml"
    cfg_file.write_text(
        'out = "runs/a"\n[data]\ncorpus = "c.jsonl"\nqueries = "q.jsonl"\nqrels = "r.tsv"\n'
        '[model]\ninit = "m"\n[r1]\ngroup_size = 8\n'
    )
    cfg = load_pipeline_config(
        cfg_file,
        ["out=runs/b", "r1.group_size=4", "r1.train.max_steps=7",
         'pretrain={method="cdmae", train={max_steps=3}}'],
    )  # fmt: skip
    assert cfg.out == tmp_path / "runs" / "b"
    # the file's train table is merged over the profile's; its max_steps replaces the profile's epochs
    assert cfg.r1.group_size == 4 and cfg.r1.train.model_dump(exclude_none=True) == {
        "lr": 2e-5, "warmup": 1000, "batch_size": 64, "weight_decay": 0.0, "max_steps": 7}  # fmt: skip
    assert cfg.r1.epochs is None and cfg.r2.epochs == 3
    assert cfg.pretrain is not None and cfg.pretrain.method == "cdmae"
    assert cfg.pretrain.train.model_dump(exclude_none=True) == {"max_steps": 3}
    assert cfg.pretrain.pmi is not None
    assert cfg.pretrain.pmi.model_dump() == {"max_n": 4, "min_count": 1, "window": 4, "memory_gb": 8.0}
    # the file itself is untouched by overrides
    assert load_pipeline_config(cfg_file).r1.group_size == 8
    with pytest.raises(InvalidArgumentError, match=r"expected dotted\.key=VALUE"):
        load_pipeline_config(cfg_file, ["r1.group_size"])
    with pytest.raises(InvalidArgumentError, match="out is not a table"):
        load_pipeline_config(cfg_file, ["out.x=1"])
    res = CliRunner().invoke(app, ["pipeline", "run", str(cfg_file), "--set", "r1.bogus=1"])
    assert res.exit_code != 0 and "bogus" in str(res.output) + str(res.exception)


def test_eval_and_loss_keys_checked_and_stale_metrics_recomputed(tmp_path: Path):
    """``[eval] rel_level`` / ``tie_break`` and ``[distill] loss`` are pipeline keys, checked when the
    file is read; a finished stage whose metrics were computed with other evaluation settings gets
    them recomputed from its run file on the next run, without redoing the stage."""
    from dense_pt.errors import FormatError
    from dense_pt.evaluation import evaluate_run
    from dense_pt.pipeline import load_pipeline_config
    from dense_pt.pipeline.common import evaluate
    from dense_pt.pipeline.runner import Context, Stage, run_stages
    from dense_pt.runs import write_run

    cfg_file = tmp_path / "p.toml"
    cfg_file.write_text(
        'out = "runs/a"\n[data]\ncorpus = "c.jsonl"\nqueries = "q.jsonl"\nqrels = "r.tsv"\n'
        '[model]\ninit = "m"\n[eval]\nmeasures = ["RR@10", "nDCG@10"]\n[distill]\nloss = "infonce"\n'
    )
    cfg = load_pipeline_config(cfg_file)
    assert cfg.eval.rel_level == 1 and cfg.eval.tie_break == "docno"
    assert cfg.distill.loss == "infonce" and cfg.distill.tau is None
    for bad, what in (
        (["eval.rel_level=0"], "rel_level"),
        (["eval.tie_break='random'"], "tie_break"),
        (["eval.measures=['nDCG@10,RR@@3']"], "unknown measure"),
        (["distill.loss='triplet'"], r"distill: loss must be one of"),
        (["r1.loss='triplet'", "r1.tau=0.1"], "no temperature"),
    ):
        with pytest.raises(FormatError, match=what):
            load_pipeline_config(cfg_file, bad)

    # a finished stage, evaluated at rel_level 1 ...
    out = tmp_path / "runs" / "a"
    (out / "split").mkdir(parents=True)
    (out / "split" / "dev.qrels").write_text("q1 0 a 1\nq1 0 b 2\nq2 0 c 2\n")
    claim(out, "pipeline", "pipeline", force=True)  # the pipeline's folder (its split stage faked above)
    run = {"q1": {"a": 3.0, "x": 2.5, "b": 2.0}, "q2": {"y": 1.0, "c": 0.5}}
    calls = []

    def bm25(ctx: Context, folder: Path) -> dict:
        calls.append(folder)
        write_run(folder / "run.trec", run)
        return {"metrics": evaluate(ctx, run)}

    stage = Stage(name="bm25", doc="bm25", reads=(), config=(), outputs=("run.trec",), inputs=lambda ctx: {"x": 1},
                  params=lambda ctx: {"k": 10}, run=bm25, run_file="run.trec")  # fmt: skip
    ctx = Context(cfg, False, lambda _: None)
    run_stages(ctx, (stage,))
    first = ctx.results["bm25"]
    qrels = {"q1": {"a": 1, "b": 2}, "q2": {"c": 2}}
    assert first["metrics"] == evaluate_run(run, qrels, ["RR@10", "nDCG@10"]).measures
    # ... re-run with rel_level 2: skipped, not redone, metrics recomputed from its run file
    lines: list[str] = []
    cfg2 = load_pipeline_config(cfg_file, ["eval.rel_level=2"])
    ctx = Context(cfg2, False, lines.append)
    run_stages(ctx, (stage,))
    again = ctx.results["bm25"]
    assert len(calls) == 1 and "[bm25] up to date, skipped" in lines
    want = evaluate_run(run, qrels, ["RR@10", "nDCG@10"], rel_level=2).measures
    assert again["metrics"] == want and want["RR@10"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert json.loads((out / "bm25" / "manifest.json").read_text())["evaluation"]["rel_level"] == 2
