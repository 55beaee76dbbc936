"""The commands' options are generated from their config models (issue 13 item 1): for each command a
bad value and an unknown ``--set`` key are refused naming the key (exit 2, before anything runs), the
Python function behind it refuses the same value with the same dotted-key message, and ``--help``
shows the model's defaults. The pmi defaults are written once (``dense_pt.config.pmi``)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dense_pt.cli import app, exit_code
from dense_pt.config import ConfigError
from dense_pt.config.corpus import CorpusSettings
from dense_pt.config.fusion import FuseSettings
from dense_pt.config.pmi import PmiBuild
from dense_pt.config.retrieval import BM25Settings, EncodeSettings, MineCommand, SearchSettings
from dense_pt.errors import DensePtError

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "dense_pt"


def _train_args(t: Path) -> list[str]:
    return ["--corpus", str(t / "c"), "--queries", str(t / "q"), "--qrels", str(t / "r"), "-o", str(t / "o")]


def _py_train_retriever(t: Path) -> None:
    from dense_pt.config.finetune import RetrieverSettings

    RetrieverSettings(group_size=0)  # the job takes the model: a bad value never reaches it


def _py_train_reranker(t: Path) -> None:
    from dense_pt.config.finetune import RerankerSettings

    RerankerSettings(group_size=1)


def _py_train_distill(t: Path) -> None:
    from dense_pt.config.finetune import DistillSettings

    DistillSettings(alpha=2.0)


def _py_bm25(t: Path) -> None:
    from dense_pt.retrieval.bm25 import bm25_run

    bm25_run(iter(()), {}, BM25Settings(k=0))


def _py_fuse(t: Path) -> None:
    from dense_pt.retrieval.fusion import fuse_files

    fuse_files(t / "a", t / "b", t / "o", FuseSettings(k=0))


def _py_mine(t: Path) -> None:
    from dense_pt.retrieval.negatives import mine_negatives

    mine_negatives({"q": {"d": 1.0}}, {"q": {"p": 1}}, MineCommand(depth=0))


def _py_encode(t: Path) -> None:
    from dense_pt.retrieval.encode import encode

    encode(t / "m", t / "c", t / "o", EncodeSettings(batch_size=0))


def _py_search(t: Path) -> None:
    from dense_pt.retrieval.search import search

    search(t / "q", t / "p", t / "o", SearchSettings(k=0))


def _py_pmi(t: Path) -> None:
    from dense_pt.pmi import build

    build(t / "c", t / "o", PmiBuild(max_n=0))


def _py_corpus(t: Path) -> None:
    from dense_pt.data.build import build_corpus_store

    build_corpus_store(t / "c.jsonl", t / "tok", t / "o", CorpusSettings(batch_size=0))


def _py_expand(t: Path) -> None:
    from dense_pt.config.expand import ExpandSettings

    ExpandSettings(num_queries=0)  # expand takes the model: a bad value never reaches it


def _py_evaluate(t: Path) -> None:
    from dense_pt.evaluation import evaluate_run

    evaluate_run({"q": {"d": 1.0}}, {"q": {"d": 1}}, rel_level=0)


# command, its required arguments, a bad option, the message both refusals share, the Python call
CASES: list[tuple[str, Callable[[Path], list[str]], list[str], str, Callable[[Path], None]]] = [
    ("train retriever", lambda t: ["train", "retriever", str(t / "m"), *_train_args(t)], ["--group-size", "0"],
     "group_size: must be >= 1, got 0", _py_train_retriever),
    ("train reranker", lambda t: ["train", "reranker", str(t / "m"), *_train_args(t), "--negatives", str(t / "n")],
     ["--group-size", "1"], "group_size: must be >= 2, got 1", _py_train_reranker),
    ("train distill", lambda t: ["train", "distill", str(t / "m"), *_train_args(t), "--scores", str(t / "s")],
     ["--alpha", "2"], "alpha: must be <= 1, got 2.0", _py_train_distill),
    ("bm25", lambda t: ["bm25", str(t / "c"), "--queries", str(t / "q"), "-o", str(t / "o")], ["-k", "0"],
     "k: must be >= 1, got 0", _py_bm25),
    ("fuse", lambda t: ["fuse", str(t / "a"), str(t / "b"), "-o", str(t / "o")], ["-k", "0"],
     "k: must be >= 1, got 0", _py_fuse),
    ("negatives mine", lambda t: ["negatives", "mine", str(t / "run"), "--qrels", str(t / "r"), "-o", str(t / "n")],
     ["--depth", "0"], "depth: must be >= 1, got 0", _py_mine),
    ("encode", lambda t: ["encode", str(t / "m"), str(t / "c"), "-o", str(t / "o")], ["--batch-size", "0"],
     "batch_size: must be >= 1, got 0", _py_encode),
    ("search", lambda t: ["search", str(t / "q"), str(t / "p"), "-o", str(t / "o")], ["-k", "0"],
     "k: must be >= 1, got 0", _py_search),
    ("pmi build", lambda t: ["pmi", "build", str(t / "c"), "-o", str(t / "o")], ["--max-n", "0"],
     "max_n: must be >= 1, got 0", _py_pmi),
    ("corpus build", lambda t: ["corpus", "build", str(t / "c.jsonl"), "-t", str(t / "tok"), "-o", str(t / "o")],
     ["--batch-size", "0"], "batch_size: must be >= 1, got 0", _py_corpus),
    ("expand", lambda t: ["expand", "--model", "m", "--corpus", str(t / "c"), "-o", str(t / "o")],
     ["--num-queries", "0"], "num_queries: must be >= 1, got 0", _py_expand),
    ("evaluate", lambda t: ["evaluate", str(t / "run"), "--qrels", str(t / "r")], ["--rel-level", "0"],
     "rel_level: must be >= 1, got 0", _py_evaluate),
]  # fmt: skip
IDS = [c[0] for c in CASES]


def _refused(args: list[str]) -> DensePtError:
    res = CliRunner().invoke(app, args)
    assert isinstance(res.exception, DensePtError), (res.output, res.exception)
    assert exit_code(res.exception) == 2
    return res.exception


@pytest.mark.parametrize(("name", "argv", "bad", "message", "python"), CASES, ids=IDS)
def test_a_bad_value_is_refused_alike_by_the_cli_and_python(
    tmp_path: Path, name: str, argv: Any, bad: list[str], message: str, python: Any
):
    exc = _refused([*argv(tmp_path), *bad])
    assert isinstance(exc, ConfigError) and str(exc) == f"dense-pt {name}: {message}"
    with pytest.raises(ConfigError) as info:
        python(tmp_path)
    assert str(info.value) == message
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("name", "argv", "bad", "message", "python"), CASES, ids=IDS)
def test_an_unknown_set_key_is_refused_naming_it(
    tmp_path: Path, name: str, argv: Any, bad: list[str], message: str, python: Any
):
    exc = _refused([*argv(tmp_path), "--set", "no_such_key=1"])
    assert str(exc).startswith("--set: no_such_key: unknown key (known: ")
    key = message.split(":")[0]  # the same keys a --config file takes, and a --set sets them
    exc = _refused([*argv(tmp_path), "--set", f"{key}=0" if key != "alpha" else "alpha=2.0"])
    assert str(exc).startswith(f"--set: {message.split(', got')[0]}")


def test_a_config_file_is_checked_by_the_same_model(tmp_path: Path):
    """``--config``: the stage's keys at the top, the engine's under ``[train]``; errors name the file."""
    path = tmp_path / "r.toml"
    path.write_text('loss = "simlm"\ngroup_size = 4\n[train]\nlr = -1\n')
    exc = _refused(["train", "retriever", str(tmp_path / "m"), *_train_args(tmp_path), "--config", str(path)])
    assert str(exc) == f"{path}: train.lr: must be > 0, got -1"
    path.write_text("[stage]\ngroup_size = 4\n")
    exc = _refused(["train", "retriever", str(tmp_path / "m"), *_train_args(tmp_path), "--config", str(path)])
    assert "stage: unknown key (known: loss, group_size, tau" in str(exc)


def test_options_override_the_file_and_set_key_by_key(tmp_path: Path):
    from dense_pt.cli.options import Table, load_settings, split
    from dense_pt.config import TrainConfig
    from dense_pt.config.finetune import RetrieverCommand

    path = tmp_path / "r.toml"
    path.write_text("group_size = 4\ntau = 0.05\n[train]\nlr = 1e-5\nbatch_size = 8\n")
    tables: list[Table] = [("top", RetrieverCommand), ("train", TrainConfig)]
    given = split({"group_size": 2, "lr": None, "batch_size": 4, "loss": None}, tables)
    s = load_settings(RetrieverCommand, path, ["tau=0.1"], given, "here")
    assert (s.group_size, s.tau, s.loss, s.query_max_length) == (2, 0.1, "simlm", 32)
    assert s.train.model_dump(exclude_none=True) == {"lr": 1e-5, "batch_size": 4}


def _help(args: list[str]) -> str:
    res = CliRunner().invoke(app, [*args, "--help"], terminal_width=200, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    text = re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─]", " ", res.output))
    # the type is spelled by typer (<int> in recent typer, INTEGER in 0.16, the lower bound)
    for old, new in (("INTEGER", "<int>"), ("FLOAT", "<float>"), ("TEXT", "<str>"), ("PATH", "<path>")):
        text = text.replace(f" {old} ", f" {new} ")
    return text


def test_help_shows_the_models_defaults():
    from dense_pt.config.finetune import RerankerSettings, RetrieverSettings
    from dense_pt.config.pmi import PmiCounts
    from dense_pt.config.retrieval import MineSettings

    text = _help(["train", "retriever"])
    group = RetrieverSettings.model_fields["group_size"]
    assert f"--group-size <int> {group.description} [default: {group.default}]" in text
    assert "--passage-max-length <int> Tokens per passage, [CLS] and [SEP] included. [default: 144]" in text
    assert "--lr <float> Peak learning rate. [default: 0.0001]" in text  # TrainConfig's
    assert (
        f"--max-length <int> The whole pair, [CLS] q [SEP] p [SEP]. [default: {RerankerSettings().max_length}]"
        in (_help(["train", "reranker"]))
    )
    depth = MineSettings.model_fields["depth"]
    assert f"--depth <int> {depth.description} [default: {depth.default}]" in _help(["negatives", "mine"])
    assert "--memory-gb <float> " in _help(["pmi", "build"]) and f"[default: {PmiCounts().memory_gb}]" in (
        _help(["pmi", "build"])
    )


def test_every_field_is_an_option():
    """No setting of a converted command is left without its option."""
    from dense_pt.config import TrainConfig
    from dense_pt.config.corpus import CorpusSettings
    from dense_pt.config.evaluation import EvalSettings
    from dense_pt.config.expand import ExpandSettings
    from dense_pt.config.finetune import DistillCommand, RerankerCommand, RetrieverCommand
    from dense_pt.config.fusion import FuseSettings
    from dense_pt.config.pmi import PmiCounts
    from dense_pt.config.retrieval import (
        BM25Settings,
        EncodeSettings,
        MineCommand,
        MineSettings,
        SearchSettings,
    )

    for args, models in [
        (["train", "retriever"], (RetrieverCommand, MineSettings, TrainConfig)),  # [mine]: a refresh's
        (["train", "reranker"], (RerankerCommand, TrainConfig)),
        (["train", "distill"], (DistillCommand, TrainConfig)),
        (["negatives", "mine"], (MineCommand,)),
        (["bm25"], (BM25Settings,)),
        (["fuse"], (FuseSettings,)),
        (["encode"], (EncodeSettings,)),
        (["search"], (SearchSettings,)),
        (["pmi", "build"], (PmiCounts,)),
        (["corpus", "build"], (CorpusSettings,)),
        (["expand"], (ExpandSettings,)),
        (["evaluate"], (EvalSettings,)),
    ]:
        text = _help(args)
        for model in models:
            for name in model.model_fields:
                if name not in ("train", "mine"):  # the tables: their fields are the options
                    assert "--" + name.replace("_", "-") in text, (args, name)


def test_the_pipeline_tables_are_the_commands_models():
    """One model per stage: the pipeline's tables extend the commands' settings (same fields,
    same checks), so a value refused by the command is refused in the pipeline file too."""
    from dense_pt.config import pipeline as P
    from dense_pt.config.finetune import DistillSettings, RerankerSettings, RetrieverSettings
    from dense_pt.config.pmi import PmiSettings
    from dense_pt.config.retrieval import MineSettings

    assert issubclass(P.RetrieverTable, RetrieverSettings) and issubclass(P.DistillTable, DistillSettings)
    assert issubclass(P.RerankerTable, RerankerSettings) and issubclass(P.MineTable, MineSettings)
    assert P.PmiTable is PmiSettings
    from dense_pt.config.fusion import FuseSettings, FusionMethod

    assert issubclass(P.FusionTable, FusionMethod) and issubclass(FuseSettings, FusionMethod)
    from dense_pt.config.evaluation import EvalMeasures, EvalSettings

    assert issubclass(P.EvalTable, EvalMeasures) and issubclass(EvalSettings, EvalMeasures)


def test_pmi_defaults_are_written_once():
    """max_n, min_count, window and memory_gb: every function and option reads dense_pt.config.pmi
    (no literal default for a parameter of those names anywhere in the package)."""
    from dense_pt.config import pmi

    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                a = node.args
                pos = a.posonlyargs + a.args
                pairs = [*zip(pos[len(pos) - len(a.defaults) :], a.defaults, strict=True),
                         *((x, d) for x, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None)]  # fmt: skip
                for arg, default in pairs:
                    if arg.arg in ("max_n", "min_count", "window", "memory_gb") and isinstance(
                        default, ast.Constant
                    ):
                        found.append((path.relative_to(PACKAGE).as_posix(), node.name, arg.arg))
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", "") == "Option"
                and len(node.args) > 1
            ):
                flag = node.args[1]
                if isinstance(flag, ast.Constant) and flag.value in ("--window", "--max-n", "--min-count"):
                    assert not isinstance(node.args[0], ast.Constant), (path, flag.value)
    # top_pmi's min_count filters the n-grams *shown* (the CLI's --top-min-count 5), not those counted
    assert found == [("pmi/table.py", "top_pmi", "min_count")]
    assert (pmi.MAX_N, pmi.MIN_COUNT, pmi.WINDOW, pmi.MEMORY_GB) == (4, 1, 4, 8.0)
