"""`dense-pt pretrain --method querygen|contrastive` on a tiny store with a queries folder written by
the expansion writer: the curriculum switches contexts at its planned step (and a stopped run
resumes in the right stage), the learning rate follows cosine then constant, the CLI runs both
methods end to end, and misuse is refused clearly."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)
pytest.importorskip("dense_pt.collate")

from typer.testing import CliRunner  # noqa: E402

from dense_pt.cli import app  # noqa: E402
from dense_pt.errors import InvalidArgumentError  # noqa: E402
from dense_pt.expansion.writer import load_pseudo_queries  # noqa: E402
from dense_pt.pretrain import build_config, resolve, run_pretrain  # noqa: E402
from dense_pt.pretrain.context_data import build_source, plan_curriculum  # noqa: E402
from pretrain_helpers import synthetic_texts, tiny_config_file, tiny_store, write_queries  # noqa: E402

N = 48


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    base = tmp_path_factory.mktemp("expand-pretrain")
    store = tiny_store(base / "store", n=N, with_importance=False)
    config = tiny_config_file(base / "tiny.json", store, layers=2)
    queries = write_queries(base / "queries", synthetic_texts(N))
    return base, store, config, queries


def _cfg(setup, out, method, curriculum=None, queries=True, stage_schedules=None, **train):
    _, store, config, qdir = setup
    t = {"max_steps": 8, "batch_size": 4, "lr": 1e-3, "save_every": 100, "log_every": 1, "warmup": 1}
    t.update(train)
    top = {
        "method": method,
        "model": config,
        "corpus": str(store.path),
        "out": str(out),
        "max_length": 48,
        "queries": str(qdir) if queries else None,
        "curriculum": curriculum,
        "stage_schedules": stage_schedules,
    }
    return build_config(top=top, train=t)


def _content(ids, am):
    return [int(t) for t, m in zip(ids, am, strict=True) if m][1:-1]  # drop [CLS] ... [SEP]


def _is_substring(small, big):
    n = len(small)
    return any(big[i : i + n] == small for i in range(len(big) - n + 1))


@pytest.mark.parametrize("method, coarse", [("contrastive", "spans"), ("querygen", "passage")])
def test_curriculum_switches_context_at_the_planned_step(setup, tmp_path, method, coarse):
    """The targets of each stage (LLM expansion paper, Curriculum Learning): contrastive pre-training
    contrasts the passage with a random span of it, query generation generates the passage itself
    (the clean text the encoder's masked view was made from); then both use the LLM queries."""
    _, store, _, qdir = setup
    cfg = _cfg(setup, tmp_path, method, f"{coarse}:0.75,queries:0.25")
    stages = plan_curriculum(cfg)
    assert [(s.source, s.start, s.end, s.schedule) for s in stages] == [
        (coarse, 0, 6, "cosine"),
        ("queries", 6, 8, "constant"),
    ]
    source = build_source(cfg, store, stages)
    tok = store.tokenizer()
    queries = load_pseudo_queries(qdir)
    ids = store.ids.to_pylist()
    batches = list(source.iter_epoch(0, 0, 0, 1))
    assert len(batches) == 8
    for k, batch in enumerate(batches):
        index, rows, _epoch = source.locate(k, 0, 1)
        assert index == (0 if k < 6 else 1)
        if method == "contrastive":
            ctx_ids, ctx_am = batch["ctx_input_ids"], batch["ctx_attention_mask"]
        else:
            ctx_ids, ctx_am = batch["dec_input_ids"], batch["dec_attention_mask"]
            # causal LM labels: every position predicts the next real token
            for b in range(len(rows)):
                n = int(ctx_am[b].sum())
                assert batch["dec_labels"][b, : n - 1].tolist() == ctx_ids[b, 1:n].tolist()
                assert (batch["dec_labels"][b, n - 1 :] == -100).all()
        for b, row in enumerate(rows):
            passage = store.tokens(int(row)).tolist()
            got = _content(ctx_ids[b], ctx_am[b])
            encoded = [tok.encode(q, add_special_tokens=False).ids for q in queries.get(ids[row], [])]
            if k < 6 and method == "contrastive":  # a span of the passage
                assert got and _is_substring(got, passage) and len(got) < len(passage) + 1
            elif k < 6:  # the passage itself: the encoder's crop, clean
                assert len(got) == min(len(passage), 46) and _is_substring(got, passage)
                lab, inp = batch["labels"][b], batch["input_ids"][b]
                clean = np.where(lab != -100, lab, inp)  # the encoder's view, unmasked
                assert clean[: len(got) + 2].tolist() == ctx_ids[b, : len(got) + 2].tolist()
            elif method == "contrastive":  # one of the passage's LLM queries
                assert got in encoded
            else:  # all of them, each closed by [SEP]
                sep = store.special_tokens["sep"]
                assert got == [t for q in encoded for t in [*q, sep]][:-1]
        if k >= 6:
            assert all(queries.get(ids[r]) for r in rows)  # only passages that have queries


def _adam_steps(trainer) -> set[int]:
    return {int(st["step"]) for st in trainer.optimizer.state.values() if "step" in st}


@pytest.mark.parametrize("stage_optimizer", ["reset", "keep"])
def test_curriculum_learning_rate_and_optimizer_at_the_switch(setup, tmp_path, stage_optimizer):
    """Warm-up is a fraction of the FIRST stage, stage 1 decays by cosine, stage 2 is constant at the
    peak (the paper); with "reset" the AdamW moments start afresh at the switch (a new run from the
    stage-1 checkpoint), also when the run is resumed from a checkpoint taken at the switch."""
    import math

    peak, warm = 1e-3, 3  # warm-up 0.25 of the 12-step first stage
    seen: dict[int | str, set[int] | bool] = {}  # the Adam steps at a step; "stop" once asked

    def watch(trainer, step, record):
        if step in (9, 12, 13):
            seen[step] = _adam_steps(trainer)
        if step == 12 and "stop" not in seen:
            seen["stop"] = True
            trainer.stop_requested = True

    cfg = _cfg(setup, tmp_path / "r", "contrastive", "spans:0.75,queries:0.25", max_steps=16,
               warmup=0.25, save_every=4, threads=1)  # fmt: skip
    cfg.stage_optimizer = stage_optimizer
    first = run_pretrain(cfg, callbacks=[watch], progress=False)
    assert first["steps"] == 12  # stopped at the switch, after the checkpoint taken there
    run_pretrain(cfg, resume=True, callbacks=[watch], progress=False)
    lrs = [json.loads(line)["lr"] for line in open(tmp_path / "r" / "log.jsonl")]

    def reference(s):  # 0-based optimiser step
        if s < warm:
            return peak * (s + 1) / warm
        if s < 12:
            return peak * 0.5 * (1 + math.cos(math.pi * (s - warm) / (12 - warm)))
        return peak

    assert lrs == pytest.approx([reference(s) for s in range(16)], rel=1e-9, abs=0)
    assert seen[9] == {9} and seen[12] == {12}
    assert seen[13] == ({1} if stage_optimizer == "reset" else {13})


@pytest.mark.parametrize("stage_warmup", [0, 2, 0.5])
def test_learning_rate_curve_at_the_switch(setup, tmp_path, stage_warmup):
    """The logged rate around the switch (step 12 of 16). Default (0, the paper's "constant"): the
    last stage-1 step runs at cosine's near-zero tail and the first stage-2 step at the full peak,
    with fresh AdamW moments; --stage-warmup ramps stage 2 linearly from 0 to the peak over its
    steps (2) or its fraction of the stage (0.5 of 4 = 2), then stays constant."""
    import math

    peak = 1e-3
    cfg = _cfg(setup, tmp_path / "r", "contrastive", "spans:0.75,queries:0.25", max_steps=16,
               warmup=0.25, save_every=100, threads=1)  # fmt: skip
    cfg.stage_warmup = stage_warmup
    run_pretrain(cfg, progress=False)
    lrs = [json.loads(line)["lr"] for line in open(tmp_path / "r" / "log.jsonl")]
    tail = peak * 0.5 * (1 + math.cos(math.pi * (11 - 3) / (12 - 3)))
    assert lrs[11] == pytest.approx(tail, rel=1e-9) and lrs[11] < 0.04 * peak  # end of the cosine stage
    want = [peak, peak, peak, peak] if not stage_warmup else [peak / 2, peak, peak, peak]
    assert lrs[12:] == pytest.approx(want, rel=1e-9)
    run_cfg = json.loads((tmp_path / "r" / "run_config.json").read_text())
    assert run_cfg.get("stage_warmup", 0) == stage_warmup  # recorded when set


def test_stage_warmup_is_refused_where_it_cannot_apply(setup, tmp_path):
    with pytest.raises(InvalidArgumentError, match="longer than the queries stage"):
        resolve(
            _cfg(setup, tmp_path / "a", "contrastive", "spans:0.75,queries:0.25", max_steps=16).model_copy(
                update={"stage_warmup": 5}
            )
        )
    with pytest.raises(InvalidArgumentError, match="--stage-warmup is for"):
        build_config(top={"method": "mlm", "model": setup[2], "corpus": str(setup[1].path), "out": str(tmp_path / "b"),
                          "stage_warmup": 2})  # fmt: skip


def test_stopped_run_resumes_in_the_right_stage(setup, tmp_path):
    """Stopped before the switch, resumed across it: the same weights and log as one straight run."""
    from safetensors.torch import load_file

    def stop_at(step_to_stop):
        def cb(trainer, step, record):
            if step == step_to_stop:
                trainer.stop_requested = True

        return cb

    full = _cfg(setup, tmp_path / "full", "contrastive", "spans:0.75,queries:0.25", threads=1)
    run_pretrain(full, progress=False)
    cut = _cfg(setup, tmp_path / "cut", "contrastive", "spans:0.75,queries:0.25", threads=1)
    first = run_pretrain(cut, callbacks=[stop_at(5)], progress=False)
    assert first["steps"] == 5
    second = run_pretrain(cut, resume=True, progress=False)
    assert second["resumed_from"] == 5 and second["steps"] == 8
    ckpt = "checkpoints/checkpoint-00000008/model.safetensors"
    a, b = load_file(str(tmp_path / "full" / ckpt)), load_file(str(tmp_path / "cut" / ckpt))
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-6)
    log = [json.loads(line) for line in open(tmp_path / "cut" / "log.jsonl")]
    ref = [json.loads(line) for line in open(tmp_path / "full" / "log.jsonl")]
    assert [r["step"] for r in log] == list(range(1, 9))
    assert [r["lr"] for r in log] == pytest.approx([r["lr"] for r in ref])
    assert [r["lr"] for r in log][6:] == [1e-3, 1e-3]  # the constant second stage
    assert all("loss_con" in r for r in log)
    # another max_steps would move the switch: refused
    with pytest.raises(Exception, match="stages"):
        run_pretrain(
            _cfg(setup, tmp_path / "cut", "contrastive", "spans:0.75,queries:0.25", max_steps=12),
            resume=True,
            progress=False,
        )


def test_cli_runs_both_methods_end_to_end(setup, tmp_path):
    from transformers import AutoModel

    _, store, config, qdir = setup
    runner = CliRunner()
    common = ["--model", config, "--corpus", str(store.path), "--max-length", "48", "--batch-size", "4"]
    common += ["--max-steps", "4", "--lr", "1e-3", "--threads", "1", "--quiet", "--log-every", "1"]
    for method in ("querygen", "contrastive"):
        out = tmp_path / method
        args = ["pretrain", "--method", method, "--out", str(out), "--queries", str(qdir), *common]
        coarse = "passage" if method == "querygen" else "spans"
        res = runner.invoke(app, [*args, "--curriculum", f"{coarse}:0.5,queries:0.5", "--warmup", "1"])
        assert res.exit_code == 0, res.output + repr(res.exception)
        rec = [json.loads(line) for line in open(out / "log.jsonl")]
        assert len(rec) == 4 and all(np.isfinite(r["loss"]) for r in rec)
        assert AutoModel.from_pretrained(out / "encoder") is not None
        run_cfg = json.loads((out / "run_config.json").read_text())
        assert run_cfg["stages"] == [[coarse, 0, 2, "cosine"], ["queries", 2, 4, "constant"]]
        assert run_cfg["stage_optimizer"] == "reset" and run_cfg["paper"] == "llm-expansion"
    zero_shot_evaluation(runner, tmp_path, tmp_path / "contrastive" / "encoder", store)
    # contrastive without queries: spans only
    res = runner.invoke(
        app, ["pretrain", "--method", "contrastive", "--out", str(tmp_path / "c2"), "--warmup", "1", *common]
    )
    assert res.exit_code == 0, res.output + repr(res.exception)


def zero_shot_evaluation(runner, tmp, encoder, store):
    """encode -> search -> evaluate with the pre-trained encoder as it is (issue 7, item 5)."""
    docs = synthetic_texts(N)[1:13]
    with open(tmp / "queries.jsonl", "w") as f:
        for i, (_pid, text) in enumerate(docs):
            f.write(json.dumps({"_id": f"q{i}", "text": " ".join(text.split()[:4])}) + "\n")
    with open(tmp / "qrels.tsv", "w") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        f.writelines(f"q{i}\t{pid}\t1\n" for i, (pid, _) in enumerate(docs))
        # q0 also judges every other passage not relevant: four steps leave an encoder that ranks
        # every query alike, and a run whose documents no judgement names is refused as a corpus
        # mismatch (evaluate's check); this test is about the chain, not the encoder's quality
        f.writelines(f"q0\t{pid}\t0\n" for pid in store.ids.to_pylist() if pid != docs[0][0])
    common = ["--pooling", "cls", "--max-length", "48", "--batch-size", "16", "--device", "cpu"]
    for source, out in ((str(store.path), "emb_p"), (str(tmp / "queries.jsonl"), "emb_q")):
        res = runner.invoke(app, ["encode", str(encoder), source, "--out", str(tmp / out), *common])
        assert res.exit_code == 0, res.output + repr(res.exception)
    args = ["search", str(tmp / "emb_q"), str(tmp / "emb_p"), "--out", str(tmp / "run.trec"), "-k", "10"]
    res = runner.invoke(app, [*args, "--metric", "ip"])
    assert res.exit_code == 0, res.output + repr(res.exception)
    hits = [line.split() for line in open(tmp / "run.trec")]
    assert len(hits) == 12 * 10 and {h[2] for h in hits} <= set(store.ids.to_pylist())
    args = ["evaluate", str(tmp / "run.trec"), "--qrels", str(tmp / "qrels.tsv"), "-m", "nDCG@10"]
    res = runner.invoke(app, [*args, "-m", "R@10", "--json"])
    assert res.exit_code == 0, res.output + repr(res.exception)
    measures = json.loads(res.output)
    assert 0 <= measures["nDCG@10"] <= 1 and 0 <= measures["R@10"] <= 1


def test_misuse_is_refused(setup, tmp_path):
    with pytest.raises(InvalidArgumentError, match="--queries"):
        _cfg(setup, tmp_path / "a", "querygen", queries=False)
    with pytest.raises(InvalidArgumentError, match="querygen reads no 'spans' context"):
        _cfg(setup, tmp_path / "a", "querygen", "spans:0.5,queries:0.5")
    with pytest.raises(InvalidArgumentError, match="contrastive reads no 'passage' context"):
        _cfg(setup, tmp_path / "a", "contrastive", "passage:0.5,queries:0.5")
    with pytest.raises(InvalidArgumentError, match="longer than the first curriculum stage"):
        _cfg(setup, tmp_path / "a", "contrastive", "spans:0.5,queries:0.5", warmup=5)
    assert (
        plan_curriculum(_cfg(setup, tmp_path / "a", "querygen", "passage:1", queries=False))[0].source
        == "passage"
    )
    with pytest.raises(InvalidArgumentError, match="queries stage"):
        _cfg(setup, tmp_path / "b", "contrastive", "spans:0.5,queries:0.5", queries=False)
    with pytest.raises(InvalidArgumentError, match="not mlm"):
        _cfg(setup, tmp_path / "c", "mlm")
    with pytest.raises(InvalidArgumentError, match="sum to 1"):
        _cfg(setup, tmp_path / "d", "contrastive", "spans:0.5,queries:0.6")
    with pytest.raises(InvalidArgumentError, match="stage schedules"):
        _cfg(setup, tmp_path / "f", "contrastive", "spans:0.5,queries:0.5", stage_schedules="cosine")
    ok = _cfg(setup, tmp_path / "g", "contrastive", "spans:0.5,queries:0.5", stage_schedules="linear,cosine")
    assert [s.schedule for s in plan_curriculum(ok)] == ["linear", "cosine"]
    with pytest.raises(InvalidArgumentError, match="accumulation"):
        run_pretrain(_cfg(setup, tmp_path / "e", "contrastive", grad_accum=2), progress=False)


def test_demo_expands_then_pretrains_on_the_queries(tmp_path):
    import functools

    from dense_pt.demo import run_demo, stage_data, stage_store, stage_tokenizer
    from dense_pt.demo.context import Stage as DemoStage
    from dense_pt.demo.expansion import stage_expansion, stage_pretrain_expanded

    stages: list[DemoStage] = [
        ("data", stage_data),
        ("tokenizer", stage_tokenizer),
        ("store", stage_store),
        ("expansion", functools.partial(stage_expansion, limit=4, prefer_smollm2=False)),
        ("pretrain-expanded", functools.partial(stage_pretrain_expanded, max_steps=4, batch_size=4)),
    ]
    report = run_demo(tmp_path / "demo", stages=stages, print_summary=False)
    exp, pre = report["stages"]["expansion"], report["stages"]["pretrain-expanded"]
    assert exp["generated"] == 4
    assert pre["status"] == "ran" and pre["method"] == "contrastive" and pre["steps"] == 4
    want = "spans:0.75,queries:0.25" if exp["with_queries"] >= 2 else "spans:1"
    assert pre["curriculum"] == want
    run_cfg = json.loads(
        (tmp_path / "demo" / "pretrain-expanded" / "contrastive" / "run_config.json").read_text()
    )
    assert run_cfg["queries"] == str(tmp_path / "demo" / "expansion" / "queries")
    again = run_demo(tmp_path / "demo", stages=stages, print_summary=False)
    assert again["stages"]["pretrain-expanded"]["status"] == "up to date"


def test_worker_processes_give_the_same_batches(setup, tmp_path):
    _, store, _, _ = setup
    cfg = _cfg(setup, tmp_path, "querygen", "passage:0.5,queries:0.5", max_steps=4, num_workers=1)
    stages = plan_curriculum(cfg)
    with_workers = list(build_source(cfg, store, stages).iter_epoch(0, 1, 0, 1))
    cfg.train.num_workers = 0
    inline = list(build_source(cfg, store, stages).iter_epoch(0, 1, 0, 1))
    assert len(with_workers) == len(inline) == 3  # resumed at round 1
    for a, b in zip(with_workers, inline, strict=True):
        assert sorted(a) == sorted(b)
        for key in a:
            np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]))


def test_a_queries_stage_without_queries_is_refused_by_name(setup, tmp_path):
    """``plan_curriculum`` refuses such a curriculum; ``build_source`` called with stages made by hand says the
    same instead of failing on ``None`` (found by mypy, issue 13)."""
    _, store, _, _ = setup
    stages = plan_curriculum(_cfg(setup, tmp_path, "contrastive", "spans:0.75,queries:0.25"))
    no_queries = _cfg(setup, tmp_path, "contrastive", queries=False)
    with pytest.raises(InvalidArgumentError, match="'queries' stage of contrastive needs --queries"):
        build_source(no_queries, store, stages)
