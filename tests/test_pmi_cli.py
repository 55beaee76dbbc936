"""`dense-pt pmi` end to end on a small store: build, shards + merge, score, inspect, errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from typer.testing import CliRunner

from dense_pt.cli import app
from dense_pt.data.store import CorpusStore, build_store_from_texts
from dense_pt.data.tokenizer import train_wordpiece

TEXTS = [
    "the immune response to the vaccine was measured in the trial",
    "the vaccine trial enrolled elderly patients with chronic disease",
    "chronic inflammation drives the immune response in elderly patients",
    "patients in the trial received the vaccine or a placebo",
]


def test_pmi_cli(tmp_path):
    tok = train_wordpiece(TEXTS * 3, vocab_size=150, min_frequency=1)
    store = build_store_from_texts(tmp_path / "store", [(str(i), t) for i, t in enumerate(TEXTS)], tok)
    runner = CliRunner()
    table = tmp_path / "t.ngram"
    r = runner.invoke(app, ["pmi", "build", str(store.path), "--out", str(table), "--threads", "2"])
    assert r.exit_code == 0, r.output
    assert "peak RSS" in r.output and table.exists()
    for i in range(2):
        r = runner.invoke(
            app, ["pmi", "build", str(store.path), "--out", str(tmp_path / f"p{i}"), "--shard", f"{i}/2"]
        )
        assert r.exit_code == 0, r.output
    r = runner.invoke(
        app, ["pmi", "merge", str(tmp_path / "p1"), str(tmp_path / "p0"), "--out", str(tmp_path / "m")]
    )
    assert r.exit_code == 0, r.output
    assert (tmp_path / "m").read_bytes() == table.read_bytes()
    r = runner.invoke(app, ["pmi", "score", str(store.path), "--table", str(table), "--dtype", "float16"])
    assert r.exit_code == 0, r.output
    assert CorpusStore.open(store.path).ragged("importance")[0].dtype == np.float16
    r = runner.invoke(
        app,
        ["pmi", "inspect", str(table), "--tokenizer", str(store.path), "--text", TEXTS[0], "--top", "3",
         "--top-min-count", "1"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "top 3 2-grams by PMI" in r.output and "AMI per token" in r.output and "vaccine" in r.output
    r = runner.invoke(app, ["pmi", "inspect", str(table), "--json"])
    assert r.exit_code == 0 and '"max_n": 4' in r.output

    # A table of another vocabulary: one red line, exit code 1 (the data, not the usage).
    other = train_wordpiece(["completely different words here"] * 3, vocab_size=60, min_frequency=1)
    s2 = build_store_from_texts(tmp_path / "store2", [("x", "different words")], other)
    proc = subprocess.run(
        [sys.executable, "-m", "dense_pt", "pmi", "score", str(s2.path), "--table", str(table)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stderr
    assert "t.ngram" in proc.stderr and "vocabulary" in proc.stderr


def test_inspect_text_with_a_tokenizer_that_pads_shows_no_padding(tmp_path):
    """all-MiniLM-L6-v2's tokenizer.json pads to 128: inspect printed ~115 [PAD](0.0) after the
    text. Every tokenization with a user's tokenizer turns padding and truncation off."""
    from tokenizers import Tokenizer

    tok = train_wordpiece(TEXTS * 3, vocab_size=150, min_frequency=1)
    padded = Tokenizer.from_str(tok.to_str())
    padded.enable_padding(length=128, pad_id=0, pad_token="[PAD]")
    padded.enable_truncation(max_length=128)
    padded.save(str(tmp_path / "padded.json"))
    store = build_store_from_texts(tmp_path / "store", [(str(i), t) for i, t in enumerate(TEXTS)], tok)
    runner = CliRunner()
    r = runner.invoke(app, ["pmi", "build", str(store.path), "--out", str(tmp_path / "t.pmi")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        app,
        ["pmi", "inspect", str(tmp_path / "t.pmi"), "--tokenizer", str(tmp_path / "padded.json"),
         "--text", "the vaccine trial", "--top", "0"],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "[PAD]" not in r.output and "vaccine(" in r.output
    assert "top 0" not in r.output


def test_without_a_terminal_progress_is_plain_lines(tmp_path):
    """Under nohup or in a pipe a live bar prints nothing for the whole run: plain lines instead,
    a phase's start and end (the periodic status line: tests/test_progress.py)."""
    tok = train_wordpiece(TEXTS * 3, vocab_size=150, min_frequency=1)
    store = build_store_from_texts(tmp_path / "store", [(str(i), t) for i, t in enumerate(TEXTS)], tok)
    r = CliRunner().invoke(app, ["pmi", "build", str(store.path), "--out", str(tmp_path / "t.pmi")])
    assert r.exit_code == 0, r.output
    assert "pmi build: order 1: started" in r.output and "pmi build: order 1: done, " in r.output
