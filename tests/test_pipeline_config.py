"""The pipeline's configuration is checked whole before the first stage: every numeric setting (a bad
one named by its table and key), ``--stop-after`` against the stage names, and ``[pretrain]``'s
method, profile and length."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dense_pt.cli import app
from dense_pt.errors import DensePtError, FormatError
from dense_pt.pipeline import STAGES, load_pipeline_config

MINIMAL = (
    'out = "runs/a"\n[data]\ncorpus = "c.jsonl"\nqueries = "q.jsonl"\nqrels = "r.tsv"\n[model]\ninit = "m"\n'
)

BAD = [
    (["r1.group_size=-4"], r"r1\.group_size: must be >= 1, got -4"),
    (["r2.group_size=0"], r"r2\.group_size"),
    (["reranker.group_size=1"], r"reranker\.group_size: must be >= 2"),
    (["distill.group_size=1"], r"distill\.group_size: must be >= 2"),
    (["r1.loss='triplet'", "r1.group_size=1"], r"r1: group_size must be >= 2 for the triplet loss"),
    (["mine.depth=0"], r"mine\.depth"),
    (["mine.bm25_depth=-1"], r"mine\.bm25_depth"),
    (["mine.num=-1"], r"mine\.num"),
    (["mine.skip_top=2.5"], r"mine\.skip_top: expected an integer"),
    (["mine.relative_margin=1.5"], r"mine\.relative_margin"),
    (["mine.min_score=0.9", "mine.max_score=0.5"], r"mine: min_score 0.9 exceeds max_score"),
    (["eval.k=-1"], r"eval\.k: must be >= 1, got -1"),
    (["encode.batch_size=0"], r"encode\.batch_size"),
    (["data.max_length=4"], r"data\.max_length: must be >= 8"),
    (["data.dev_fraction=1.5"], r"data\.dev_fraction"),
    (["data.dev_fraction='half'"], r"data\.dev_fraction: expected a number"),
    (["r1.query_max_length=4"], r"r1\.query_max_length"),
    (["r2.passage_max_length=true"], r"r2\.passage_max_length: expected an integer"),
    (["reranker.max_length=30"], r"reranker\.max_length 30 leaves a query of query_max_length 32"),
    (["reranker.rerank_depth=0"], r"reranker\.rerank_depth"),
    (["reranker.score_num=-2"], r"reranker\.score_num"),
    (["reranker.enabled='yes'"], r"reranker\.enabled"),
    (["distill.alpha=1.5"], r"distill\.alpha: must be <= 1, got 1.5"),
    (["r2.tau=-0.1"], r"r2\.tau: must be > 0"),
    (["r1.tau='hot'"], r"r1\.tau: expected a number"),
    (["r1.epochs=0"], r"r1\.epochs"),
    (["r1.train.lr=-1"], r"r1\.train\.lr: must be > 0"),
    (["reranker.train.batch_size=0"], r"reranker\.train\.batch_size: must be >= 1"),
    (["distill.train.warmup=-3"], r"distill\.train\.warmup"),
    (["r2.train.bogus=1"], r"r2\.train\.bogus: unknown key"),
    (["seed=-1"], r"seed: must be >= 0"),
    (['pretrain={train={max_steps=3}}'], r"pretrain: method is required: one of simlm"),
    (['pretrain={method="simlm"}'], r"pretrain\.options\.generator: is required for simlm"),
    (['pretrain={method="cdmae", max_length=4}'], r"pretrain\.max_length: must be >= 8"),
    (['pretrain={method="cdmae", max_length=300}'], r"pretrain\.max_length: 300 exceeds data\.max_length 256"),
    (['pretrain={method="cdmae", train={lr=-1}}'], r"pretrain\.train\.lr: must be > 0"),
    (['pretrain={method="cdmae", options={p_enc=1.5}}'], r"pretrain\.options\.p_enc: must be <= 1"),
    (['pretrain={method="mlm", train={max_steps=100}}'], r"pretrain\.train: a warm-up of 4000 steps \(mlm's default"),
    (['pretrain={method="cdmae", pmi={memory_gb=0}}'], r"pretrain\.pmi\.memory_gb"),
    (['pretrain={method="condenser", paper="seed"}'], r"pretrain: condenser has no defaults from paper 'seed'"),
    (['pretrain={method="querygen"}'], r"pretrain: method querygen reads the LLM queries"),
    (["r1.bogus=1"], r"r1\.bogus: unknown key \(known: loss, group_size"),
    (["bogus=1"], r"p\.toml: bogus: unknown key \(known: out, seed, profile, data"),
    (["profile='gpu'"], r"profile: must be one of paper or cpu, got 'gpu'"),
    (["encode.query_max_length=32"], r"encode: query_max_length: encoding uses each retriever stage's own"),
    (["mine.margin=0.1"], r"mine: margin: renamed absolute_margin"),
    (["r1.epochs=2", "r1.train.max_steps=5"], r"r1: gives both epochs and train\.max_steps"),
    (["fusion.weight=1.5"], r"fusion: weight must be 'tune' or a number in \[0, 1\]"),
    (["fusion.enabled=true", "fusion.dense='distill'", "distill.enabled=false"], r"fusion\.dense = 'distill' needs"),
]  # fmt: skip


@pytest.fixture
def cfg_file(tmp_path: Path) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(MINIMAL)
    return path


@pytest.mark.parametrize(("overrides", "message"), BAD, ids=[" ".join(o) for o, _ in BAD])
def test_bad_values_are_refused_naming_the_key(cfg_file: Path, overrides: list[str], message: str):
    with pytest.raises(FormatError, match=message):
        load_pipeline_config(cfg_file, overrides)


def test_defaults_and_the_example_pass(cfg_file: Path):
    load_pipeline_config(cfg_file)
    load_pipeline_config(cfg_file, ["profile=cpu"])
    load_pipeline_config(Path(__file__).resolve().parents[1] / "examples" / "scifact.toml")


def test_pretrain_length_paper_and_method(cfg_file: Path):
    """The method's declared length (cdmae: 144, seed: 512), capped by what the store keeps;
    ``paper`` picks another profile, as ``dense-pt pretrain --paper`` does."""
    from dense_pt.pipeline.config import pretrain_length_note

    cdmae = load_pipeline_config(cfg_file, ['pretrain={method="cdmae"}']).pretrain
    assert (
        cdmae is not None and cdmae.max_length == 144 and cdmae.paper == "cdmae"
    )  # the old default: 256 + 2
    assert "declared default" in pretrain_length_note(cdmae, 256)
    seed = load_pipeline_config(cfg_file, ['pretrain={method="seed", train={warmup=0.1}}']).pretrain
    assert seed is not None and seed.max_length == 256  # SEED's 512, capped at the store's 256
    assert pretrain_length_note(seed, 256) == (
        "max_length 256 = [data] max_length, what the store keeps (seed's declared default is 512)"
    )
    given = load_pipeline_config(cfg_file, ['pretrain={method="seed", max_length=100, train={warmup=0.1}}'])
    assert given.pretrain is not None and given.pretrain.max_length == 100
    cond = load_pipeline_config(
        cfg_file, ['pretrain={method="condenser", paper="simlm", train={max_steps=5000}}']
    )
    assert cond.pretrain is not None and cond.pretrain.paper == "simlm"


def _tiny_pipeline(tmp_path: Path, pretrain: str = "", layers: int = 1) -> Path:
    """A runnable pipeline TOML over the demo's synthetic corpus and a tiny random model."""
    import torch

    from pipeline_fixtures import synthetic_corpus, tiny_model, write_beir

    torch.set_num_threads(1)
    docs, queries, qrels = synthetic_corpus(n_per_topic=4, queries_per_topic=2)
    beir = write_beir(tmp_path / "data", docs, queries, qrels)
    tiny_model(tmp_path / "model", [t for _, t in docs] + list(queries.values()), hidden=16, layers=layers)
    path = tmp_path / "p.toml"
    path.write_text(
        f'out = "out"\nprofile = "cpu"\n[data]\ncorpus = "{beir}/corpus.jsonl"\nqueries = "{beir}/queries.jsonl"\n'
        f'qrels = "{beir}/qrels/train.tsv"\nmax_length = 64\ndev_fraction = 0.25\n[model]\ninit = "model"\n'
        "[r1]\npassage_max_length = 64\n[r2]\npassage_max_length = 64\n"
        '[reranker]\ninit = "model"\nmax_length = 64\n[distill]\npassage_max_length = 64\n' + pretrain
    )
    return path


def test_cli_refuses_bad_values_and_stages_before_any_work(tmp_path: Path):
    path = _tiny_pipeline(tmp_path)
    runner = CliRunner()
    out = tmp_path / "out"
    for args, message in (
        (["--set", "r1.group_size=-4"], "p.toml: r1.group_size: must be >= 1, got -4"),
        (["--set", "mine.depth=0"], "mine.depth"),
        (["--stop-after", "pretrain"], "this configuration does not run that stage"),
    ):
        res = runner.invoke(app, ["pipeline", "run", str(path), "--quiet", *args])
        assert res.exit_code != 0 and isinstance(res.exception, DensePtError), args
        assert message in str(res.exception)
        assert not out.exists(), f"{args}: a stage ran before the error"
    res = runner.invoke(app, ["pipeline", "run", "--help"])
    assert all(s in " ".join(res.output.split()) for s in STAGES)

    # --stop-after store: done as asked, exit 0, one line on stderr; again once the store is done
    for _ in range(2):
        res = runner.invoke(app, ["pipeline", "run", str(path), "--quiet", "--stop-after", "store"])
        assert res.exit_code == 0, res.output
        assert "stopped after stage 'store' as asked; re-run without --stop-after to continue" in res.stderr
        assert (out / "store" / "manifest.json").exists() and not (out / "split").exists()


def test_pretrain_paper_reaches_the_run(tmp_path: Path):
    """``[pretrain] paper = "simlm"`` trains condenser with SimLM's Table 7 settings (30% mask)
    instead of Condenser's own (15%), and the stage records where its length came from."""
    from dense_pt.pipeline import run_pipeline
    from dense_pt.pipeline.run import StopPipeline

    pre = '[pretrain]\nmethod = "condenser"\npaper = "simlm"\ntrain = { max_steps = 2, batch_size = 4, warmup = 1 }\n'
    cfg = load_pipeline_config(_tiny_pipeline(tmp_path, pre, layers=2))  # condenser reads a middle layer
    with pytest.raises(StopPipeline):
        run_pipeline(cfg, progress=False, stop_after="pretrain", log=lambda _: None)
    run_cfg = json.loads((tmp_path / "out" / "pretrain" / "run" / "run_config.json").read_text())
    assert run_cfg["paper"] == "simlm" and run_cfg["options"]["p_enc"] == 0.3 and run_cfg["max_length"] == 64
    manifest = json.loads((tmp_path / "out" / "pretrain" / "manifest.json").read_text())
    assert manifest["max_length_source"].startswith("max_length 64 = [data] max_length")


def test_run_pipeline_takes_a_file_or_the_typed_config_not_a_dict(tmp_path: Path):
    """The stages read ``validate_config``'s ``ResolvedPipeline`` by attribute: a plain dict (what it
    returned before) is refused up front, naming what to pass instead."""
    from dense_pt.pipeline import ResolvedPipeline, run_pipeline
    from dense_pt.pipeline.run import planned_stages

    with pytest.raises(TypeError, match="a file path or validate_config\\(\\)'s ResolvedPipeline, not dict"):
        run_pipeline({"out": str(tmp_path)}, progress=False)  # type: ignore[arg-type]
    cfg_file = tmp_path / "p.toml"
    cfg_file.write_text(MINIMAL)
    cfg = load_pipeline_config(cfg_file)
    assert isinstance(cfg, ResolvedPipeline) and cfg.data.corpus == tmp_path / "c.jsonl"
    assert "pretrain" not in planned_stages(cfg) and "distill" in planned_stages(cfg)
