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


# ---- checksums ----------------------------------------------------------------------------------
def _flip(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x04  # inside the record batches, not the footer
    path.write_bytes(bytes(data))


def test_every_file_is_checksummed_and_a_flipped_byte_is_an_error(tmp_path, tok):
    """The flipped byte was read as another token id (1012 as 779) before the store had checksums."""
    store = build_store_from_texts(tmp_path / "s", DOCS, tok)
    store.add_column("importance", np.ones(store.lengths().sum(), np.float32), store.ragged()[1])
    files = json.loads((tmp_path / "s" / "manifest.json").read_text())["files"]
    assert sorted(files) == ["importance.arrow", "tokenizer.json", "tokens.arrow"]
    for name, entry in files.items():
        assert entry["bytes"] == (tmp_path / "s" / name).stat().st_size and len(entry["xxh3_128"]) == 32
    _flip(tmp_path / "s" / "tokens.arrow")
    with pytest.raises(FormatError, match=r"tokens\.arrow: checksum mismatch"):
        CorpusStore.open(tmp_path / "s")
    CorpusStore.open(tmp_path / "s", verify="none")  # explicitly unchecked: opens
    data = bytearray((tmp_path / "s" / "tokens.arrow").read_bytes())
    data[-100] ^= 0x04
    (tmp_path / "s" / "broken.arrow").write_bytes(bytes(data))
    from dense_pt.data.store import _read_arrow

    with pytest.raises(FormatError, match=r"broken\.arrow: not a readable Arrow IPC file"):
        _read_arrow(tmp_path / "s" / "broken.arrow")  # a damaged footer: not an OSError traceback
    _flip(tmp_path / "s" / "tokens.arrow")  # back as it was: fine again
    s = CorpusStore.open(tmp_path / "s")
    _flip(tmp_path / "s" / "importance.arrow")
    with pytest.raises(FormatError, match=r"importance\.arrow: checksum mismatch"):
        s.ragged("importance")  # a column is checked when first read
    with pytest.raises(FormatError, match=r"importance\.arrow: checksum mismatch"):
        CorpusStore.open(tmp_path / "s").verify_columns()


def test_verification_is_cached_per_file_state(tmp_path, tok, monkeypatch):
    """A second open of an unchanged store hashes nothing; any write to a file hashes it again;
    `verify="full"` always hashes. The cache survives the process (a folder of small files)."""
    import dense_pt.artifacts.checksums as fs

    monkeypatch.setenv("DENSE_PT_CACHE_DIR", str(tmp_path / "cache"))
    build_store_from_texts(tmp_path / "s", DOCS, tok)
    hashed: list[str] = []
    real = fs.file_checksum

    def recording(p):
        hashed.append(str(p))
        return real(p)

    monkeypatch.setattr(fs, "file_checksum", recording)
    monkeypatch.setattr("dense_pt.data.store.file_checksum", fs.file_checksum)
    CorpusStore.open(tmp_path / "s")
    assert hashed == []  # verified as written
    fs._verified.clear()  # a new process: only the cache folder remembers
    CorpusStore.open(tmp_path / "s")
    assert hashed == [] and len(list((tmp_path / "cache" / "verified").iterdir())) == 2
    CorpusStore.open(tmp_path / "s", verify="full")
    assert len(hashed) == 2
    hashed.clear()
    tokens = tmp_path / "s" / "tokens.arrow"
    tokens.write_bytes(tokens.read_bytes())  # same bytes, a new mtime
    CorpusStore.open(tmp_path / "s")
    assert [h.rsplit("/", 1)[1] for h in hashed] == ["tokens.arrow"]


def test_a_store_written_before_checksums_still_opens(tmp_path, tok):
    build_store_from_texts(tmp_path / "s", DOCS, tok)
    mpath = tmp_path / "s" / "manifest.json"
    manifest = json.loads(mpath.read_text())
    del manifest["files"]
    mpath.write_text(json.dumps(manifest))
    s = CorpusStore.open(tmp_path / "s")
    s.add_column("importance", np.ones(s.lengths().sum(), np.float32), s.ragged()[1])
    assert not json.loads(mpath.read_text()).get("files")  # still none: the store had no checksums
    assert CorpusStore.open(tmp_path / "s").ragged("importance")[0].size == s.lengths().sum()


@pytest.mark.parametrize("name", ["../evil", "a/b", "tokens", "manifest", "input_ids", "", "1st", "x" * 101])
def test_column_names_are_plain_identifiers(tmp_path, tok, name):
    store = build_store_from_texts(tmp_path / "s", DOCS, tok)
    with pytest.raises(InvalidArgumentError, match=r"plain identifier|reserved"):
        store.add_column(name, np.ones(store.lengths().sum(), np.float32), store.ragged()[1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [
        "manifest.json",
        "tokenizer.json",
        "tokens.arrow",
    ]


def test_the_stores_tokenizer_never_pads(tmp_path, tok):
    from tokenizers import Tokenizer

    padded = Tokenizer.from_str(tok.to_str())
    padded.enable_padding(length=64)
    padded.enable_truncation(max_length=64)
    store = build_store_from_texts(tmp_path / "s", DOCS, padded)
    t = store.tokenizer()
    assert t.padding is None and t.truncation is None
    assert len(t.encode("owls", add_special_tokens=False).ids) < 5
