"""Messages a user can act on, through the real command line: one line, the right exit code, no
traceback. ``--max-record-mb inf``; a pickle that torch's safe loader refuses (in a model folder, in
a training checkpoint); ``--query-shard`` where there are no queries; a closed stdout
(``dense-pt ... | head -1``) ends quietly with exit 0; and no help text loses a ``[...]`` to rich
markup. (Out of memory: tests/test_machine_limits.py.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from cli_helpers import CHILD, one_line, run_cli, subcommand
from dense_pt.config.pmi import PmiBuild


@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "0"])
def test_corpus_check_refuses_a_max_record_size_that_is_not_a_positive_number(
    tmp_path, capsys, monkeypatch, value
):
    """``inf`` was "internal error: OverflowError" (int(inf))."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "hello"}\n')
    code, line = one_line(["corpus", "check", str(corpus), "--max-record-mb", value], capsys, monkeypatch)
    assert code == 2
    assert line == f"error: --max-record-mb must be positive and finite (a number of MiB), got {float(value)}"


def test_bm25_refuses_a_query_shard_without_queries(tmp_path, capsys, monkeypatch):
    """Without --queries and --out bm25 only builds the index: a --query-shard was ignored."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "hello world"}\n')
    code, line = one_line(["bm25", str(corpus), "--query-shard", "0/2"], capsys, monkeypatch)
    assert code == 2
    assert line == "error: --query-shard slices the queries: give --queries and --out too"
    assert not (tmp_path / "corpus.jsonl.bm25").exists()


# ---- a pickle torch's safe loader refuses ----------------------------------------------------------
def _evil(path: Path, state: dict) -> None:
    """``state`` saved with a harmless global that torch.load(weights_only=True) blocks (a class of
    ``os``: what a malicious file would use to run code)."""
    import torch

    torch.save({**state, "payload": os.stat_result((0,) * 10)}, path)


REFUSED = (
    r"error: {path}: refused to load: it asks for os\.stat_result, which a file of weights never needs "
    r"\(dense-pt loads pickles with torch\.load\(weights_only=True\), so that a model or checkpoint cannot "
    r"run code\); use a safetensors file, or one from a source you trust"
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("torch")
    from retrieval_fixtures import tiny_setup

    root = tmp_path_factory.mktemp("tiny")
    tiny_setup(root)
    return root


def test_a_model_whose_weights_pickle_is_refused_isone_line(tiny, tmp_path, capsys, monkeypatch):
    """transformers loads pytorch_model.bin with weights_only=True; torch's refusal was its raw
    multi-paragraph UnpicklingError."""
    import shutil

    from safetensors.torch import load_file

    model = tmp_path / "model"
    shutil.copytree(tiny / "model", model)
    weights = load_file(str(model / "model.safetensors"))
    (model / "model.safetensors").unlink()
    _evil(model / "pytorch_model.bin", weights)
    code, line = one_line(
        ["encode", str(model), str(tiny / "store"), "-o", str(tmp_path / "e"), "--max-length", "64"],
        capsys,
        monkeypatch,
    )
    assert code == 1
    assert re.fullmatch(REFUSED.format(path=re.escape(str(model / "pytorch_model.bin"))), line), line


def test_a_checkpoint_whose_optimizer_pickle_is_refused_isone_line(tiny, tmp_path, capsys, monkeypatch):
    """A training run's checkpoint (resumed by running the command again) whose optimizer state
    carries a blocked global: one line naming the file."""
    import torch

    argv = ["train", "retriever", str(tiny / "model"), "--corpus", str(tiny / "store"), "--queries",
            str(tiny / "beir" / "queries.jsonl"), "--qrels", str(tiny / "beir" / "qrels" / "train.tsv"),
            "-o", str(tmp_path / "r"), "--batch-size", "4", "--group-size", "2", "--precision", "fp32",
            "--max-steps", "1", "--save-every", "1"]  # fmt: skip
    monkeypatch.delenv("DENSE_PT_LOG", raising=False)
    code, _, err = run_cli(["-q", *argv], capsys, monkeypatch)
    assert code == 0, err
    (checkpoint,) = sorted((tmp_path / "r" / "checkpoints").glob("checkpoint-*"))
    optimizer = checkpoint / "optimizer.pt"
    _evil(optimizer, torch.load(optimizer, weights_only=True))
    code, line = one_line(argv, capsys, monkeypatch)
    assert code == 1
    assert re.fullmatch(REFUSED.format(path=re.escape(str(optimizer))), line), line


# ---- a closed stdout ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    from dense_pt.data.store import build_store_from_texts
    from dense_pt.data.tokenizer import train_wordpiece
    from dense_pt.pmi import build

    root = tmp_path_factory.mktemp("pipe")
    texts = [f"the {w} trial measured the {v} response of patients" for w in "abcdefgh" for v in "ijklmnop"]
    tok = train_wordpiece(texts, vocab_size=120, min_frequency=1)
    store = build_store_from_texts(root / "store", [(str(i), t) for i, t in enumerate(texts)], tok)
    build(store, root / "t.ngram", PmiBuild(threads=1))
    return root / "t.ngram"


@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_a_closed_stdout_ends_quietly_with_exit_0(table, as_json):
    """The reader of stdout is gone before the first line is written (``cmd | true``, or ``| head
    -1`` once head has its line): like ``ls | head``, no message and exit 0 (it was exit 1, and
    a JSON write ended in Python's "Exception ignored ... BrokenPipeError")."""
    read, write = os.pipe()
    env = {**os.environ, "COLUMNS": "120", "DENSE_PT_CACHE_DIR": ""}
    argv = [
        "pmi",
        "inspect",
        str(table),
        "--top",
        "50",
        "--top-min-count",
        "1",
        *(["--json"] if as_json else []),
    ]
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, *argv], stdout=write, stderr=subprocess.PIPE, env=env
    )
    os.close(write)
    os.close(read)  # before the child writes anything: its first write fails, every time
    _, err = child.communicate(timeout=120)
    assert child.returncode == 0 and err == b"", err.decode()


def test_head_of_a_pipe_ends_quietly(table):
    """The user's own words: ``dense-pt pmi inspect ... | head -1``."""
    script = f'"{sys.executable}" -c "$CHILD" pmi inspect "{table}" --top 200 --top-min-count 1 | head -1; exit ${{PIPESTATUS[0]}}'
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "CHILD": CHILD, "COLUMNS": "120"})  # fmt: skip
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert len(r.stdout.splitlines()) == 1


# ---- help texts keep their brackets ---------------------------------------------------------------
def _commands(cmd: object, path: tuple[str, ...] = ()):
    yield path, cmd
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        if not sub.hidden:
            yield from _commands(sub, (*path, name))


def test_no_help_text_loses_a_bracketed_word(capsys, monkeypatch):
    """rich reads help as markup and drops what looks like a tag: ``train retriever --help`` said
    "(the mining settings: )" for "(the mining settings: [mine])". Every ``[word]`` of every
    command's help, options included, must reach the screen."""
    from dense_pt.cli import app

    root = typer.main.get_command(app)
    checked = 0
    for path, cmd in _commands(root):
        texts = [cmd.help or "", getattr(cmd, "epilog", None) or ""]
        texts += [getattr(p, "help", None) or "" for p in subcommand(root, *path).params]
        words = {w.replace("\\[", "[") for t in texts for w in re.findall(r"\\?\[[^\]\s\[]+\]", t)}
        if not words:
            continue
        code, out, err = run_cli([*path, "--help"], capsys, monkeypatch)
        assert code == 0, err
        for word in words:
            assert word in out, f"dense-pt {' '.join(path)} --help lost {word!r}"
            checked += 1
        assert "\\[" not in out, f"dense-pt {' '.join(path)} --help shows an escape"
    assert checked >= 10  # [mine], [train], [data], ... : the scan saw them
