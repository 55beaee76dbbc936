"""One definition per default (issue 13): each number the config models take from the papers (or
set themselves) is written in exactly one module of the package, and every other module reads it
from there. Found by parsing the source (``ast``), so a retyped ``0.02`` in a new function fails
here. A few literals are the same number with another meaning: each is listed with its reason.

And the models refuse unknown keys and wrong types naming the dotted key: a pipeline file, a
pre-training file, and a ``--set`` override on the command line."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dense_pt.cli import app, exit_code
from dense_pt.errors import DensePtError, FormatError

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "dense_pt"

FT = "config/defaults/finetune.py"  # SimLM Table 13: fine-tuning
PAPERS = "config/defaults/objectives.py"  # each pre-training method's papers (one entry per paper and method)

# value -> the one module where it is written (as a default)
HOME: dict[float | int, str] = {
    0.3: PAPERS,  # encoder replace rates (CDMAE, SimLM Table 7)
    0.5: PAPERS,  # decoder replace rate (CDMAE)
    0.15: PAPERS,  # BERT / SEED-Encoder mask rates
    144: FT,  # passage length (and, in PAPERS, the pre-training length; see SAME_NUMBER)
    192: FT,  # re-ranker length
    0.02: FT,  # tau
    2e-5: FT,  # retriever lr
    3e-5: FT,  # re-ranker and distillation lr
    24: FT,  # distillation group
    200: FT,  # negatives depth, re-rank depth
    0.2: FT,  # distillation alpha
    4000: PAPERS,  # SimLM warm-up steps
    3e-4: PAPERS,  # pre-training lr
    60: "config/choices.py",  # RRF k (Cormack et al. 2009)
    8.0: "config/pmi.py",  # the pmi memory budget
    13: "config/pipeline.py",  # the pipeline's seed
    42: "config/train.py",  # the engine's seed
    32: FT,  # query length
    # the commands' own defaults (issue 13 item 1: the models in config/ are their one home)
    0.7: "config/expand.py",  # LLM sampling temperature
    0.95: "config/expand.py",  # LLM nucleus top_p
    100_000: "config/retrieval.py",  # rows per embedding shard
    10_000: "config/evaluation.py",  # bootstrap and randomization resamples
}

# (value, module): the same number written for another reason
SAME_NUMBER: dict[tuple[float | int, str], str] = {
    (144, PAPERS): "the pre-training length of each paper (SimLM Table 11, CDMAE): not the fine-tuning one",
    (0.5, "training/optim.py"): "the cosine schedule's 0.5 * (1 + cos)",
    (0.5, "expansion/curriculum.py"): "the cosine schedule's 0.5 * (1 + cos)",
    (
        0.5,
        "objectives/retrieval.py",
    ): "R-Drop's mean of two dropout passes (the authors' 0.5 (KL + KL), 0.5 (CE + CE))",
    (0.3, "plot.py"): "a grid line's transparency",
    (0.3, "demo/corpus.py"): "the demo corpus's test/dev split threshold",
    (0.2, "demo/corpus.py"): "the demo corpus's test/dev split threshold",
    (0.2, PAPERS): "SimLM's generator MLM loss weight (train_rlm.sh), not distillation's alpha",
    (200, "demo/finetune.py"): "the demo's own step count",
    (200, "demo/expansion.py"): "the demo expands the first 200 passages",
    (200, "expansion/generate.py"): "characters of a bad LLM response quoted in an error",
    (60, "progress.py"): "seconds per minute, minutes per hour",
    (60, "demo/corpus.py"): "the demo corpus's number of towns",
    (32, "config/pretrain.py"): "tokens kept per LLM query (MAX_QUERY_TOKENS), not a query length",
    (32, "config/train.py"): "the engine's batch size",
    (32, "data/build.py"): "32 << 20 characters per tokenizer batch",
    (32, "demo/tiny.py"): "the tiny demo model's width",
    (32, "pmi/build.py"): "1 << 32: the u32 vocabulary limit",
    (32, "pmi/table.py"): "1 << 32: the u32 vocabulary limit",
    (32, "training/trainer.py"): "2**32: numpy's seed range",
    (32, "training/cache.py"): 'cache_chunk = "auto"\'s chunk on CPU, not a query length',
    (0.95, "evaluation/significance.py"): "the confidence of an interval, not top_p",
    (10_000, PAPERS): "SEED-Encoder's warm-up steps, not the evaluation's resamples",
}


def _literals() -> dict[tuple[type, float | int], list[str]]:
    found: dict[tuple[type, float | int], list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            value = node.value if isinstance(node, ast.Constant) else None
            if isinstance(value, int | float) and type(value) in (int, float):
                found[type(value), value].append(path.relative_to(PACKAGE).as_posix())
    return found


@pytest.mark.parametrize("value", list(HOME), ids=[repr(v) for v in HOME])
def test_each_default_is_written_in_one_module(value: float | int):
    modules = set(_literals()[type(value), value])
    assert HOME[value] in modules, f"{value!r} is no longer written in {HOME[value]}"
    stray = {m for m in modules - {HOME[value]} if (value, m) not in SAME_NUMBER}
    assert not stray, f"{value!r} is written in {sorted(stray)} too: read it from {HOME[value]}"


def test_the_exceptions_are_still_needed():
    """An exception whose literal went away is removed from the list (it would hide a regression)."""
    found = _literals()
    stale = [(v, m) for v, m in SAME_NUMBER if m not in found[type(v), v]]
    assert not stale, stale


def test_the_models_read_the_papers_numbers():
    from dense_pt.config.choices import RRF_K
    from dense_pt.config.defaults import finetune as ft
    from dense_pt.config.pipeline import PmiTable, table_defaults

    r1, rr, distill = table_defaults("r1"), table_defaults("reranker"), table_defaults("distill")
    assert (r1["query_max_length"], r1["passage_max_length"], r1["group_size"]) == (32, 144, 16)
    assert (rr["max_length"], rr["group_size"], rr["rerank_depth"]) == (ft.RERANKER_MAX_LENGTH, 64, 200)
    assert (distill["alpha"], distill["group_size"], distill["train"]["lr"]) == (0.2, 24, 3e-5)
    assert table_defaults("fusion")["rrf_k"] == RRF_K and PmiTable().memory_gb == 8.0


# --- unknown keys and wrong types, named by their dotted path ------------------------------------

PIPELINE = (
    'out = "runs/a"\n[data]\ncorpus = "c.jsonl"\nqueries = "q.jsonl"\nqrels = "r.tsv"\n[model]\ninit = "m"\n'
)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("[r1.train]\nlrr = 1e-4\n", r"p\.toml: r1\.train\.lrr: unknown key \(known: max_steps, "),
        ("[r1.train]\nlr = -1\n", r"p\.toml: r1\.train\.lr: must be > 0, got -1"),
        ('[r1]\ngroup_size = "four"\n', r"p\.toml: r1\.group_size: expected an integer, got 'four'"),
        ("[mine]\ndepth = 1.5\n", r"p\.toml: mine\.depth: expected an integer, got 1\.5"),
        (
            '[pretrain]\nmethod = "cdmae"\n[pretrain.pmi]\nwindoww = 3\n',
            r"p\.toml: pretrain\.pmi\.windoww: unknown key",
        ),
        (
            '[pretrain]\nmethod = "cdmae"\n[pretrain.options]\np_dec = "half"\n',
            r"pretrain\.options\.p_dec: expected a number",
        ),
        ("[eval]\nk = true\n", r"p\.toml: eval\.k: expected an integer, got True"),
        (
            '[fusion]\ndense = "r3"\n',
            r"p\.toml: fusion\.dense: must be one of auto, r1, r2 or distill, got 'r3'",
        ),
        ("[typo]\nx = 1\n", r"p\.toml: typo: unknown key \(known: out, seed, profile, data"),
    ],
)
def test_a_pipeline_file_is_refused_naming_the_dotted_key(tmp_path: Path, extra: str, message: str):
    from dense_pt.pipeline import load_pipeline_config

    path = tmp_path / "p.toml"
    path.write_text(PIPELINE + extra)
    with pytest.raises(FormatError, match=message):
        load_pipeline_config(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'method = "cdmae"\n[options]\nsigmaa = 1.0\n',
            r"pt\.toml: options\.sigmaa: unknown key \(known: p_enc, ",
        ),
        (
            'method = "cdmae"\n[train]\nbatch_size = "16"\n',
            r"pt\.toml: train\.batch_size: expected an integer, got '16'",
        ),
        (
            'method = "cdmae"\n[train]\nschedule = "step"\n',
            r"pt\.toml: train\.schedule: must be one of linear, cosine",
        ),
        ('method = "cdmae"\nmax_length = 4\n', r"pt\.toml: max_length: must be >= 8, got 4"),
        ('methd = "cdmae"\n', r"pt\.toml: methd: unknown key \(known: method, paper, "),
        (
            'method = "cdmae"\n[options]\nseed_window = "wide"\n',
            r"options\.seed_window: must be one of strict, band or released",
        ),
    ],
)
def test_a_pretrain_file_is_refused_naming_the_dotted_key(tmp_path: Path, text: str, message: str):
    from dense_pt.pretrain import build_config

    path = tmp_path / "pt.toml"
    path.write_text(text)
    with pytest.raises(FormatError, match=message):
        build_config(path)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "train.adam_epss=1e-6"], "train.adam_epss: unknown key"),
        (["--set", "train.max_steps=ten"], "train.max_steps: expected an integer, got 'ten'"),
        (["--set", "options.p_enc=1.5"], "options.p_enc: must be <= 1, got 1.5"),
        (["--set", "options"], "expected dotted.key=VALUE"),
        (["--lr", "-1"], "dense-pt pretrain: train.lr: must be > 0, got -1.0"),
        (["--set", "train.schedule=step"], "train.schedule: must be one of linear, cosine or constant"),
    ],
)
def test_cli_overrides_are_refused_naming_the_dotted_key(tmp_path: Path, args: list[str], message: str):
    """``--set`` overrides (with or without ``--config``) and the generated options are checked by the
    same models, before anything runs (exit 2: a value the caller gave)."""
    out = tmp_path / "out"
    res = CliRunner().invoke(
        app,
        [
            "pretrain",
            "--method",
            "cdmae",
            "--model",
            str(tmp_path),
            "--corpus",
            str(tmp_path),
            "-o",
            str(out),
            *args,
        ],
    )
    assert isinstance(res.exception, DensePtError), res.output
    assert exit_code(res.exception) == 2 and message in str(res.exception)
    assert not out.exists()


def test_pretrain_help_lists_every_model_field_with_its_default():
    import re

    from dense_pt.config import MethodOptions, PretrainSettings, TrainConfig

    res = CliRunner().invoke(app, ["pretrain", "--help"], terminal_width=200, env={"COLUMNS": "200"})
    assert res.exit_code == 0
    text = re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─]", " ", res.output))
    for model in (PretrainSettings, MethodOptions, TrainConfig):
        for name in model.model_fields:
            if name not in ("options", "train"):
                assert "--" + name.replace("_", "-") in text, name
    # the type is spelled by typer (<float> in recent typer, FLOAT in 0.16): the help and default are ours
    assert re.search(r"--lr (<float>|FLOAT) Peak learning rate\. \[default: \(the method's paper\)\]", text)
    assert re.search(r"--keep-checkpoints (<int>|INTEGER) Checkpoints kept\. \[default: 2\]", text)
    # a closed setting is a choice: `--schedule step` is refused by the option itself (exit 2,
    # naming the names; tests/test_cli_habits.py), the file and --set by the model
