"""What each extra gives (docs/install.md): `eval` (PyStemmer, ir-measures) runs bm25, fuse, evaluate
and runs without torch; bm25s is a development reference only; without PyStemmer a bm25 that asks
for stemming says so in one line instead of silently running unstemmed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
HEAVY = ("torch", "transformers", "faiss", "sentence_transformers", "bm25s", "datasets")

# `dense-pt ARGV` for each ARGV of $COMMANDS (a JSON list) in one fresh interpreter where the
# packages named in $BLOCKED cannot be imported, as in an environment that lacks them (an import
# raises ModuleNotFoundError). It stops at the first command that fails, exiting with its code.
CHILD = """
import json, os, sys
blocked = set(os.environ["BLOCKED"].split())
class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Missing())
from dense_pt.cli import main
for argv in json.loads(os.environ["COMMANDS"]):
    sys.argv = ["dense-pt", *argv]
    try:
        main()
    except SystemExit as exc:
        if exc.code not in (0, None):
            print("failed:", argv, file=sys.stderr)
            sys.exit(exc.code)
"""


def _cli(commands: list[list[str]], blocked: tuple[str, ...], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BLOCKED": " ".join(blocked), "COMMANDS": json.dumps(commands),
           "DENSE_PT_CACHE_DIR": "", "COLUMNS": "250"}  # fmt: skip
    env.pop("DENSE_PT_LOG", None)
    return subprocess.run([sys.executable, "-c", CHILD], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


@pytest.fixture
def tiny(tmp_path) -> Path:
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "title": "", "text": t}) + "\n" for i, t in enumerate(
            ["cats chasing mice", "dogs chase cats", "birds sing songs", "a song of birds singing"]))
    )  # fmt: skip
    (tmp_path / "q.tsv").write_text("q1\tcat chases\nq2\tbirds singing\n")
    (tmp_path / "qrels.txt").write_text("q1 0 d0 1\nq2 0 d3 1\n")
    return tmp_path


def test_bm25s_is_a_development_reference_only():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert not [r for reqs in [PYPROJECT["project"]["dependencies"], *extras.values()] for r in reqs
                if r.lower().startswith("bm25s")]  # fmt: skip
    assert any(r.startswith("bm25s>=") for r in PYPROJECT["dependency-groups"]["dev"])
    for folder in ("python",):  # the package never imports it (tests and benches do)
        hits = [p for p in (ROOT / folder).rglob("*.py") if "import bm25s" in p.read_text(encoding="utf-8")]
        assert not hits, hits


def test_the_eval_extra_is_light_and_retrieval_includes_it():
    extras = PYPROJECT["project"]["optional-dependencies"]
    names = {r.split(">=")[0].split("[")[0].lower() for r in extras["eval"]}
    assert names == {"pystemmer", "ir-measures", "pytrec-eval-terrier"}
    assert "dense-pt[eval]" in extras["retrieval"] and "dense-pt[retrieval,expand,plot]" in extras["train"]


def test_bm25_fuse_evaluate_and_runs_work_without_torch(tiny):
    """The eval extra's commands, with torch, transformers, faiss, sentence-transformers and bm25s
    missing: every one succeeds and the evaluation reads the fused run."""
    steps = [
        ["bm25", "corpus.jsonl", "--queries", "q.tsv", "-o", "a.trec", "-k", "4"],
        ["bm25", "corpus.jsonl", "--queries", "q.tsv", "-o", "b.trec", "-k", "4", "--no-stem",
         "--index", "nostem.bm25"],
        ["fuse", "a.trec", "b.trec", "-o", "f.trec", "--method", "rrf"],
        ["runs", "convert", "f.trec", "f.arrow"],
        ["evaluate", "f.arrow", "--qrels", "qrels.txt", "--json"],
    ]  # fmt: skip
    out = _cli(steps, HEAVY, tiny)
    assert out.returncode == 0, out.stderr
    scores = json.loads(out.stdout)  # the others write their status to stderr: this is evaluate's JSON
    assert scores["R@10"] == 1.0, scores  # 4 passages: every positive is in the top 10
    assert scores["settings"]["queries_evaluated"] == 2, scores


def test_bm25_without_pystemmer_warns_once_and_runs_unstemmed(tiny):
    argv = ["bm25", "corpus.jsonl", "--queries", "q.tsv", "-o", "a.trec", "-k", "4", "--index", "a.bm25"]
    out = _cli([argv], ("Stemmer",), tiny)
    assert out.returncode == 0, out.stderr
    warned = [line for line in out.stderr.splitlines() if "PyStemmer is not installed" in line]
    assert len(warned) == 1 and "dense-pt[eval]" in warned[0], out.stderr
    key = json.loads((tiny / "a.bm25" / "manifest.json").read_text())
    assert json.dumps(key).count('"stemmer": null') == 1, key  # the index says it is unstemmed
    # asked for no stemming: nothing to warn about
    argv = ["bm25", "corpus.jsonl", "--queries", "q.tsv", "-o", "b.trec", "--no-stem", "--index", "n.bm25"]
    out = _cli([argv], ("Stemmer",), tiny)
    assert out.returncode == 0 and "PyStemmer" not in out.stderr, out.stderr


def test_bm25_with_pystemmer_stems_without_a_warning(tiny):
    pytest.importorskip("Stemmer")
    argv = ["bm25", "corpus.jsonl", "--queries", "q.tsv", "-o", "a.trec", "-k", "4", "--index", "a.bm25"]
    out = _cli([argv], (), tiny)
    assert out.returncode == 0 and "PyStemmer" not in out.stderr, out.stderr
    key = json.loads((tiny / "a.bm25" / "manifest.json").read_text())
    assert "PyStemmer" in json.dumps(key) and "english" in json.dumps(key), key
    run = (tiny / "a.trec").read_text().splitlines()
    # "cat chases" matches d0 and d1 only through the stems (cats -> cat, chasing/chase -> chase)
    assert {line.split()[2] for line in run if line.startswith("q1 ")} == {"d0", "d1"}, run


def test_evaluate_without_ir_measures_names_the_extra(tiny):
    (tiny / "a.trec").write_text("q1 Q0 d0 1 2.0 r\nq2 Q0 d3 1 1.0 r\n")
    out = _cli([["evaluate", "a.trec", "--qrels", "qrels.txt"]], ("ir_measures",), tiny)
    assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip() and not line.startswith("failed:")]
    assert len(lines) == 1 and "ir_measures" in lines[0] and "pip install 'dense-pt[eval]'" in lines[0], lines
