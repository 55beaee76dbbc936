"""The command line's habits (issue 25 item 5), each pinned here:

- every command prints its result as one JSON document on stdout with ``--json`` (text otherwise);
- a closed setting is a choice: its names in ``--help``, a bad one refused naming them (exit 2), the
  shell completing them;
- defaults are printed as values (``[default: 16]``), and one the user did not give reaches the
  command unset, so a ``--config`` file's value wins over it;
- shell completion is on (``--show-completion``), old command names work as hidden aliases;
- ``pipeline run`` and ``study run`` take ``--config`` as well as the positional file;
- no typer or click internal is patched.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path
from typing import Any, get_args

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from cli_helpers import cli_child, leaf_commands, run_cli, subcommand
from dense_pt.cli import ALIASES, app, command_path
from dense_pt.config.pmi import PmiBuild
from dense_pt.config.retrieval import BM25Command, EncodeSettings, MineCommand

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "dense_pt"
TESTS = Path(__file__).resolve().parent


def _flat(text: str) -> str:
    """Help or an error as one line: rich's box characters and line wrapping gone."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def _help(path: list[str]) -> str:
    res = CliRunner().invoke(app, [*path, "--help"], terminal_width=200, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return _flat(res.output)


# ---- --json -------------------------------------------------------------------------------------------
def test_every_command_takes_json():
    """Every command prints a result (a table, a summary, what it wrote): each takes --json."""
    missing = [" ".join(p) for p, cmd in leaf_commands(hidden=True).items()
               if "--json" not in {o for param in cmd.params for o in param.opts}]  # fmt: skip
    assert not missing, missing


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Tiny real inputs: a BEIR folder, a model, its store, embeddings, runs, negatives, n-gram
    tables (whole and two shards), a training log."""
    pytest.importorskip("torch")
    pytest.importorskip("faiss")
    from dense_pt.data.judgements import load_qrels
    from dense_pt.pmi import build
    from dense_pt.retrieval.bm25 import bm25
    from dense_pt.retrieval.encode import encode
    from dense_pt.retrieval.negatives import mine_negatives, write_negatives
    from dense_pt.runs import load_run
    from retrieval_fixtures import tiny_setup

    root = tmp_path_factory.mktemp("habits")
    beir, model, store, _, _ = tiny_setup(root)
    encode(model, store, root / "pemb", EncodeSettings(max_length=64), progress=False)
    encode(model, beir / "queries.jsonl", root / "qemb", progress=False)
    bm25(beir / "corpus.jsonl", beir / "queries.jsonl", root / "run.trec", BM25Command(k=20))
    table = mine_negatives(
        load_run(root / "run.trec"), load_qrels(beir / "qrels" / "train.tsv"), MineCommand(num=4)
    )
    write_negatives(root / "n.dpneg", table)
    for name, shard in (("t.pmi", None), ("t0.pmi", "0/2"), ("t1.pmi", "1/2")):
        build(store, root / name, PmiBuild(memory_gb=0.2, shard=shard))
    (root / "log.jsonl").write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.5}\n')
    return root


QRELS = "{w}/beir/qrels/train.tsv"
# command line ({w}: the world, {t}: this test's folder) and what its document must hold
JSON_CASES: list[tuple[str, list[str], Any]] = [
    ("corpus check", ["corpus", "check", QRELS, "--kind", "qrels"], lambda d: d["records"] == 32 and d["ok"]),
    ("corpus info", ["corpus", "info", "{w}/store"], lambda d: d["rows"] == 48),
    ("corpus build", ["corpus", "build", "{w}/beir/corpus.jsonl", "-t", "{w}/model", "-o", "{t}/s"],
     lambda d: d["built"] and d["passages"] == 48),
    ("corpus train-tokenizer", ["corpus", "train-tokenizer", "{w}/beir/corpus.jsonl", "-o", "{t}/tok.json",
                                "--vocab-size", "120", "--min-frequency", "1"], lambda d: d["vocab_size"] <= 120),
    ("pmi build", ["pmi", "build", "{w}/store", "-o", "{t}/t.pmi", "--memory-gb", "0.2"],
     lambda d: d["passages"] == 48),
    ("pmi merge", ["pmi", "merge", "{w}/t0.pmi", "{w}/t1.pmi", "-o", "{t}/m.pmi"], lambda d: d["parts"] == 2),
    ("pmi score", ["pmi", "score", "{t}/store", "--table", "{w}/t.pmi", "--column", "ami"],
     lambda d: d["column"] == "ami" and d["tokens"] > 0),
    ("pmi inspect", ["pmi", "inspect", "{w}/t.pmi", "--tokenizer", "{w}/store", "--text", "vaccine immune",
                     "--top", "2", "--top-min-count", "1"],
     lambda d: d["max_n"] == 4 and len(d["top_pmi"]["2"]) == 2 and d["ami"][0]["tokens"]),
    ("mask preview", ["mask", "preview", "{w}/store", "--method", "mlm", "--row", "1"], lambda d: d[0]["row"] == 1),
    ("bm25", ["bm25", "{w}/beir/corpus.jsonl", "--queries", "{w}/beir/queries.jsonl", "-o", "{t}/r.trec"],
     lambda d: d["out"].endswith("r.trec")),
    ("bm25 (the index alone)", ["bm25", "{w}/beir/corpus.jsonl"], lambda d: d["passages"] == 48),
    ("encode", ["encode", "{w}/model", "{w}/beir/queries.jsonl", "-o", "{t}/q"],
     lambda d: d["num_rows"] == 16 and d["complete"]),
    ("search", ["search", "{w}/qemb", "{w}/pemb", "-o", "{t}/s.trec", "-k", "5"],
     lambda d: d["queries"] == 16 and d["hits"] == 80),
    ("negatives mine", ["negatives", "mine", "{w}/run.trec", "--qrels", QRELS, "-o", "{t}/n.dpneg"],
     lambda d: d["stats"]["queries"] == 16),
    ("mine-negatives (the old name)", ["mine-negatives", "{w}/run.trec", "--qrels", QRELS, "-o", "{t}/n.dpneg"],
     lambda d: d["stats"]["queries"] == 16),
    ("negatives export", ["negatives", "export", "{w}/n.dpneg", "-o", "{t}/n.tsv"], lambda d: "out" in d),
    ("fuse", ["fuse", "{w}/run.trec", "{t}/run.trec", "-o", "{t}/f.trec", "--method", "rrf"],
     lambda d: d["method"] == "rrf" and d["rrf_k"] == 60),
    ("evaluate", ["evaluate", "{w}/run.trec", "--qrels", QRELS, "-m", "nDCG@10"],
     lambda d: 0 <= d["nDCG@10"] <= 1 and d["settings"]["tie_break"] == "docno"),
    ("plot", ["plot", "{w}/log.jsonl", "-o", "{t}/p.png"], lambda d: d["out"].endswith("p.png")),
    ("runs convert", ["runs", "convert", "{w}/run.trec", "{t}/r.arrow"],
     lambda d: d["format"] == "arrow" and d["queries"] == 16),
    ("runs merge", ["runs", "merge", "{w}/run.trec", "-o", "{t}/m.trec", "--mode", "queries"],
     lambda d: d["mode"] == "queries" and d["queries"] == 16),
]  # fmt: skip


@pytest.mark.parametrize(("name", "argv", "check"), JSON_CASES, ids=[c[0] for c in JSON_CASES])
def test_json_is_one_document_on_stdout(world, tmp_path, capsys, monkeypatch, name, argv, check):
    shutil.copytree(world / "store", tmp_path / "store")  # pmi score adds a column to it
    shutil.copy(world / "run.trec", tmp_path / "run.trec")
    args = [a.format(w=world, t=tmp_path) for a in argv]
    code, out, err = run_cli([*args, "--json"], capsys, monkeypatch)
    assert code == 0, err
    assert check(json.loads(out)), out  # the whole of stdout is the document
    if name == "corpus check":  # without --json: text for a person
        code, out, _ = run_cli(args, capsys, monkeypatch)
        assert code == 0 and out.strip().endswith("ok, 32 judgements")


# Commands too slow to run here for --json alone: each is run with --json by the test named, on
# the real command line (their fixtures train models, or generate text).
JSON_ELSEWHERE = {
    ("expand",): "test_expand.py::test_cli_resumes_after_sigkill",
    ("demo",): "test_demo.py::test_cli_demo_on_a_user_beir_folder",
    ("pipeline", "run"): "test_pipeline_runner.py::test_cli_dry_run_until_and_only_on_the_real_stages",
    ("study", "run"): "test_study.py::test_cli_study",
    ("beir",): "test_beir.py::test_beir_equals_the_commands_it_chains",
    ("hub", "export"): "test_hub.py::test_hub_export_writes_a_card_the_hub_reads",
}
TRAINING = {("train", "retriever"), ("train", "reranker"), ("train", "distill"), ("score",), ("pretrain",)}


def test_every_commands_json_is_parsed_by_a_test():
    """A new command gets a row: here, in the training chain below, or in JSON_ELSEWHERE (whose
    test must run it with --json and read the document)."""
    here = {command_path(argv) for _, argv, _ in JSON_CASES}
    for path, cmd in leaf_commands(hidden=True).items():
        if cmd.hidden:  # an old name: the command of its new one
            continue
        if path in JSON_ELSEWHERE:
            file, test = JSON_ELSEWHERE[path].split("::")
            source = (TESTS / file).read_text()
            body = source[source.index(f"def {test}(") :].split("\ndef ", 1)[0]
            assert '"--json"' in body and "json.loads" in body, (path, JSON_ELSEWHERE[path])
        else:
            assert path in TRAINING or path in here, path


def test_json_of_the_training_commands(world, tmp_path, capsys, monkeypatch):
    """train retriever / reranker / distill, score and pretrain: their manifest or summary as JSON."""
    inputs = ["--corpus", str(world / "store"), "--queries", str(world / "beir" / "queries.jsonl"),
              "--qrels", str(world / "beir" / "qrels" / "train.tsv")]  # fmt: skip
    tiny = ["--max-steps", "1", "--batch-size", "4", "--precision", "fp32", "--warmup", "0", "--json"]

    def run(*argv: str | Path) -> dict[str, Any]:
        code, out, err = run_cli([str(a) for a in argv], capsys, monkeypatch)
        assert code == 0, err
        return json.loads(out)

    neg = world / "n.dpneg"
    r = run("train", "retriever", world / "model", *inputs, "--negatives", neg, "-o", tmp_path / "r", "--group-size",
            "2", *tiny)  # fmt: skip
    assert r["stage"] == "retriever" and r["steps"] == 1 and r["model"] == str(tmp_path / "r" / "model")
    rr = run("train", "reranker", world / "model", *inputs, "--negatives", neg, "-o", tmp_path / "rr",
             "--group-size", "4", "--loss", "listwise", *tiny)  # fmt: skip
    assert rr["stage"] == "reranker" and rr["steps"] == 1
    s = run(
        "score", tmp_path / "rr" / "model", *inputs, "--negatives", neg, "-o", tmp_path / "s.dpneg", "--json"
    )
    assert s["pairs"] > 0 and s["out"] == str(tmp_path / "s.dpneg")
    d = run("train", "distill", tmp_path / "r" / "model", *inputs, "--scores", tmp_path / "s.dpneg",
            "-o", tmp_path / "d", "--group-size", "2", *tiny)  # fmt: skip
    assert d["stage"] == "distill" and d["steps"] == 1
    p = run("pretrain", "--method", "mlm", "--model", world / "model", "--corpus", world / "store",
            "-o", tmp_path / "p", "--max-length", "32", "--quiet", *tiny)  # fmt: skip
    assert p["method"] == "mlm" and p["steps"] == 1 and p["encoder"] == str(tmp_path / "p" / "encoder")


# ---- choices ------------------------------------------------------------------------------------------
def _choice_cases() -> list[tuple[list[str], str, tuple[str, ...]]]:
    from dense_pt.collate import METHODS
    from dense_pt.config import choices as C
    from dense_pt.config.corpus import CorpusFormat
    from dense_pt.config.expand import Chat
    from dense_pt.config.options import Crop, SeedWindow
    from dense_pt.config.retrieval import Dtype, Metric, Pooling
    from dense_pt.config.train import AttnImplementation, Precision, Schedule
    from dense_pt.pipeline.run import STAGES

    CORPUS_FORMATS = get_args(CorpusFormat)
    return [
        (["train", "retriever"], "--loss", tuple(C.LOSS_TAU)),
        (["train", "reranker"], "--loss", tuple(C.RERANKER_FORWARD_FACTOR)),
        (["train", "distill"], "--loss", C.DISTILL_LOSSES),
        (["train", "retriever"], "--pooling", get_args(Pooling)),
        (["train", "retriever"], "--pool", C.POOLS),  # its ANCE refresh's [mine]
        (["train", "reranker"], "--precision", get_args(Precision)),
        (["train", "distill"], "--schedule", get_args(Schedule)),
        (["pretrain"], "--method", C.PRETRAIN_METHODS),
        (["pretrain"], "--crop", get_args(Crop)),
        (["pretrain"], "--seed-window", get_args(SeedWindow)),
        (["pretrain"], "--attn-implementation", get_args(AttnImplementation)),
        (["negatives", "mine"], "--pool", C.POOLS),
        (["negatives", "mine"], "--sampling", C.SAMPLINGS),
        (["negatives", "mine"], "--relative-form", C.RELATIVE_FORMS),
        (["fuse"], "--method", C.FUSION_METHODS),
        (["evaluate"], "--tie-break", C.TIE_BREAKS),
        (["encode"], "--dtype", get_args(Dtype)),
        (["search"], "--metric", get_args(Metric)),
        (["expand"], "--chat", get_args(Chat)),
        (["corpus", "build"], "--format", CORPUS_FORMATS),
        (["corpus", "train-tokenizer"], "--format", CORPUS_FORMATS),
        (["corpus", "check"], "--kind", ("corpus", "queries", "qrels", "run")),
        (["pmi", "score"], "--dtype", ("float32", "float16")),
        (["mask", "preview"], "--method", METHODS),
        (["pipeline", "run"], "--until", STAGES),
        (["pipeline", "run"], "--only", STAGES),
    ]


CHOICES = _choice_cases()


@pytest.mark.parametrize(
    ("path", "flag", "names"), CHOICES, ids=[f"{' '.join(c[0])} {c[1]}" for c in CHOICES]
)
def test_a_closed_setting_is_a_choice(path, flag, names):
    """Shown in --help (as <a|b|c>, or in the help text when the list is long), a bad name refused
    before anything runs naming the valid ones (exit 2), the names completed by the shell."""
    text = _help(path)
    row = text[text.index(f"{flag} ") :][:600]
    assert re.search(r"[<\[]" + re.escape("|".join(names)) + r"[>\]]", row) or all(n in row for n in names), (
        row
    )
    res = CliRunner().invoke(app, [*path, flag, "no-such-name"])
    said = _flat(res.output)
    assert res.exit_code == 2 and f"Invalid value for '{flag}'" in said, said
    assert "'no-such-name' is not one of " + ", ".join(f"'{n}'" for n in names) in said, said
    words = ["dense-pt", *path, flag, ""]
    env = {
        "_DENSE_PT_COMPLETE": "complete_bash",
        "COMP_WORDS": " ".join(words),
        "COMP_CWORD": str(len(words) - 1),
    }
    res = CliRunner().invoke(app, [], prog_name="dense-pt", env=env)
    assert res.output.split() == list(names), res.output


def test_a_choice_reaches_the_model_as_its_name():
    """The command receives a plain str (not the Enum typer parses it into): the settings file,
    the manifests and the messages hold 'infonce', not 'Choice.infonce'."""
    from dense_pt.cli.options import load_settings, model_options, split, with_model_options
    from dense_pt.config.finetune import RetrieverCommand

    seen: dict[str, Any] = {}

    def fn(config: Path | None = None, **values: Any) -> None:
        seen.update(values)
        seen["model"] = load_settings(RetrieverCommand, config, [], split(values, TABLES), "here")

    TABLES = [("top", RetrieverCommand)]
    probe = typer.Typer()
    probe.command()(with_model_options(fn, model_options(TABLES)))
    res = CliRunner().invoke(probe, ["--loss", "infonce", "--group-size", "3"])
    assert res.exit_code == 0, res.output
    assert type(seen["loss"]) is str and seen["model"].loss == "infonce" and seen["group_size"] == 3
    assert seen["tau"] is None and seen["passage_max_length"] is None  # not given: unset


# ---- defaults -----------------------------------------------------------------------------------------
# The defaults that are descriptions, not values (click prints a description in parentheses).
DESCRIBED = {"(the method's paper)", "(' ')"}


def test_defaults_are_printed_as_values():
    """No `[default: (16)]` (a value printed as a description) or `[default: None]` in any help."""
    for path, cmd in leaf_commands(hidden=True).items():
        if cmd.hidden:
            continue
        for shown in re.findall(r"\[default: ([^\]]*)\]", _help(list(path))):
            assert shown != "None" and (not shown.startswith("(") or shown in DESCRIBED), (path, shown)
    text = _help(["train", "retriever"])
    assert "--group-size <int> 1 positive + n-1 negatives per query. [default: 16]" in text.replace(
        "INTEGER", "<int>"
    )
    assert "--loss <simlm|simlm-eq3|infonce|triplet>" in text.replace("[simlm", "<simlm").replace(
        "triplet]", "triplet>"
    )


def test_a_file_value_wins_over_a_shown_default(tmp_path):
    """The shown default is the model's, but an option the user did not give is unset: the
    --config file's value applies (and an option given wins over the file)."""
    from dense_pt.cli.options import load_settings, model_options, split, with_model_options
    from dense_pt.config.retrieval import MineCommand

    tables = [("top", MineCommand)]
    got: list[Any] = []

    def fn(config: Path | None = typer.Option(None, "--config"), **values: Any) -> None:
        got.append(load_settings(MineCommand, config, [], split(values, tables), "here"))

    probe = typer.Typer()
    probe.command()(with_model_options(fn, model_options(tables)))
    (tmp_path / "m.toml").write_text('depth = 7\npool = "filtered"\n')
    for argv, depth, pool in (([], 200, "rank"), (["--config", str(tmp_path / "m.toml")], 7, "filtered"),
                              (["--config", str(tmp_path / "m.toml"), "--depth", "9"], 9, "filtered")):  # fmt: skip
        res = CliRunner().invoke(probe, argv)
        assert res.exit_code == 0, res.output
        assert (got[-1].depth, got[-1].pool) == (depth, pool), argv


# ---- completion, aliases, --config ---------------------------------------------------------------------
def test_completion_scripts_and_completions():
    res = CliRunner().invoke(app, ["--show-completion", "bash"], prog_name="dense-pt")
    out = res.stdout
    assert res.exit_code == 0, res.output
    assert (
        "_DENSE_PT_COMPLETE=complete_bash" in out
        and "complete -o default -F _dense_pt_completion dense-pt" in out
    )
    assert "--install-completion" in _help([]) and "--show-completion" in _help([])
    # through the installed entry point (a fresh interpreter, as the shell calls it): commands,
    # then a choice's names; an old name is never offered
    for words, want in ((["neg"], ["negatives"]), (["train", "retriever", "--pool", ""], ["rank", "rank+positives",
                                                                                            "filtered"])):  # fmt: skip
        env = {"_DENSE_PT_COMPLETE": "complete_bash", "COMP_WORDS": " ".join(["dense-pt", *words]),
               "COMP_CWORD": str(len(words))}  # fmt: skip
        proc = cli_child([], env)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and out.split() == want, (out, err)


def test_old_names_work_and_are_hidden():
    root = typer.main.get_command(app)
    listed = _help([])
    assert ALIASES == {"mine-negatives": ("negatives", "mine"), "negatives-export": ("negatives", "export")}
    for old, now in ALIASES.items():
        cmd, new = subcommand(root, old), subcommand(root, *now)
        assert cmd.hidden and f" {old} " not in listed and not new.hidden
        assert [p.name for p in cmd.params] == [p.name for p in new.params]
        assert f"The old name of `dense-pt {' '.join(now)}`" in _help([old])
    # the same command: the same refusal, naming the command by its name now
    for argv in (["mine-negatives"], ["negatives", "mine"]):
        res = CliRunner().invoke(app, [*argv, "run.trec", "--qrels", "q", "-o", "n", "--depth", "0"])
        assert str(res.exception) == "dense-pt negatives mine: depth: must be >= 1, got 0"


def test_pipeline_and_study_take_config_as_an_option(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    from test_pipeline_config import _tiny_pipeline

    path = _tiny_pipeline(tmp_path)
    plans = [run_cli(["pipeline", "run", *argv, "--dry-run"], capsys, monkeypatch)
             for argv in ([str(path)], ["--config", str(path)], [str(path), "--config", str(path)])]  # fmt: skip
    assert plans[0][0] == 0 and plans[0] == plans[1] == plans[2]
    code, _, err = run_cli(
        ["pipeline", "run", str(path), "--config", str(tmp_path / "other.toml")], capsys, monkeypatch
    )
    assert code == 2 and "give the config file once" in err
    for group in ("pipeline", "study"):
        code, _, err = run_cli([group, "run"], capsys, monkeypatch)
        assert code == 2 and "give the config file: CONFIG or --config CONFIG" in err


# ---- no patched internals -----------------------------------------------------------------------------
def test_no_typer_or_click_internal_is_patched():
    """The CLI uses typer's and click's public API only: nothing assigns to an attribute of their
    modules or classes, nothing imports their private modules; typer's help code is its own."""
    for path in sorted((PACKAGE / "cli").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else [])  # fmt: skip
            for t in targets:
                root = t
                while isinstance(root, ast.Attribute):
                    root = root.value
                assert not (isinstance(t, ast.Attribute) and isinstance(root, ast.Name)
                            and root.id in ("typer", "click")), (path, ast.unparse(t))  # fmt: skip
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setattr" and node.args:
                assert not ast.unparse(node.args[0]).startswith(("typer", "click")), path
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not re.match(r"(typer|click)(\.|$)_|(typer|click)\._", node.module), (
                    path,
                    node.module,
                )
    import typer.core

    for name in ("display_type_rich", "format_help", "get_help_record", "make_metavar"):
        fn = getattr(typer.core.TyperOption, name, None)
        assert fn is None or fn.__module__.startswith(("typer", "click")), name
