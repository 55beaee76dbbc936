"""Nothing lost, ever: every command that writes, run through the real command line with a file of
the user's already in the place it writes to, leaves that file as it was.

The rule (docs/errors.md, "Nothing lost"): dense-pt deletes or replaces only what it
can prove it wrote (a folder whose ``manifest.json`` says so, ``dense_pt.artifacts.claim``; in
folders of older versions, the mark ``.dense-pt.json``); an existing file, or a non-empty folder it did not write, is refused unless
``--force``; a name the user gives (a study's objective) is checked as a plain name and never
leads out of the output folder.

Each row of CASES: the command line (``{user}``: a file of the user's, ``{userdir}``: a folder of the
user's holding ``notes.txt``; ``{world}``: the tiny inputs), the exit code and the message. The
inputs are real where they are cheap (a store, embeddings, a run, negatives, an n-gram table), so
that without the check the command would get on with the writing.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("faiss")

from cli_helpers import run_cli, subgroup
from dense_pt.config.pmi import PmiBuild
from dense_pt.config.retrieval import BM25Command, EncodeSettings, MineCommand
from retrieval_fixtures import tiny_setup

USER = "the user's own words, not to be lost\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from dense_pt.data.judgements import load_qrels
    from dense_pt.pmi import build
    from dense_pt.retrieval.bm25 import bm25
    from dense_pt.retrieval.encode import encode
    from dense_pt.retrieval.negatives import mine_negatives, write_negatives
    from dense_pt.runs import load_run, write_run

    root = tmp_path_factory.mktemp("world")
    beir, model, store, _, _ = tiny_setup(root)
    encode(model, store, root / "pemb", EncodeSettings(max_length=64), progress=False)
    encode(model, beir / "queries.jsonl", root / "qemb", progress=False)
    bm25(beir / "corpus.jsonl", beir / "queries.jsonl", root / "run.trec", BM25Command(k=20))
    write_run(root / "dense.trec", load_run(root / "run.trec"))
    table = mine_negatives(
        load_run(root / "run.trec"), load_qrels(beir / "qrels" / "train.tsv"), MineCommand(num=4)
    )
    write_negatives(root / "n.dpneg", table)
    build(store, root / "t.pmi", PmiBuild(memory_gb=0.2))
    (root / "log.jsonl").write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.5}\n')
    return root


@dataclass
class Case:
    name: str
    argv: list[str]
    message: str  # regex on the error line
    code: int = 1


TRAIN = ["--corpus", "{world}/store", "--queries", "{world}/beir/queries.jsonl",
         "--qrels", "{world}/beir/qrels/train.tsv"]  # fmt: skip
REFUSED_FILE = r"{user} already exists \(use --force to replace it\)"
REFUSED_DIR = r"{userdir} is not empty and dense-pt did not write it .*pass --force to write into it"
CASES = [
    # ---- commands that write one file: an existing file is refused ----------------------------------
    Case("bm25", ["bm25", "{world}/beir/corpus.jsonl", "--queries", "{world}/beir/queries.jsonl", "-o", "{user}"],
         REFUSED_FILE),
    Case("search", ["search", "{world}/qemb", "{world}/pemb", "-o", "{user}"], REFUSED_FILE),
    Case("fuse", ["fuse", "{world}/run.trec", "{world}/dense.trec", "-o", "{user}"], REFUSED_FILE),
    Case("negatives mine", ["negatives", "mine", "{world}/run.trec", "--qrels", "{world}/beir/qrels/train.tsv",
                            "-o", "{user}"], REFUSED_FILE),
    Case("negatives mine: the manifest beside the output",
         ["negatives", "mine", "{world}/run.trec", "--qrels", "{world}/beir/qrels/train.tsv", "-o", "{tmp}/n"],
         r"{tmp}/n\.manifest\.json already exists"),
    Case("negatives mine --text", ["negatives", "mine", "{world}/run.trec", "--qrels",
                                   "{world}/beir/qrels/train.tsv", "-o", "{tmp}/new.dpneg", "--text", "{user}"],
         REFUSED_FILE),
    Case("negatives export", ["negatives", "export", "{world}/n.dpneg", "-o", "{user}"], REFUSED_FILE),
    Case("score", ["score", "{world}/model", *TRAIN, "--negatives", "{world}/n.dpneg", "-o", "{user}"],
         REFUSED_FILE),
    Case("pmi build", ["pmi", "build", "{world}/store", "-o", "{user}"], REFUSED_FILE),
    Case("pmi merge", ["pmi", "merge", "{world}/t.pmi", "-o", "{user}"], REFUSED_FILE),
    Case("plot", ["plot", "{world}/log.jsonl", "-o", "{user}"], REFUSED_FILE),
    Case("runs convert", ["runs", "convert", "{world}/run.trec", "{user}"], REFUSED_FILE),
    Case("runs merge", ["runs", "merge", "{world}/run.trec", "-o", "{user}"], REFUSED_FILE),
    Case("corpus train-tokenizer", ["corpus", "train-tokenizer", "{world}/beir/corpus.jsonl", "-o", "{user}"],
         REFUSED_FILE),
    # ---- commands that write a folder: a non-empty folder dense-pt did not write is refused ---------
    Case("corpus build", ["corpus", "build", "{world}/beir/corpus.jsonl", "-t", "{world}/model", "-o", "{userdir}"],
         r"{userdir} already holds something that is not an up-to-date corpus store; use --force"),
    Case("encode", ["encode", "{world}/model", "{world}/store", "-o", "{userdir}"], REFUSED_DIR),
    Case("expand", ["expand", "--model", "{world}/model", "--corpus", "{world}/beir/corpus.jsonl", "-o", "{userdir}"],
         REFUSED_DIR),
    Case("pretrain", ["pretrain", "--method", "cdmae", "--model", "{world}/model", "--corpus", "{world}/store",
                      "-o", "{userdir}", "--max-steps", "2"], REFUSED_DIR),
    Case("train retriever", ["train", "retriever", "{world}/model", *TRAIN, "-o", "{userdir}"], REFUSED_DIR),
    Case("train reranker", ["train", "reranker", "{world}/model", *TRAIN, "--negatives", "{world}/n.dpneg",
                            "-o", "{userdir}"], REFUSED_DIR),
    Case("train distill", ["train", "distill", "{world}/model", *TRAIN, "--scores", "{world}/n.dpneg",
                           "-o", "{userdir}"], REFUSED_DIR),
    Case("demo", ["demo", "-o", "{userdir}"], REFUSED_DIR),
    Case("beir --runs", ["beir", "{world}/model", "{world}/beir", "--runs", "{userdir}"], REFUSED_DIR),
    Case("hub export", ["hub", "export", "{world}/model", "-o", "{userdir}"],
         r"{userdir} already exists \(use --force to replace it\)"),
    Case("pipeline run: a folder of the user's holding store/ and bm25/",
         ["pipeline", "run", "{tmp}/pipeline.toml"], REFUSED_DIR),
    Case("study run: a folder of the user's", ["study", "run", "{tmp}/study.toml"], REFUSED_DIR),
    # ---- a folder another command wrote is not this one's ---------------------------------------------
    Case("encode into an embeddings folder another command wrote",
         ["encode", "{world}/model", "{world}/store", "-o", "{marked}"],
         r"{marked} was written by dense-pt pretrain, not encode"),
    # ---- a name the user gives is a name, never a path ------------------------------------------------
    Case("study: an objective labelled ../../x", ["study", "run", "{tmp}/study-dotdot.toml"],
         r"objectives: an objective must be a plain name .*got '\.\./\.\./x'", code=2),
    Case("study: an objective labelled with an absolute path", ["study", "run", "{tmp}/study-abs.toml"],
         r"an objective must be a plain name .*got '/", code=2),
]  # fmt: skip


def _user_places(tmp: Path, world: Path) -> dict[str, str]:
    """The user's files: {user} (a file), {userdir} (notes.txt, store/notes.txt, bm25/notes.txt),
    a folder marked by `pretrain`, and the pipeline and study files that write into {userdir}."""
    (tmp / "user.txt").write_text(USER)
    for sub in ("", "store", "bm25", "cells", "data"):
        (tmp / "userdir" / sub).mkdir(parents=True, exist_ok=True)
        (tmp / "userdir" / sub / "notes.txt").write_text(USER)
    (tmp / "n.manifest.json").write_text(USER)
    (tmp / "marked").mkdir()
    (tmp / "marked" / ".dense-pt.json").write_text('{"written_by": "dense-pt", "command": "pretrain"}')
    (tmp / "marked" / "notes.txt").write_text(USER)
    _write_pipeline_toml(tmp / "pipeline.toml", tmp / "userdir", world)
    escape = tmp / "outside"  # where ../../x would lead from the study's cells folder
    (escape / "x-seed1" / "store").mkdir(parents=True)
    (escape / "x-seed1" / "store" / "notes.txt").write_text(USER)
    for name, objectives, out in [("study", '["none"]', tmp / "userdir"),
                                  ("study-dotdot", '["none", "../../x"]', tmp / "outside" / "s" / "t"),
                                  ("study-abs", f'["{escape}/x"]', tmp / "s2")]:  # fmt: skip
        (tmp / f"{name}.toml").write_text(
            f'out = "{out}"\npipeline = "pipeline.toml"\nobjectives = {objectives}\nseeds = [1]\n'
        )
    (tmp / "linkdir").symlink_to(tmp / "userdir", target_is_directory=True)
    return {"user": str(tmp / "user.txt"), "userdir": str(tmp / "userdir"), "marked": str(tmp / "marked"),
            "linkdir": str(tmp / "linkdir")}  # fmt: skip


def _write_pipeline_toml(path: Path, out: Path, world: Path) -> None:
    """A small pipeline (BM25, R1, mining, R2; two steps per stage) over the tiny inputs."""
    beir = world / "beir"
    retriever = 'group_size = 4\nquery_max_length = 16\npassage_max_length = 64\nloss = "infonce"\n' + (
        'train = { max_steps = 2, batch_size = 8, lr = 5e-4, save_every = 2, log_every = 1, precision = "fp32" }\n'
    )
    path.write_text(
        f'out = "{out}"\nseed = 13\n'
        f'[data]\ncorpus = "{beir}/corpus.jsonl"\nqueries = "{beir}/queries.jsonl"\n'
        f'qrels = "{beir}/qrels/train.tsv"\ndev_fraction = 0.25\nmax_length = 64\n'
        f'[model]\ninit = "{world / "model"}"\n[eval]\nk = 20\nmeasures = ["nDCG@10"]\n'
        f"[mine]\ndepth = 20\nnum = 8\nbm25_depth = 20\n[r1]\n{retriever}[r2]\n{retriever}"
        "[reranker]\nenabled = false\n[distill]\nenabled = false\n"
    )


def _a_claim(path: Path) -> bool:
    """Whether ``path`` is the manifest ``claim`` writes into a folder (the header, nothing else)."""
    from dense_pt import artifacts

    found = artifacts.read(path.parent) if path.name == artifacts.MANIFEST else None
    return found is not None and not artifacts.body(found)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_users_file_survives(case: Case, world: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    places = {"tmp": str(tmp_path), "world": str(world), **_user_places(tmp_path, world)}
    before = _snapshot(tmp_path)
    code, _, err = run_cli([a.format(**places) for a in case.argv], capsys, monkeypatch)
    assert code == case.code, err
    last = err.strip().splitlines()[-1] if err.strip() else ""
    assert re.search(case.message.format(**{k: re.escape(v) for k, v in places.items()}), last), err
    assert "Traceback" not in err
    assert _snapshot(tmp_path) == before, "a file of the user's was changed, or something was added"


def test_there_is_a_case_for_every_command_that_writes():
    """Every command with --out (or a folder in its configuration) has a row; a new one needs one
    (an old name kept as a hidden alias runs the same command)."""
    names = {c.name.split(":")[0].split(" --")[0].split(" into ")[0] for c in CASES}
    assert _writers() <= names, sorted(_writers() - names)


def _writers() -> set[str]:
    """Every command with --out, and the two that write the folder of a configuration."""
    import typer

    from dense_pt.cli import app

    root = typer.main.get_command(app)
    writers = set()
    for group, cmd in subgroup(root).commands.items():
        subs = cmd.commands.items() if hasattr(cmd, "commands") else [("", cmd)]
        for sub, leaf in subs:
            if leaf.hidden:  # an old name: the same command as its new one
                continue
            opts = {o for p in leaf.params for o in getattr(p, "opts", [])}
            if "--out" in opts or (group, sub) in {("pipeline", "run"), ("study", "run")}:
                writers.add(f"{group} {sub}".strip())
    return writers


# ---- the pipeline inside a folder it wrote ------------------------------------------------------------
def test_a_pipeline_replaces_only_stage_folders_it_wrote(world, tmp_path, capsys, monkeypatch):
    """A folder the pipeline wrote (up to `split`) in which the user then made bm25/ of their own:
    refused naming the path, with --force too. A stage folder that is a symbolic link: refused;
    with --force, replaced (the link only) when it leads to the stage's own folder, refused when it
    leads to the user's. Each folder replaced is said in one line."""
    _write_pipeline_toml(tmp_path / "p.toml", tmp_path / "out", world)
    run = ["pipeline", "run", str(tmp_path / "p.toml")]
    code, _, err = run_cli([*run, "--until", "split"], capsys, monkeypatch)
    assert code == 0, err
    out = tmp_path / "out"
    (out / "bm25").mkdir()
    (out / "bm25" / "notes.txt").write_text(USER)
    refused = (rf"error: {re.escape(str(out / 'bm25'))} holds no manifest of the bm25 stage: dense-pt did not "
               r"write it; move it away \(--force never replaces it\)$")  # fmt: skip
    for force in ([], ["--force"]):
        code, _, err = run_cli([*run, "--until", "bm25", *force], capsys, monkeypatch)
        assert code == 1 and re.search(refused, err.strip()), err
        assert (out / "bm25" / "notes.txt").read_text() == USER
    # a symbolic link where a stage folder goes, to a folder of the user's: refused, --force or not
    os.rename(out / "bm25", tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", out / "bm25")
    code, _, err = run_cli([*run, "--until", "bm25"], capsys, monkeypatch)
    assert code == 1 and f"{out / 'bm25'} is a symbolic link" in err, err
    code, _, err = run_cli([*run, "--until", "bm25", "--force"], capsys, monkeypatch)
    assert code == 1 and re.search(refused, err.strip()), err
    assert (tmp_path / "elsewhere" / "notes.txt").read_text() == USER and (out / "bm25").is_symlink()
    os.unlink(out / "bm25")
    code, _, err = run_cli([*run, "--until", "bm25"], capsys, monkeypatch)
    assert code == 0 and (out / "bm25" / "manifest.json").is_file(), err
    # the stage it wrote is its own to replace: a changed setting reruns it without --force, saying so
    code, _, err = run_cli([*run, "--until", "bm25", "--set", "seed=14"], capsys, monkeypatch)
    assert code == 0 and "[bm25] running" in err, err
    assert re.search(
        rf"\[bm25\] replacing {re.escape(str(out / 'bm25'))}: changed: .*seed; removing it", err
    ), err
    # a file of the user's put inside the stage folder it wrote: a rerun refuses, naming it, --force too
    (out / "bm25" / "my-notes.txt").write_text(USER)
    for force in ([], ["--force"]):
        code, _, err = run_cli([*run, "--until", "bm25", "--set", "seed=15", *force], capsys, monkeypatch)
        assert code == 1 and re.search(
            rf"cannot rerun the bm25 stage in {re.escape(str(out / 'bm25'))}: it holds "
            rf"{re.escape(str(out / 'bm25' / 'my-notes.txt'))}, which the stage did not write",
            err,
        ), err
        assert (out / "bm25" / "my-notes.txt").read_text() == USER
    os.unlink(out / "bm25" / "my-notes.txt")
    # a link to the stage's own folder (moved to another disk, say): --force replaces the link only
    os.rename(out / "bm25", tmp_path / "disk-bm25")
    os.symlink(tmp_path / "disk-bm25", out / "bm25")
    code, _, err = run_cli([*run, "--until", "bm25", "--force"], capsys, monkeypatch)
    assert code == 0 and "removing the symbolic link (not what it points to)" in err, err
    assert not (out / "bm25").is_symlink() and (tmp_path / "disk-bm25" / "manifest.json").is_file()


# ---- --force: what dense-pt writes is replaced, nothing else ------------------------------------------
# Every writing command again, with --force, its output inside (or being) the user's folder {userdir}
# (notes.txt there and in store/, bm25/, cells/, data/). --force replaces the file the user names and
# the files dense-pt writes; a user's file is never touched: the command succeeds beside it (code 0)
# or, when it cannot work beside it, refuses naming it (code 1) and changes nothing (but for the
# manifest of its claim, nothing but the header, in a folder --force let it write into).
FOREIGN = r"{userdir}/bm25 \(and 4 more\), which dense-pt did not write"
SMALL = ["--max-steps", "1", "--batch-size", "2", "--group-size", "2", "--query-max-length", "8",
         "--passage-max-length", "16"]  # fmt: skip
FORCE_CASES = [
    Case("bm25", ["bm25", "{world}/beir/corpus.jsonl", "--queries", "{world}/beir/queries.jsonl",
                  "-o", "{userdir}/run.trec"], "", 0),
    Case("search", ["search", "{world}/qemb", "{world}/pemb", "-o", "{userdir}/run.arrow"], "", 0),
    Case("fuse", ["fuse", "{world}/run.trec", "{world}/dense.trec", "--method", "rrf", "-o", "{userdir}/fused.trec"],
         "", 0),
    Case("negatives mine", ["negatives", "mine", "{world}/run.trec", "--qrels", "{world}/beir/qrels/train.tsv",
                            "-o", "{userdir}/n.dpneg", "--text", "{userdir}/n.tsv"], "", 0),
    Case("negatives export", ["negatives", "export", "{world}/n.dpneg", "-o", "{userdir}/n.tsv"], "", 0),
    Case("score", ["score", "{world}/model", *TRAIN, "--negatives", "{world}/n.dpneg", "-o", "{userdir}/s.dpneg"],
         "", 0),
    Case("pmi build", ["pmi", "build", "{world}/store", "-o", "{userdir}/t.pmi"], "", 0),
    Case("pmi merge", ["pmi", "merge", "{world}/t.pmi", "-o", "{userdir}/m.pmi"], "", 0),
    Case("plot", ["plot", "{world}/log.jsonl", "-o", "{userdir}/loss.png"], "", 0),
    Case("runs convert", ["runs", "convert", "{world}/run.trec", "{userdir}/run.arrow"], "", 0),
    Case("runs merge", ["runs", "merge", "{world}/run.trec", "-o", "{userdir}/merged.trec"], "", 0),
    Case("corpus train-tokenizer", ["corpus", "train-tokenizer", "{world}/beir/corpus.jsonl",
                                    "-o", "{userdir}/tokenizer.json"], "", 0),
    Case("corpus build", ["corpus", "build", "{world}/beir/corpus.jsonl", "-t", "{world}/model", "-o", "{userdir}"],
         rf"cannot replace {{userdir}}: it holds {FOREIGN}"),
    Case("corpus build through a symbolic link to the folder",
         ["corpus", "build", "{world}/beir/corpus.jsonl", "-t", "{world}/model", "-o", "{linkdir}"],
         rf"cannot replace {{userdir}}: it holds {FOREIGN}"),
    Case("encode", ["encode", "{world}/model", "{world}/store", "-o", "{userdir}"], "", 0),
    Case("encode through a symbolic link to the folder", ["encode", "{world}/model", "{world}/store",
                                                          "-o", "{linkdir}"], "", 0),
    Case("expand", ["expand", "--model", "{world}/model", "--corpus", "{world}/beir/corpus.jsonl", "-o", "{userdir}",
                    "--limit", "2", "--max-new-tokens", "4", "--max-passage-words", "8", "--num-queries", "1",
                    "--prompt", "{tmp}/prompt.txt"], "", 0),
    Case("pretrain", ["pretrain", "--method", "condenser", "--model", "{world}/model", "--corpus", "{world}/store",
                      "-o", "{userdir}", "--max-steps", "1", "--batch-size", "2", "--max-length", "16"], "", 0),
    Case("train retriever", ["train", "retriever", "{world}/model", *TRAIN, "-o", "{userdir}", *SMALL], "", 0),
    Case("train reranker", ["train", "reranker", "{world}/model", *TRAIN, "--negatives", "{world}/n.dpneg",
                            "-o", "{userdir}", *SMALL[:4], "--group-size", "8", "--max-length", "16"], "", 0),
    Case("train distill", ["train", "distill", "{world}/model", *TRAIN, "--scores", "{world}/n.dpneg",
                           "-o", "{userdir}", *SMALL], "", 0),
    Case("demo: a folder of the user's named like its data stage", ["demo", "-o", "{userdir}"],
         r"cannot replace {userdir}/data: it holds {userdir}/data/notes\.txt, which dense-pt did not write"),
    Case("pipeline run: a folder of the user's named like a stage", ["pipeline", "run", "{tmp}/pipeline.toml"],
         r"{userdir}/store holds no manifest of the store stage: dense-pt did not write it"),
    Case("study run: a folder of the user's named like a stage", ["study", "run", "{tmp}/study.toml"],
         r"{userdir}/cells/none-seed1/store holds no manifest of the store stage"),
]  # fmt: skip


@pytest.mark.parametrize("case", FORCE_CASES, ids=[c.name for c in FORCE_CASES])
def test_force_replaces_only_what_dense_pt_writes(
    case: Case, world: Path, tmp_path: Path, capsys, monkeypatch
):
    places = {"tmp": str(tmp_path), "world": str(world), **_user_places(tmp_path, world)}
    (tmp_path / "userdir" / "cells" / "none-seed1" / "store").mkdir(parents=True)
    (tmp_path / "userdir" / "cells" / "none-seed1" / "store" / "notes.txt").write_text(USER)
    (tmp_path / "prompt.txt").write_text("{passage}")  # short: the tiny model has 128 positions
    users = {k: v for k, v in _snapshot(tmp_path).items() if v == USER.encode()}
    before = _snapshot(tmp_path)
    code, _, err = run_cli([*(a.format(**places) for a in case.argv), "--force"], capsys, monkeypatch)
    assert code == case.code, err
    assert "Traceback" not in err
    after = _snapshot(tmp_path)
    assert {k: after.get(k) for k in users} == users, "--force changed or removed a file of the user's"
    if case.code:
        last = err.strip().splitlines()[-1]
        assert re.search(case.message.format(**{k: re.escape(v) for k, v in places.items()}), last), err
        added = {k for k in after.keys() - before.keys() if not _a_claim(tmp_path / k)}
        assert not added and {k: after.get(k) for k in before} == before, "a refused command wrote something"


# Writers whose --force case needs an input this module's world has not (a trained retriever).
FORCE_CASES_ELSEWHERE = {"hub export": "tests/test_hub.py::test_force_keeps_a_users_file_in_the_hub_folder"}


def test_there_is_a_force_case_for_every_command_that_writes():
    names = {c.name.split(":")[0].split(" through")[0] for c in FORCE_CASES} | set(FORCE_CASES_ELSEWHERE)
    assert _writers() <= names, sorted(_writers() - names)


@pytest.mark.parametrize("force", [False, True])
def test_the_demos_pretraining_folder_keeps_a_users_file(force, world, tmp_path):
    """The demo redoes its pre-training (--force, or a folder without run_config.json) by removing
    the folder: one that holds a file of the user's is refused naming it, before any training."""
    from dense_pt.demo.pretrain import demo_stage
    from dense_pt.errors import AlreadyExistsError

    (tmp_path / "work" / "simlm").mkdir(parents=True)
    (tmp_path / "work" / "simlm" / "notes.txt").write_text(USER)
    with pytest.raises(AlreadyExistsError, match=r"simlm/notes\.txt, which dense-pt did not write"):
        demo_stage(world / "store", tmp_path / "work", method="simlm", force=force, progress=False)
    assert (tmp_path / "work" / "simlm" / "notes.txt").read_text() == USER


# ---- one manifest per output: every folder a command writes says what it is, in one schema -------
WALKED = [  # (command line, the kind of its output folder {out})
    (["corpus", "build", "{world}/beir/corpus.jsonl", "-t", "{world}/model", "-o", "{out}"], "corpus store"),
    (["encode", "{world}/model", "{world}/store", "-o", "{out}"], "embeddings"),
    (["bm25", "{world}/beir/corpus.jsonl", "--queries", "{world}/beir/queries.jsonl", "-o", "{tmp}/run.trec",
      "--index", "{out}"], "bm25 index"),
    (["expand", "--model", "{world}/model", "--corpus", "{world}/beir/corpus.jsonl", "-o", "{out}", "--limit", "2",
      "--max-new-tokens", "4", "--max-passage-words", "8", "--num-queries", "1", "--prompt", "{tmp}/prompt.txt"],
     "pseudo-queries"),
    (["pretrain", "--method", "condenser", "--model", "{world}/model", "--corpus", "{world}/store", "-o", "{out}",
      "--max-steps", "1", "--batch-size", "2", "--max-length", "16"], "pretraining run"),
    (["train", "retriever", "{world}/model", *TRAIN, "-o", "{out}", *SMALL], "retriever"),
    (["train", "reranker", "{world}/model", *TRAIN, "--negatives", "{world}/n.dpneg", "-o", "{out}", *SMALL[:4],
      "--group-size", "8", "--max-length", "16"], "reranker"),
    (["train", "distill", "{world}/model", *TRAIN, "--scores", "{world}/n.dpneg", "-o", "{out}", *SMALL],
     "distilled retriever"),
    (["pipeline", "run", "{tmp}/pipeline.toml"], "pipeline"),
    (["study", "run", "{tmp}/study.toml"], "study"),
    (["beir", "{world}/model", "{world}/beir", "--split", "train", "--runs", "{out}"], "beir evaluation"),
]  # fmt: skip
OLD_SIDE_FILES = {".dense-pt.json", "expansion.json"}  # the layouts before dense_pt.artifacts


def _manifests(folder: Path) -> list[Path]:
    """The files directly in ``folder`` that are manifests of the artifact schema."""
    from dense_pt import artifacts

    found = []
    for p in sorted(folder.glob("*.json")):
        try:
            if artifacts.manifest.is_header(json.loads(p.read_text(encoding="utf-8"))):
                found.append(p)
        except ValueError:
            pass
    return found


@pytest.mark.parametrize(
    ("argv", "kind"), WALKED, ids=[" ".join(w for w in a[:2] if "{" not in w) for a, _ in WALKED]
)
def test_every_output_folder_holds_one_manifest_of_the_schema(
    argv, kind, world, tmp_path, capsys, monkeypatch
):
    from dense_pt import artifacts

    out = tmp_path / "out"
    (tmp_path / "prompt.txt").write_text("{passage}")
    _write_pipeline_toml(tmp_path / "pipeline.toml", out, world)
    (tmp_path / "study.toml").write_text(
        f'out = "{out}"\npipeline = "pipeline.toml"\nobjectives = ["none"]\nseeds = [1]\n'
    )
    places = {"tmp": str(tmp_path), "world": str(world), "out": str(out)}
    code, _, err = run_cli([a.format(**places) for a in argv], capsys, monkeypatch)
    assert code == 0, err
    assert _manifests(out) == [out / artifacts.MANIFEST]
    m = artifacts.open(out, kind, complete=True, verify="full")
    assert m["written_by"]["command"] and m["written_by"]["version"] == __import__("dense_pt").__version__
    assert not [p for p in out.rglob("*") if p.name in OLD_SIDE_FILES]
    if kind == "pipeline":  # and each stage folder its own
        stages = [p for p in out.iterdir() if p.is_dir()]
        assert stages and all(_manifests(s) == [s / artifacts.MANIFEST] for s in stages)
        found = {s.name: artifacts.read(s) or {} for s in stages}
        assert all(m["complete"] for m in found.values()) and found["report"]["kind"] == "pipeline report"
        assert {m["stage"] for n, m in found.items() if n != "report"} >= {
            "split",
            "bm25",
            "r1",
            "mine",
            "r2",
        }
