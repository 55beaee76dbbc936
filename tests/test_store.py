"""The corpus store round-trips what the tokenizer produces and refuses bad states."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dense_pt.data.store import CorpusStore, build_store_from_texts
from dense_pt.data.tokenizer import special_token_ids, train_wordpiece, vocab_hash
from dense_pt.errors import FormatError, InvalidArgumentError, MismatchError

DOCS = [
    ("d1", "The river Varn floods every spring near the old mill."),
    ("d2", "Copper wire conducts electricity; silver conducts it better."),
    ("d3", "Owls hunt at night, using hearing more than sight."),
    ("d4", "A glacier carved the valley over many thousand years."),
]


@pytest.fixture(scope="module")
def tok():
    return train_wordpiece([t for _, t in DOCS] * 5, vocab_size=300, min_frequency=1)


def test_roundtrip_matches_direct_tokenization(tmp_path, tok):
    store = build_store_from_texts(tmp_path / "s", DOCS, tok)
    assert len(store) == 4
    assert store.ids.to_pylist() == ["d1", "d2", "d3", "d4"]
    for i, (pid, text) in enumerate(DOCS):
        expect = tok.encode(text, add_special_tokens=False).ids
        assert store.tokens(i).tolist() == expect
        assert store.get(pid).tolist() == expect
        assert store.tokens(i).dtype == np.uint32
    values, offsets = store.ragged()
    assert offsets[0] == 0 and offsets[-1] == len(values) == store.manifest["num_tokens"]
    sub_v, sub_o = store.ragged(rows=[2, 0])
    assert sub_v.tolist() == store.tokens(2).tolist() + store.tokens(0).tolist()
    assert sub_o.tolist() == [0, len(store.tokens(2)), len(store.tokens(2)) + len(store.tokens(0))]
    assert store.vocab_hash == vocab_hash(tok)
    assert store.special_tokens == special_token_ids(tok)


def test_word_ids_group_wordpieces(tmp_path, tok):
    store = build_store_from_texts(tmp_path / "s", [("x", "electricity electricity!")], tok)
    words = store.row(0, "word_ids")
    assert words[0] == 0 and words[-1] == 2  # two words and the "!"
    assert np.all(np.diff(words.astype(np.int64)) >= 0)


def test_max_length_counts_specials(tmp_path, tok):
    store = build_store_from_texts(tmp_path / "s", DOCS, tok, max_length=6)
    assert store.lengths().max() == 4


def test_add_column_is_checked_and_persisted(tmp_path, tok):
    store = build_store_from_texts(tmp_path / "s", DOCS, tok)
    values, offsets = store.ragged()
    imp = np.arange(len(values), dtype=np.float32)
    store.add_column("importance", imp, offsets, meta={"window": 4})
    again = CorpusStore.open(tmp_path / "s")
    assert again.has_column("importance")
    np.testing.assert_array_equal(again.row(1, "importance"), imp[offsets[1] : offsets[2]])
    with pytest.raises(FileExistsError):
        again.add_column("importance", imp, offsets)
    with pytest.raises(MismatchError):
        again.add_column("other", imp[:-1], np.r_[offsets[:-1], offsets[-1] - 1], force=True)


def test_refuses_duplicates_existing_and_broken(tmp_path, tok):
    with pytest.raises(InvalidArgumentError, match="duplicate"):
        build_store_from_texts(tmp_path / "dup", [DOCS[0], DOCS[0]], tok)
    assert not (tmp_path / "dup").exists()  # atomic: nothing left behind
    build_store_from_texts(tmp_path / "s", DOCS, tok)
    with pytest.raises(FileExistsError):
        build_store_from_texts(tmp_path / "s", DOCS, tok)
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    manifest["num_rows"] = 99
    (tmp_path / "s" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(FormatError, match="rows"):
        CorpusStore.open(tmp_path / "s")
    with pytest.raises(FormatError, match="not a corpus store"):
        CorpusStore.open(tmp_path)
