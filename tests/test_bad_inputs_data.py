"""Bad inputs to the data commands (corpus, pmi), as a user meets them: each crafted input ->
the exit code (1: the data or the system, 2: the usage) and a message naming the file, line or option, through the real command line
(``dense_pt.cli.main``: what a terminal shows). None may end in a traceback, a panic or silent
acceptance; those that must leave nothing behind say so.

Each case is a row of CASES: files to write into a fresh folder (text, bytes, or a function of the
folder), the arguments (``{tmp}``: the folder; ``{store}``: a fresh copy of a small corpus store;
``{table}``: its n-gram table; ``{tok}``: its tokenizer.json; ``{big}``: a larger store), the
environment, and what must hold afterwards. The CLI half (encode, search, bm25, pipeline) lives in
tests/test_bad_inputs_cli.py.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dense_pt.config.pmi import PmiBuild
from dense_pt.data.store import CorpusStore, build_store_from_texts
from dense_pt.data.tokenizer import train_wordpiece
from dense_pt.pmi import build

TEXTS = [
    "the immune response to the vaccine was measured in the trial",
    "the vaccine trial enrolled elderly patients with chronic disease",
    "chronic inflammation drives the immune response in elderly patients",
    "patients in the trial received the vaccine or a placebo",
]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tokenizer, a small store with its n-gram table and importance column, and a store of
    ~20,000 tokens (big enough that a tiny pmi budget would need thousands of passes)."""
    root = tmp_path_factory.mktemp("world")
    tok = train_wordpiece(TEXTS * 3, vocab_size=150, min_frequency=1)
    tok.save(str(root / "tok.json"))
    store = build_store_from_texts(root / "store", [(str(i), t) for i, t in enumerate(TEXTS)], tok)
    build(store, root / "t.pmi", PmiBuild(memory_gb=0.5))
    from dense_pt.pmi import score

    score(store, root / "t.pmi")
    rng = np.random.default_rng(0)
    words = " ".join(TEXTS).split()
    big = [(f"b{i}", " ".join(rng.choice(words, 100))) for i in range(200)]
    build_store_from_texts(root / "big", big, tok)
    return root


@dataclass
class Case:
    name: str
    argv: list[str]
    code: int
    message: str  # regex searched in stdout + stderr
    files: dict[str, str | bytes | Callable[[Path], object]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    after: Callable[[Path], None] | None = None  # checks on the folder afterwards


def _jsonl(*objs: object) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


def _flip_byte(rel: str, offset_from_end: int = 200) -> Callable[[Path], None]:
    def flip(tmp: Path) -> None:
        path = tmp / "store" / rel
        data = bytearray(path.read_bytes())
        data[len(data) - offset_from_end] ^= 0x01
        path.write_bytes(bytes(data))

    return flip


def _truncate(rel: str) -> Callable[[Path], None]:
    def cut(tmp: Path) -> None:
        path = tmp / "store" / rel
        path.write_bytes(path.read_bytes()[:-100])

    return cut


def _parquet_with_big_row(tmp: Path) -> None:
    pq.write_table(pa.table({"id": ["a", "b"], "text": ["short", "x " * 3000]}), tmp / "corpus.parquet")


def _gz(text: str) -> Callable[[Path], None]:
    def write(tmp: Path) -> None:
        (tmp / "corpus.jsonl.gz").write_bytes(gzip.compress(text.encode()))

    return write


def _nothing_left(tmp: Path) -> None:
    hidden = [p.name for p in tmp.rglob(".*")]
    assert not hidden, f"temporaries left behind: {hidden}"


def _no_store(tmp: Path) -> None:
    assert not (tmp / "out").exists()
    _nothing_left(tmp)


def _nothing_outside_store(tmp: Path) -> None:
    assert not (tmp / "evil.arrow").exists() and not list(tmp.glob("*.arrow"))
    manifest = json.loads((tmp / "store" / "manifest.json").read_text())
    assert all(re.fullmatch(r"\w+", k) for k in manifest["columns"])


LONG_LINE = _jsonl({"_id": "a", "text": "fine"}, {"_id": "b", "text": "x " * 2000})
CASES = [
    # ---- readers (corpus check) -------------------------------------------------------------
    Case(
        "integer id refused",
        ["corpus", "check", "{tmp}/c.jsonl"],
        1,
        r"c\.jsonl:2: field \"_id\" must be a string, found int 7",
        files={"c.jsonl": _jsonl({"_id": "a", "text": "x"}, {"_id": 7, "text": "y"})},
    ),
    Case(
        "integer query id refused",
        ["corpus", "check", "{tmp}/q.jsonl", "--kind", "queries"],
        1,
        r"q\.jsonl:1: field \"_id\" must be a string",
        files={"q.jsonl": _jsonl({"_id": 12, "text": "what?"})},
    ),
    Case(
        "float id refused",
        ["corpus", "check", "{tmp}/c.jsonl"],
        1,
        r"c\.jsonl:1: field \"_id\" must be a string, found float",
        files={"c.jsonl": _jsonl({"_id": 1.5, "text": "x"})},
    ),
    Case(
        "inf score in a run",
        ["corpus", "check", "{tmp}/run.trec", "--kind", "run"],
        1,
        r"run\.trec:2: score must be a finite number, found 'inf'",
        files={"run.trec": "q1 Q0 d1 1 3.5 t\nq1 Q0 d2 2 inf t\n"},
    ),
    Case(
        "-inf score in a run",
        ["corpus", "check", "{tmp}/run.trec", "--kind", "run"],
        1,
        r"run\.trec:1: score must be a finite number, found '-Infinity'",
        files={"run.trec": "q1 Q0 d1 1 -Infinity t\n"},
    ),
    Case(
        "NaN score in a run",
        ["corpus", "check", "{tmp}/run.trec", "--kind", "run"],
        1,
        r"run\.trec:1: score must be a finite number, found 'nan'",
        files={"run.trec": "q1 Q0 d1 1 nan t\n"},
    ),
    Case(
        "line longer than the maximum record size",
        ["corpus", "check", "{tmp}/c.jsonl", "--max-record-mb", "0.002"],
        1,
        r"c\.jsonl:2: record is longer than the maximum record size of 2,097 bytes",
        files={"c.jsonl": LONG_LINE},
    ),
    Case(
        "record size from the environment",
        ["corpus", "check", "{tmp}/c.jsonl"],
        1,
        r"c\.jsonl:2: record is longer than the maximum record size of 1,000 bytes.*DENSE_PT_MAX_RECORD_BYTES",
        files={"c.jsonl": LONG_LINE},
        env={"DENSE_PT_MAX_RECORD_BYTES": "1000"},
    ),
    Case(
        "a raised record size accepts the line",
        ["corpus", "check", "{tmp}/c.jsonl", "--max-record-mb", "1"],
        0,
        r"ok, 2 passages",
        files={"c.jsonl": LONG_LINE},
        env={"DENSE_PT_MAX_RECORD_BYTES": "1000"},
    ),
    Case(
        "nonsense record size in the environment",
        ["corpus", "check", "{tmp}/c.jsonl"],
        2,
        r"\$DENSE_PT_MAX_RECORD_BYTES must be a number of bytes, got 'lots'",
        files={"c.jsonl": LONG_LINE},
        env={"DENSE_PT_MAX_RECORD_BYTES": "lots"},
    ),
    Case(
        "long line inside a gzip file",
        ["corpus", "check", "{tmp}/corpus.jsonl.gz", "--max-record-mb", "0.002"],
        1,
        r"corpus\.jsonl\.gz:2: record is longer than the maximum record size",
        files={"gz": _gz(LONG_LINE)},
    ),
    Case(
        "parquet row larger than the maximum record size",
        ["corpus", "check", "{tmp}/corpus.parquet", "--max-record-mb", "0.002"],
        1,
        r"corpus\.parquet: row 2: record is longer than the maximum record size",
        files={"pq": _parquet_with_big_row},
    ),
    Case(
        "long qrels line",
        ["corpus", "check", "{tmp}/qrels.tsv", "--kind", "qrels", "--max-record-mb", "0.001"],
        1,
        r"qrels\.tsv:3: record is longer",
        files={"qrels.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\t" + "d" * 2000 + "\t1\n"},
    ),
    Case(
        "--max-record-mb 0",
        ["corpus", "check", "{tmp}/c.jsonl", "--max-record-mb", "0"],
        2,
        r"--max-record-mb must be positive",
        files={"c.jsonl": LONG_LINE},
    ),
    # ---- ids: one printable word (dense_pt/data/ids.py), in every reader ------------------------
    Case(
        "a passage id with a space",
        ["corpus", "check", "{tmp}/c.jsonl"],
        1,
        r"c\.jsonl:2: field \"_id\": 'a b' contains whitespace: an id must be one word",
        files={"c.jsonl": _jsonl({"_id": "a", "text": "x"}, {"_id": "a b", "text": "y"})},
    ),
    Case(
        "a passage id with a tab inside",
        ["corpus", "check", "{tmp}/c.jsonl"],
        1,
        r"c\.jsonl:1: field \"_id\": 'a\\tb' contains whitespace \('\\t'\)",
        files={"c.jsonl": _jsonl({"_id": "a\tb", "text": "x"})},
    ),
    Case(
        "a tsv passage id with a space",
        ["corpus", "check", "{tmp}/c.tsv"],
        1,
        r"c\.tsv:1: passage id 'd 1' contains whitespace",
        files={"c.tsv": "d 1\tsome text\n"},
    ),
    Case(
        "a query id with a no-break space",
        ["corpus", "check", "{tmp}/q.jsonl", "--kind", "queries"],
        1,
        r"q\.jsonl:1: field \"_id\": 'q\\xa01' contains whitespace \('\\xa0'\)",
        files={"q.jsonl": _jsonl({"_id": "q\u00a01", "text": "what?"})},
    ),
    Case(
        "a tsv query id with a space",
        ["corpus", "check", "{tmp}/q.tsv", "--kind", "queries"],
        1,
        r"q\.tsv:1: query id 'q 1' contains whitespace",
        files={"q.tsv": "q 1\twhat?\n"},
    ),
    Case(
        "a parquet id with a space",
        ["corpus", "check", "{tmp}/c.parquet"],
        1,
        r"c\.parquet: row 2: passage id 'b c' contains whitespace",
        files={
            "pq": lambda tmp: pq.write_table(
                pa.table({"id": ["a", "b c"], "text": ["x", "y"]}), tmp / "c.parquet"
            )
        },
    ),
    Case(
        "a qrels passage id with a space",
        ["corpus", "check", "{tmp}/qrels.tsv", "--kind", "qrels"],
        1,
        r"qrels\.tsv:3: passage id 'd 2' contains whitespace",
        files={"qrels.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td 2\t1\n"},
    ),
    Case(
        "a run id with a control character",
        ["corpus", "check", "{tmp}/run.trec", "--kind", "run"],
        1,
        r"run\.trec:1: passage id 'd\\x011' contains a control character",
        files={"run.trec": "q1 Q0 d\x011 1 2.0 t\n"},
    ),
    Case(
        "a negative rank in a run",
        ["corpus", "check", "{tmp}/run.trec", "--kind", "run"],
        1,
        r"run\.trec:2: rank must be an integer from 0 to 2,147,483,647, found '-3'",
        files={"run.trec": "q1 Q0 d1 1 2.0 t\nq1 Q0 d2 -3 1.0 t\n"},
    ),
    Case(
        "a relevance of 10**20 in qrels",
        ["corpus", "check", "{tmp}/qrels.tsv", "--kind", "qrels"],
        1,
        r"qrels\.tsv:2: relevance must be an integer from -2,147,483,648 to 2,147,483,647, found '100000000000000000000'",
        files={"qrels.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t100000000000000000000\n"},
    ),
    Case(
        "a relevance of 1e20 in TREC qrels",
        ["corpus", "check", "{tmp}/qrels.txt", "--kind", "qrels"],
        1,
        r"qrels\.txt:1: relevance must be an integer, found '1e20'",
        files={"qrels.txt": "q1 0 d1 1e20\n"},
    ),
    # ---- files that are not text the readers can hold -----------------------------------------
    Case(
        "a lone UTF-16 surrogate in a passage",
        ["corpus", "check", "{tmp}/c.jsonl"],
        1,
        r"c\.jsonl:2: field \"text\" holds a lone UTF-16 surrogate \('\\ud800' at character 2\)",
        files={"c.jsonl": '{"_id": "a", "text": "fine"}\n{"_id": "b", "text": "x \\ud800 y"}\n'},
    ),
    Case(
        "a surrogate pair is a character",
        ["corpus", "check", "{tmp}/c.jsonl"],
        0,
        r"ok, 1 passages",
        files={"c.jsonl": '{"_id": "a", "text": "smile \\ud83d\\ude00"}\n'},
    ),
    Case(
        "JSON nested 100,000 levels deep",
        ["corpus", "check", "{tmp}/c.jsonl"],
        1,
        r"c\.jsonl:1: invalid JSON: nested too deeply",
        files={"c.jsonl": "[" * 100_000 + "]" * 100_000 + "\n"},
    ),
    Case(
        "a 0-byte corpus does not check ok",
        ["corpus", "check", "{tmp}/empty.jsonl"],
        1,
        r"empty\.jsonl: holds no passages \(the file is empty or blank\)",
        files={"empty.jsonl": ""},
    ),
    Case(
        "a blank queries file does not check ok",
        ["corpus", "check", "{tmp}/q.tsv", "--kind", "queries", "--format", "tsv"],
        1,
        r"q\.tsv: holds no queries",
        files={"q.tsv": "\n\n"},
    ),
    Case(
        "a column whose file was deleted",
        ["corpus", "info", "{store}"],
        1,
        r"store/importance\.arrow: missing file of the corpus store \(column 'importance'\)",
        files={"rm": lambda tmp: (tmp / "store" / "importance.arrow").unlink()},
    ),
    Case(
        "pmi build on an empty store",
        ["pmi", "build", "{tmp}/empty", "-o", "{tmp}/t.pmi"],
        1,
        r"empty: the corpus store has no passages: there are no n-grams to count",
        files={
            "empty": lambda tmp: build_store_from_texts(
                tmp / "empty", [], train_wordpiece(TEXTS, 150, min_frequency=1)
            )
        },
        after=lambda tmp: _nothing_left(tmp) if not (tmp / "t.pmi").exists() else pytest.fail("built"),
    ),
    Case(
        "pmi score does not replace a file of the user's named like the column",
        ["pmi", "score", "{store}", "--table", "{table}", "--column", "mine"],
        1,
        r"store/mine\.arrow is not a column of this store: dense-pt did not write it",
        files={"mine": lambda tmp: (tmp / "store" / "mine.arrow").write_text("the user's")},
        after=lambda tmp: (
            None if (tmp / "store" / "mine.arrow").read_text() == "the user's" else pytest.fail()
        ),
    ),
    # ---- corpus build -----------------------------------------------------------------------
    Case(
        "0-byte corpus refused",
        ["corpus", "build", "{tmp}/empty.jsonl", "-t", "{tok}", "-o", "{tmp}/out"],
        1,
        r"empty\.jsonl: the corpus has no passages; pass --allow-empty",
        files={"empty.jsonl": ""},
        after=_no_store,
    ),
    Case(
        "corpus of blank lines refused",
        ["corpus", "build", "{tmp}/blank.jsonl", "-t", "{tok}", "-o", "{tmp}/out"],
        1,
        r"blank\.jsonl: the corpus has no passages",
        files={"blank.jsonl": "\n\n  \n"},
        after=_no_store,
    ),
    Case(
        "0-byte corpus with --allow-empty",
        ["corpus", "build", "{tmp}/empty.jsonl", "-t", "{tok}", "-o", "{tmp}/out", "--allow-empty"],
        0,
        r"wrote .*out.*: 0 passages",
        files={"empty.jsonl": ""},
    ),
    Case(
        "record too large during a build leaves no store",
        ["corpus", "build", "{tmp}/c.jsonl", "-t", "{tok}", "-o", "{tmp}/out", "--max-record-mb", "0.002"],
        1,
        r"c\.jsonl:2: record is longer than the maximum record size",
        files={"c.jsonl": LONG_LINE},
        after=_no_store,
    ),
    Case(
        "integer id during a build leaves no store",
        ["corpus", "build", "{tmp}/c.jsonl", "-t", "{tok}", "-o", "{tmp}/out"],
        1,
        r"c\.jsonl:2: field \"_id\" must be a string",
        files={"c.jsonl": _jsonl({"_id": "a", "text": "the trial"}, {"_id": 3, "text": "the vaccine"})},
        after=_no_store,
    ),
    Case(
        "--max-length 2",
        ["corpus", "build", "{tmp}/c.jsonl", "-t", "{tok}", "-o", "{tmp}/out", "--max-length", "2"],
        2,
        r"max_length must be at least 3",
        files={"c.jsonl": _jsonl({"_id": "a", "text": "the trial"})},
        after=_no_store,
    ),
    Case(
        "--max-length -1",
        ["corpus", "build", "{tmp}/c.jsonl", "-t", "{tok}", "-o", "{tmp}/out", "--max-length", "-1"],
        2,
        r"dense-pt corpus build: max_length: must be >= 0, got -1",
        files={"c.jsonl": _jsonl({"_id": "a", "text": "the trial"})},
    ),
    Case(
        "--threads 0",
        ["corpus", "build", "{tmp}/c.jsonl", "-t", "{tok}", "-o", "{tmp}/out", "--threads", "0"],
        2,
        r"dense-pt corpus build: threads: must be >= 1, got 0",
        files={"c.jsonl": _jsonl({"_id": "a", "text": "the trial"})},
    ),
    Case(
        "--batch-size 0",
        ["corpus", "build", "{tmp}/c.jsonl", "-t", "{tok}", "-o", "{tmp}/out", "--batch-size", "0"],
        2,
        r"dense-pt corpus build: batch_size: must be >= 1, got 0",
        files={"c.jsonl": _jsonl({"_id": "a", "text": "the trial"})},
    ),
    Case(
        "output under a file",
        ["corpus", "build", "{tmp}/c.jsonl", "-t", "{tok}", "-o", "{tmp}/c.jsonl/out"],
        1,
        r"cannot write .*c\.jsonl/out: .*c\.jsonl is not a folder",
        files={"c.jsonl": _jsonl({"_id": "a", "text": "the trial"})},
    ),
    # ---- the store's checksums ----------------------------------------------------------------
    Case(
        "flipped byte in tokens.arrow",
        ["corpus", "info", "{store}"],
        1,
        r"store/tokens\.arrow: checksum mismatch .*modified or corrupted",
        files={"flip": _flip_byte("tokens.arrow")},
    ),
    Case(
        "flipped byte in tokens.arrow stops pmi build",
        ["pmi", "build", "{store}", "--out", "{tmp}/t.pmi"],
        1,
        r"store/tokens\.arrow: checksum mismatch",
        files={"flip": _flip_byte("tokens.arrow")},
        after=lambda tmp: _nothing_left(tmp) if not (tmp / "t.pmi").exists() else pytest.fail("built"),
    ),
    Case(
        "truncated tokens.arrow",
        ["corpus", "info", "{store}"],
        1,
        r"store/tokens\.arrow: file has [\d,]+ bytes but the manifest recorded \d+",
        files={"cut": _truncate("tokens.arrow")},
    ),
    Case(
        "edited tokenizer.json",
        ["corpus", "info", "{store}"],
        1,
        r"store/tokenizer\.json: (checksum mismatch|file has)",
        files={"edit": lambda tmp: (tmp / "store" / "tokenizer.json").write_text("{}")},
    ),
    Case(
        "flipped byte in a column, found by --verify",
        ["corpus", "info", "{store}", "--verify"],
        1,
        r"store/importance\.arrow: checksum mismatch",
        files={"flip": _flip_byte("importance.arrow")},
    ),
    Case(
        "an intact store verifies",
        ["corpus", "info", "{store}", "--verify"],
        0,
        r"checksums.*verified: importance\.arrow, tokenizer\.json, tokens\.arrow",
    ),
    Case(
        "missing tokens.arrow",
        ["corpus", "info", "{store}"],
        1,
        r"store/tokens\.arrow: missing file of the corpus store",
        files={"rm": lambda tmp: (tmp / "store" / "tokens.arrow").unlink()},
    ),
    # ---- pmi ----------------------------------------------------------------------------------
    Case(
        "--column ../evil",
        ["pmi", "score", "{store}", "--table", "{table}", "--column", "../evil"],
        2,
        r"column name \(--column\) must be a plain identifier .*'\.\./evil'",
        after=_nothing_outside_store,
    ),
    Case(
        "--column with a slash",
        ["pmi", "score", "{store}", "--table", "{table}", "--column", "sub/col"],
        2,
        r"must be a plain identifier",
        after=_nothing_outside_store,
    ),
    Case(
        "--column tokens would overwrite the token file",
        ["pmi", "score", "{store}", "--table", "{table}", "--column", "tokens"],
        2,
        r"column name \(--column\) 'tokens' is reserved",
        after=_nothing_outside_store,
    ),
    Case(
        "--column empty",
        ["pmi", "score", "{store}", "--table", "{table}", "--column", ""],
        2,
        r"must be a plain identifier",
    ),
    Case(
        "--top 0 shows no top list",
        ["pmi", "inspect", "{table}", "--top", "0"],
        0,
        r"^(?!.*top 0).*vocab size",
    ),
    Case("--top -1", ["pmi", "inspect", "{table}", "--top", "-1"], 2, r"Invalid value for '--top'"),
    Case(
        "--top-min-count -1",
        ["pmi", "inspect", "{table}", "--top-min-count", "-1"],
        2,
        r"Invalid value for '--top-min-count'",
    ),
    Case(
        "inspect --window 1",
        ["pmi", "inspect", "{table}", "--window", "1"],
        2,
        r"Invalid value for '--window'",
    ),
    Case(
        "inspect --window above the table's order",
        ["pmi", "inspect", "{table}", "--window", "9", "--tokenizer", "{tok}", "--text", "the trial"],
        2,
        r"window \(--window\) must be between 2 and 4, got 9",
    ),
    Case(
        "--min-count -3",
        ["pmi", "build", "{store}", "--out", "{tmp}/t.pmi", "--min-count", "-3"],
        2,
        r"pmi build: min_count: must be >= 1, got -3",
    ),
    Case(
        "--max-n 0",
        ["pmi", "build", "{store}", "--out", "{tmp}/t.pmi", "--max-n", "0"],
        2,
        r"pmi build: max_n: must be >= 1, got 0",
    ),
    Case(
        "--threads 0 for pmi",
        ["pmi", "build", "{store}", "--out", "{tmp}/t.pmi", "--threads", "0"],
        2,
        r"pmi build: threads: must be >= 1, got 0",
    ),
    Case(
        "--memory-gb 0",
        ["pmi", "build", "{store}", "--out", "{tmp}/t.pmi", "--memory-gb", "0"],
        2,
        r"memory_gb: must be > 0, got 0",
    ),
    Case(
        "--memory-gb nan",
        ["pmi", "build", "{store}", "--out", "{tmp}/t.pmi", "--memory-gb", "nan"],
        2,
        r"memory_gb: must be a finite number",
    ),
    Case(
        "--memory-gb too small for the corpus: refused naming the minimum",
        ["pmi", "build", "{big}", "--out", "{tmp}/t.pmi", "--memory-gb", "0.001"],
        2,
        r"memory budget of 0\.0010 GB is too small for this corpus: it needs at least 0\.\d+ GB.*"
        r"raise --memory-gb",
        after=lambda tmp: _nothing_left(tmp) if not (tmp / "t.pmi").exists() else pytest.fail("built"),
    ),
    Case(
        "--min-count -3 for merge",
        ["pmi", "merge", "{table}", "--out", "{tmp}/m.pmi", "--min-count", "-3"],
        2,
        r"Invalid value for '--min-count'",
    ),
    Case(
        "--window 1 for score",
        ["pmi", "score", "{store}", "--table", "{table}", "--window", "1"],
        2,
        r"Invalid value for '--window'",
    ),
]


def run_cli(argv: list[str], capsys, monkeypatch, env: dict[str, str]) -> tuple[int, str]:
    """Run ``dense-pt ARGV`` in-process through the console entry point; return (exit code,
    stdout + stderr). An exception that escapes the entry point is a traceback for the user and
    fails the test as such."""
    from dense_pt.cli import main

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(sys, "argv", ["dense-pt", *argv])
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps long lines at the terminal width
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case: Case, world: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    shutil.copytree(world / "store", tmp_path / "store")
    for name, content in case.files.items():
        if callable(content):
            content(tmp_path)
        elif isinstance(content, bytes):
            (tmp_path / name).write_bytes(content)
        else:
            (tmp_path / name).write_text(content, encoding="utf-8")
    places = {
        "tmp": str(tmp_path),
        "store": str(tmp_path / "store"),
        "table": str(world / "t.pmi"),
        "tok": str(world / "tok.json"),
        "big": str(world / "big"),
    }
    argv = [a.format(**places) for a in case.argv]
    code, output = run_cli(argv, capsys, monkeypatch, case.env)
    flat = " ".join(output.split())
    assert code == case.code, output
    assert re.search(case.message, flat, re.DOTALL), flat
    assert "Traceback" not in output and "panicked" not in output
    if case.after is not None:
        case.after(tmp_path)


def test_there_are_many_cases():
    assert len(CASES) >= 45


def test_the_store_copy_is_verified_before_use(world, tmp_path):
    """A copy keeps its checksums: opening it hashes it once (new inodes), then uses the cache."""
    shutil.copytree(world / "store", tmp_path / "s")
    s = CorpusStore.open(tmp_path / "s")
    assert len(s) == len(TEXTS)
    os.utime(tmp_path / "s" / "tokens.arrow")  # a touch changes mtime: hashed again, still fine
    assert len(CorpusStore.open(tmp_path / "s")) == len(TEXTS)
