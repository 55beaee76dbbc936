"""Issue 25's "objects travel whole" on the fine-tuning side: each job function takes its
validated models (what it reads and writes, its settings, the engine's ``TrainConfig``), so

- no job function takes more than 6 parameters;
- a dummy field written into ``RetrieverSettings``' and ``RerankerSettings``' source, and nothing
  else, is an option of ``dense-pt train retriever | reranker``, a key of ``--set`` and of the
  pipeline's ``[r1]`` / ``[reranker]`` tables, and reaches the job and its manifest."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _jobs() -> dict[str, object]:
    """The functions the commands and the pipeline's stages call to do a job."""
    from dense_pt.expansion import expand
    from dense_pt.finetune.stages import score_negatives, train_distill, train_reranker, train_retriever
    from dense_pt.pretrain import run_pretrain

    return {
        f.__name__: f
        for f in (train_retriever, train_distill, train_reranker, score_negatives, expand, run_pretrain)
    }


def test_no_job_function_takes_more_than_six_parameters():
    counts = {name: len(inspect.signature(f).parameters) for name, f in _jobs().items()}  # type: ignore[arg-type]
    assert all(n <= 6 for n in counts.values()), counts
    # the settings arrive as one model each, not as keywords
    from dense_pt.config.expand import ExpandSettings
    from dense_pt.config.finetune import RerankerSettings, RetrieverSettings

    hints = {name: inspect.signature(f).parameters for name, f in _jobs().items()}  # type: ignore[arg-type]
    assert "RetrieverSettings" in str(hints["train_retriever"]["settings"].annotation)
    assert "RerankerSettings" in str(hints["train_reranker"]["settings"].annotation)
    assert "ExpandSettings" in str(hints["expand"]["settings"].annotation)
    assert not set(RetrieverSettings.model_fields) & set(hints["train_retriever"])
    assert not set(RerankerSettings.model_fields) & set(hints["train_reranker"])
    assert not set(ExpandSettings.model_fields) & set(hints["expand"])


# A dummy field written into two models' source (an import hook inserts the lines when
# dense_pt.config.finetune is imported), and nothing else: the command line, --set and the
# pipeline's tables all reach the job, and the job's manifest records it.
PROBE = textwrap.dedent(
    """
    import importlib.abc, importlib.util, json, sys
    from pathlib import Path

    TARGET = "dense_pt.config.finetune"
    FIELD = '    probe: int = Field(0, ge=0, description="A dummy setting (tests/test_objects_whole.py).")\\n\\n'

    class WithProbe(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path, target=None):
            if name != TARGET:
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            self.origin = spec.origin
            return importlib.util.spec_from_file_location(name, spec.origin, loader=self)

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            src = Path(self.origin).read_text()
            for model in ("RetrieverSettings", "RerankerSettings"):
                anchor = f'    @model_validator(mode="after")\\n    def check_loss(self) -> {model}:\\n'
                assert src.count(anchor) == 1
                src = src.replace(anchor, FIELD + anchor)
            exec(compile(src, self.origin, "exec"), module.__dict__)

    sys.meta_path.insert(0, WithProbe())
    sys.path.insert(0, sys.argv[2])
    from typer.testing import CliRunner

    import dense_pt.finetune.stages as stages
    from dense_pt.cli import app
    from dense_pt.retrieval.negatives import NegativesTable, write_negatives
    from retrieval_fixtures import tiny_setup

    base = Path(sys.argv[1])
    beir, model, store, _queries, qrels = tiny_setup(base)
    docs = sorted({d for q in qrels.values() for d in q})
    write_negatives(base / "neg.dpneg", NegativesTable(
        {q: [(d, 1.0) for d in docs if q_docs.get(d, 0) <= 0][:4] for q, q_docs in qrels.items()}))
    files = ["--corpus", str(store), "--queries", str(beir / "queries.jsonl"), "--qrels",
             str(beir / "qrels" / "train.tsv"), "--negatives", str(base / "neg.dpneg")]
    engine = ["--max-steps", "1", "--batch-size", "2", "--warmup", "0", "--precision", "fp32"]
    got = {}
    for kind, given in (("retriever", ["--probe", "3"]), ("reranker", ["--set", "probe=5", "--loss", "listwise"])):
        out = base / kind
        res = CliRunner().invoke(app, ["train", kind, str(model), *files, "-o", str(out), "--group-size", "2",
                                       *engine, *given])
        assert res.exit_code == 0, (res.output, res.exception)
        got[kind] = json.loads((out / "manifest.json").read_text())["settings"]["probe"]

    # the pipeline: [r1] / [reranker] keys, passed whole by their stages to the jobs
    import dense_pt.pipeline.common as C
    from dense_pt.pipeline.config import validate_config
    from dense_pt.pipeline.runner import Context
    from dense_pt.pipeline.stages import reranker as reranker_stage
    from test_pipeline_fingerprints import DATA, FILES

    for rel, text in FILES.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)
    raw = {"out": "runs/out", "data": DATA, "model": {"init": "model"}, "r1": {"probe": 4},
           "reranker": {"init": "model", "probe": 6}}
    ctx = Context(validate_config(raw, base, "p.toml"), log=lambda _: None)

    class Seen(Exception):
        pass

    def job_sees(inputs, settings, *args, **kw):
        got["pipeline " + type(settings).__name__] = settings.probe
        raise Seen

    stages.train_retriever = stages.train_reranker = job_sees
    C.train_ids = lambda ctx: ["q1"]
    C.mine_from = lambda *a, **k: {}
    for run in (lambda: C.train_retriever_stage(ctx, base / "r1", ctx.cfg.r1, base / "model"),
                lambda: reranker_stage.run(ctx, base / "rr")):
        try:
            run()
        except Seen:
            pass
    got["bad"] = str(CliRunner().invoke(app, ["train", "retriever", str(model), *files, "-o",
                                              str(base / "bad"), "--probe", "-1"]).exception)
    print(json.dumps(got))
    """
)


@pytest.mark.slow  # a fresh interpreter (torch, the CLI), a tiny store and two 1-step trainings: ~15 s
def run_probe(source: str, tmp_path: Path) -> dict:
    """Run a probe script (a dummy field patched into the models) in a fresh interpreter; its last
    stdout line is the JSON of what reached the jobs."""
    script = tmp_path / "probe.py"
    script.write_text(source)
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path), str(ROOT / "tests")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_new_fine_tuning_setting_is_one_field_in_one_model(tmp_path):
    got = run_probe(PROBE, tmp_path)
    assert got["retriever"] == 3 and got["reranker"] == 5  # an option, --set: in the job's manifest
    assert got["pipeline RetrieverTable"] == 4 and got["pipeline RerankerTable"] == 6  # tables, whole
    assert "probe: must be >= 0, got -1" in got["bad"]


# --- the retrieval and data side (issue 32 item 2) ----------------------------------------------


def _retrieval_jobs() -> dict[str, tuple[object, type]]:
    """The functions the retrieval and data commands, the pipeline's stages and the ANCE refresh
    call, each with the model it takes whole."""
    from dense_pt.config.corpus import CorpusSettings
    from dense_pt.config.fusion import FuseSettings
    from dense_pt.config.pmi import PmiBuild
    from dense_pt.config.retrieval import (
        BM25Command,
        BM25Settings,
        EncodeSettings,
        MineCommand,
        SearchSettings,
    )
    from dense_pt.data.build import build_corpus_store
    from dense_pt.pmi import build
    from dense_pt.retrieval.bm25 import bm25, bm25_index, bm25_run
    from dense_pt.retrieval.encode import encode
    from dense_pt.retrieval.fusion import fuse_files
    from dense_pt.retrieval.negatives import mine, mine_negatives
    from dense_pt.retrieval.search import search, search_file

    return {
        "encode": (encode, EncodeSettings),
        "search": (search, SearchSettings),
        "search_file": (search_file, SearchSettings),
        "bm25": (bm25, BM25Command),
        "bm25_index": (bm25_index, BM25Settings),
        "bm25_run": (bm25_run, BM25Settings),
        "build_corpus_store": (build_corpus_store, CorpusSettings),
        "pmi build": (build, PmiBuild),
        "fuse_files": (fuse_files, FuseSettings),
        "mine_negatives": (mine_negatives, MineCommand),
        "mine": (mine, MineCommand),
    }


def test_no_retrieval_or_data_job_takes_more_than_six_parameters():
    for name, (f, model) in _retrieval_jobs().items():
        params = inspect.signature(f).parameters  # type: ignore[arg-type]
        assert len(params) <= 6, (name, list(params))
        assert all(p.kind is not p.VAR_KEYWORD for p in params.values()), name  # no **settings
        assert model.__name__ in str(params["settings"].annotation), name
        fields = set(model.model_fields)  # type: ignore[attr-defined]
        assert not fields & set(params), (name, fields & set(params))  # the fields come in the model only


def test_the_library_validates_no_settings_twice_and_the_cli_spreads_none():
    """A job builds its model only for a default (``Model()``), never again from fields; no
    command spreads a model into keywords (``**s.model_dump()``); the refresh declares no filter
    list of its own."""
    import ast
    import re

    for name, (f, model) in _retrieval_jobs().items():
        fn = ast.parse(textwrap.dedent(inspect.getsource(f))).body[0]  # type: ignore[arg-type]
        assert isinstance(fn, ast.FunctionDef)
        body = fn.body[1:] if ast.get_docstring(fn) is not None else fn.body  # its code, not its examples
        src = "\n".join(ast.unparse(n) for n in body)
        built = re.findall(rf"\b{model.__name__}(?:\.load|\.model_validate)?\((.*?)\)", src)
        assert all(b == "" for b in built), (name, built)
    cli = ROOT / "python" / "dense_pt" / "cli"
    spreads = [
        f"{p.name}:{i}"
        for p in sorted(cli.glob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"\*\*\w+\.model_dump\(", line)
    ]
    assert not spreads, spreads
    refresh = (ROOT / "python" / "dense_pt" / "finetune" / "refresh.py").read_text()
    assert "FILTERS" not in refresh and 'absolute_margin", "relative_margin' not in refresh


def test_the_miner_has_one_call_path():
    """The command, the pipeline and the ANCE refresh each build a ``MineCommand`` and call
    ``retrieval.negatives.mine``; nothing else in the package mines."""
    import ast

    callers: dict[str, set[str]] = {}
    for path in sorted((ROOT / "python" / "dense_pt").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute):
                called = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                if called in ("mine", "mine_negatives", "Miner"):
                    callers.setdefault(called, set()).add(path.relative_to(ROOT / "python").as_posix())
    assert callers == {
        "mine": {"dense_pt/cli/retrieval.py", "dense_pt/pipeline/common.py", "dense_pt/finetune/refresh.py",
                 "dense_pt/retrieval/negatives.py"},  # the last: mine_negatives, which returns Python objects
        "Miner": {"dense_pt/retrieval/negatives.py"},
    }, callers  # fmt: skip


# A dummy field written into each retrieval and data model's source (an import hook inserts it
# when the config modules are imported), and nothing else: each command's option reaches its job,
# and the job's manifest (or its summary, where it writes none) records it; the pipeline's [mine]
# table and the refresh's mining settings reach the one miner.
RETRIEVAL_PROBE = textwrap.dedent(
    """
    import importlib.abc, importlib.util, json, re, shutil, sys
    from pathlib import Path

    MODELS = {
        "dense_pt.config.retrieval": ("MineSettings", "EncodeSettings", "BM25Settings", "SearchSettings"),
        "dense_pt.config.corpus": ("CorpusSettings",),
        "dense_pt.config.pmi": ("PmiCounts",),
        "dense_pt.config.fusion": ("FuseSettings",),
    }
    FIELD = '    probe: int = Field(0, ge=0, description="A dummy setting (tests/test_objects_whole.py).")\\n'
    DOC = '"' * 3  # a model's docstring quotes

    class WithProbe(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path, target=None):
            if name not in MODELS:
                return None
            sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            return importlib.util.spec_from_file_location(name, spec.origin, loader=self)

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            src = Path(module.__spec__.origin).read_text()
            for model in MODELS[module.__name__]:
                head = re.search(rf"^class {model}\\(.*?\\):\\n    {DOC}.*?{DOC}\\n", src, re.S | re.M)
                assert head, model
                src = src[: head.end()] + FIELD + src[head.end() :]
            exec(compile(src, module.__spec__.origin, "exec"), module.__dict__)

    sys.meta_path.insert(0, WithProbe())
    sys.path.insert(0, sys.argv[2])
    from typer.testing import CliRunner

    import dense_pt.retrieval.bm25 as bm25_module
    import dense_pt.retrieval.negatives as negatives
    import dense_pt.retrieval.search as search_module
    from dense_pt.cli import app
    from retrieval_fixtures import tiny_setup

    base = Path(sys.argv[1])
    beir, model, store, _queries, qrels = tiny_setup(base)
    got = {}

    def spy(module, name, key):
        real = getattr(module, name)

        def seen(*args, **kw):
            settings = kw.get("settings", args[3] if len(args) > 3 else args[2])
            got.setdefault(key, []).append(settings.probe)
            return real(*args, **kw)

        setattr(module, name, seen)

    spy(search_module, "search_file", "search")
    spy(bm25_module, "bm25", "bm25")
    spy(negatives, "mine", "mine")

    def cli(*argv):
        res = CliRunner().invoke(app, [*map(str, argv), "--json"])
        assert res.exit_code == 0, (argv, res.output, res.exception)
        return json.loads(res.stdout)

    manifest = lambda p: json.loads(Path(p).read_text())
    cli("corpus", "build", beir / "corpus.jsonl", "-t", model, "-o", base / "store2", "--max-length", "64", "--probe", "1")
    got["corpus build"] = manifest(base / "store2" / "manifest.json")["settings"]["probe"]
    got["pmi build"] = cli("pmi", "build", store, "-o", base / "t.pmi", "--probe", "2")["settings"]["probe"]
    for source, out in ((store, "pemb"), (beir / "queries.jsonl", "qemb")):
        cli("encode", model, source, "-o", base / out, "--device", "cpu", "--probe", "3")
        got.setdefault("encode", []).append(manifest(base / out / "manifest.json")["encode_settings"]["probe"])
    cli("search", base / "qemb", base / "pemb", "-o", base / "dense.arrow", "-k", "8", "--probe", "4")
    cli("bm25", beir / "corpus.jsonl", "--queries", beir / "queries.jsonl", "-o", base / "bm25.arrow",
        "--index", base / "index", "-k", "8", "--probe", "5")
    got["fuse"] = cli("fuse", base / "bm25.arrow", base / "dense.arrow", "-o", base / "fused.arrow",
                      "--method", "rrf", "--probe", "6")["settings"]["probe"]
    cli("negatives", "mine", base / "dense.arrow", "--qrels", beir / "qrels" / "train.tsv", "-o",
        base / "n.dpneg", "--probe", "7")
    got["negatives mine"] = manifest(base / "n.dpneg.manifest.json")["settings"]["probe"]

    # the pipeline's [mine] table, passed to the one miner
    import dense_pt.data
    import dense_pt.pipeline.common as C
    from dense_pt.pipeline.config import validate_config
    from dense_pt.pipeline.runner import Context
    from test_pipeline_fingerprints import DATA, FILES

    for rel, text in FILES.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)
    raw = {"out": "runs/out", "data": DATA, "model": {"init": "model"}, "mine": {"probe": 8}}
    ctx = Context(validate_config(raw, base, "p.toml"), log=lambda _: None)
    dense_pt.data.load_qrels = lambda path: qrels  # the split's file: what this check does not need
    C.mine_from(ctx, base / "dense.arrow", base / "pipeline.dpneg", 4, 2, None)

    # the ANCE refresh: its mining settings whole, recorded in its refresh.json
    from dense_pt.config.finetune import RefreshSettings
    from dense_pt.config.retrieval import MineSettings
    from dense_pt.finetune.refresh import DONE, NegativesRefresh

    refresh = NegativesRefresh(base / "ance", 1, RefreshSettings(mine=MineSettings(depth=4, probe=9)), 0, None, {},
                               qrels, None, None)
    folder = refresh.folder(1)
    folder.mkdir(parents=True)
    for emb in ("qemb", "pemb"):
        shutil.copytree(base / emb, folder / {"qemb": "emb_queries", "pemb": "emb_passages"}[emb])
    refresh._mine(folder, 1, 1, 0.0)
    got["refresh.json"] = manifest(folder / DONE)["mine"]["probe"]
    res = CliRunner().invoke(app, ["search", str(base / "qemb"), str(base / "pemb"), "-o", str(base / "x"),
                                   "--probe", "-1"])
    got["bad"] = str(res.exception)
    print(json.dumps(got))
    """
)


@pytest.mark.slow  # a fresh interpreter (torch, the CLI), a tiny store, two encodings: ~20 s
def test_a_new_retrieval_setting_is_one_field_in_one_model(tmp_path):
    got = run_probe(RETRIEVAL_PROBE, tmp_path)
    assert got["corpus build"] == 1 and got["pmi build"] == 2 and got["encode"] == [3, 3]  # in the outputs
    assert got["search"] == [4] and got["bm25"] == [5] and got["fuse"] == 6  # the jobs see the option
    assert got["negatives mine"] == 7  # the command's manifest
    assert (
        got["mine"] == [7, 8, 9] and got["refresh.json"] == 9
    )  # one miner: the command, the pipeline, the refresh
    assert "probe: must be >= 0, got -1" in got["bad"]
