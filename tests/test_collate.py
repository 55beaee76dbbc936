"""The collator: bit-exact against the reference composition of the maskers, the batch contract
per method, determinism, pickling, errors and fork safety under a DataLoader."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collate_reference as cref
from dense_pt.collate import METHODS, Collator
from dense_pt.data.store import build_store_from_texts
from dense_pt.data.tokenizer import train_wordpiece
from dense_pt.errors import InvalidArgumentError

WORDS = (
    "dense retrieval encoders learn passage representations through masked auto encoding with a "
    "shallow decoder bottleneck contrastive spans importance scores pointwise mutual information "
    "unbelievably extraordinary tokenization"
).split()
BERT = (0.8, 0.1)
MASK_ALL = (1.0, 0.0)  # the generator's inputs of simlm / enc-dec-rtd: [MASK] at every masked position
EXPECTED: dict[str, dict[str, Any]] = {
    "mlm": {"enc": ("random", 0.3), "enc_fill": BERT, "enc_labels": "masked", "decoder": "none"},
    "cdmae": {
        "enc": ("random", 0.3),
        "enc_fill": BERT,
        "enc_labels": "masked",
        "decoder": "independent",
        "dec": ("importance", 0.5),
        "dec_fill": BERT,
        "dec_labels": "masked",
    },
    "simlm": {
        "enc": ("random", 0.3),
        "enc_fill": MASK_ALL,
        "enc_labels": "content",
        "decoder": "nested",
        "p_dec": 0.5,
        "dec_fill": MASK_ALL,
        "dec_labels": "content",
        "original": True,
    },
    "enc-dec-mlm": {
        "enc": ("random", 0.3),
        "enc_fill": BERT,
        "enc_labels": "masked",
        "decoder": "nested",
        "p_dec": 0.5,
        "dec_fill": BERT,
        "dec_labels": "masked",
    },
    "enc-dec-rtd": {
        "enc": ("random", 0.3),
        "enc_fill": MASK_ALL,
        "enc_labels": "masked",
        "decoder": "nested",
        "p_dec": 0.5,
        "dec_fill": MASK_ALL,
        "dec_labels": "masked",
        "original": True,
    },
    "seed": {
        "enc": ("random", 0.15),
        "enc_fill": BERT,
        "enc_labels": "masked",
        "decoder": "clean",
        "dec_labels": "content",
    },
    "condenser": {"enc": ("random", 0.15), "enc_fill": BERT, "enc_labels": "masked", "decoder": "none"},
    "autoencoder": {"enc": None, "enc_labels": "none", "decoder": "all_mask", "dec_labels": "content"},
    "contrastive": {
        "enc": ("random", 0.15),
        "enc_fill": BERT,
        "enc_labels": "masked",
        "decoder": "none",
        "spans": True,
    },
}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 60)))) for _ in range(40)]
    tok = train_wordpiece(texts, vocab_size=150, min_frequency=1)
    s = build_store_from_texts(
        tmp_path_factory.mktemp("store") / "s", [(str(i), t) for i, t in enumerate(texts)], tok
    )
    values, offsets = s.ragged("input_ids")
    imp = np.round(rng.normal(size=len(values)) * 2) / 2  # ties happen
    s.add_column("importance", imp.astype(np.float16), offsets)
    return s


def ref_cfg(store, method, max_length, seed, crop="random", pad_to_max=False, multiple=1, whole_word=False):
    e = EXPECTED[method]
    sp = store.special_tokens

    def spec(t):
        return None if t is None else (t[0], t[1], 1.0, whole_word)

    return {
        "max_length": max_length,
        "crop": crop,
        "pad_to_max": pad_to_max,
        "multiple": multiple,
        "cls": sp["cls"],
        "sep": sp["sep"],
        "pad": sp["pad"],
        "mask": sp["mask"],
        "vocab": store.vocab_size,
        "specials": sorted(set(sp.values())),
        "seed": seed,
        "enc": spec(e["enc"]),
        "enc_fill": e.get("enc_fill"),
        "enc_labels": e["enc_labels"],
        "decoder": e["decoder"],
        "dec": spec(e.get("dec")),
        "p_dec": e.get("p_dec", 0.0),
        "dec_fill": e.get("dec_fill"),
        "dec_labels": e.get("dec_labels", "masked"),
        "spans": (min(16, max_length - 2), max_length - 2, 2) if e.get("spans") else None,
        "original": e.get("original", False),
    }


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(METHODS),
    st.integers(4, 48),
    st.integers(0, 2**63 - 1),  # a seed is an int64 setting (the config's bound for every count)
    st.integers(0, 3),
    st.lists(st.integers(0, 39), min_size=1, max_size=6),
    st.sampled_from(["random", "head"]),
    st.booleans(),
    st.sampled_from([1, 8]),
    st.booleans(),
)
def test_collator_equals_reference_composition(
    store, method, max_length, seed, epoch, rows, crop, pad_to_max, multiple, whole_word
):
    c = Collator(
        store,
        method,
        max_length=max_length,
        seed=seed,
        crop=crop,
        pad_to="max_length" if pad_to_max else "longest",
        pad_to_multiple_of=multiple,
        whole_word=whole_word,
    )
    got = c(rows, epoch=epoch)
    values, offsets = store.ragged("input_ids")
    want = cref.collate(
        values,
        offsets,
        rows,
        epoch,
        ref_cfg(store, method, max_length, seed, crop, pad_to_max, multiple, whole_word),
        importance=store.ragged("importance")[0],
        word_ids=store.ragged("word_ids")[0],
    )
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k].dtype == want[k].dtype, k
        assert np.array_equal(got[k], want[k]), k


@pytest.mark.parametrize("method", METHODS)
def test_batch_contract(store, method):
    b = Collator(store, method, max_length=32, seed=3)(list(range(0, 40, 3)))
    ids, att, lab = b["input_ids"], b["attention_mask"], b["labels"]
    assert ids.dtype == np.int64 and att.dtype == np.int64 and lab.dtype == np.int64
    assert b["special_tokens_mask"].dtype == np.bool_
    real = att.astype(bool) & ~b["special_tokens_mask"]
    for key in ("enc_mask", "dec_mask"):
        if key in b:
            assert b[key].dtype == np.bool_
            assert not (b[key] & ~real).any()  # special and pad positions are never masked
    assert not ((lab != -100) & ~real).any()
    if "enc_mask" in b and EXPECTED[method]["enc_labels"] == "masked":
        assert np.array_equal(lab != -100, b["enc_mask"])  # labels exactly where masked
    if EXPECTED[method].get("decoder") == "nested":
        assert not (b["enc_mask"] & ~b["dec_mask"]).any()
    if method in ("simlm", "enc-dec-rtd"):
        # the generator's two inputs: [MASK] exactly at each view's positions, the original elsewhere
        mask_id, orig = store.special_tokens["mask"], b["original_ids"]
        assert np.array_equal(ids == mask_id, b["enc_mask"])
        assert np.array_equal(b["dec_input_ids"] == mask_id, b["dec_mask"])
        assert np.array_equal(ids[~b["enc_mask"]], orig[~b["enc_mask"]])
        assert np.array_equal(b["dec_input_ids"][~b["dec_mask"]], orig[~b["dec_mask"]])
    if method == "autoencoder":
        assert np.array_equal(ids[real], b["dec_labels"][real])
        assert (b["dec_input_ids"][real] == store.special_tokens["mask"]).all()
    if method == "contrastive":
        assert b["span_input_ids"].shape[0] == 2 * ids.shape[0]


def test_cdmae_decoder_masks_follow_importance(store):
    # sigma=0: the decoder masks exactly the top-half importance of the (cropped) content
    c = Collator(store, "cdmae", max_length=512, sigma=0.0, return_original=True)
    b = c(list(range(40)))
    imp = store.ragged("importance")[0].astype(np.float64)
    _, offsets = store.ragged("input_ids")
    for i in range(40):
        row = imp[offsets[i] : offsets[i + 1]]
        n = len(row)
        order = sorted(range(n), key=lambda j: (-row[j], j))[: n // 2]
        want = np.zeros(b["dec_mask"].shape[1], dtype=bool)
        want[[j + 1 for j in order]] = True
        assert np.array_equal(b["dec_mask"][i], want)


def test_rows_do_not_depend_on_batch_composition(store):
    c = Collator(store, "cdmae", max_length=24, seed=9, pad_to="max_length")
    full = c([5, 17, 30, 2], epoch=1)
    for i, r in enumerate([5, 17, 30, 2]):
        alone = c([r], epoch=1)
        for k in alone:
            assert np.array_equal(full[k][i], alone[k][0]), k
    assert not np.array_equal(c([5, 17], epoch=2)["input_ids"], full["input_ids"][:2])


def test_settings_override_presets(store):
    b = Collator(store, "cdmae", max_length=40, dec_fill="mask", p_enc=0.5, pad_to_multiple_of=8)(range(10))
    assert b["input_ids"].shape[1] % 8 == 0
    mask_id = store.special_tokens["mask"]
    assert (b["dec_input_ids"][b["dec_mask"]] == mask_id).all()
    real = (b["attention_mask"] == 1) & ~b["special_tokens_mask"]
    assert np.array_equal(b["enc_mask"].sum(1), np.floor(real.sum(1) * 0.5))


def test_pickle_round_trip_and_from_arrays(store):
    c = Collator(store, "simlm", max_length=20, seed=4, whole_word=True)
    c.set_epoch(3)
    c2 = pickle.loads(pickle.dumps(c))
    a, b = c(range(8)), c2(range(8))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    values, offsets = store.ragged("input_ids")
    raw = Collator.from_arrays(
        values,
        offsets,
        vocab_size=store.vocab_size,
        special_tokens=store.special_tokens,
        importance=store.ragged("importance")[0],
        method="cdmae",
        max_length=20,
    )
    same = Collator(store, "cdmae", max_length=20)
    x, y = raw(range(6)), pickle.loads(pickle.dumps(raw))(range(6))
    z = same(range(6))
    assert all(np.array_equal(x[k], y[k]) and np.array_equal(x[k], z[k]) for k in x)


def test_settings_are_one_model_refusing_by_name(store):
    """The collator's settings are CollatorSettings' fields: a bad value or an unknown key is one
    ConfigError naming the setting (from the constructor and from from_arrays), a numpy seed is a
    seed, and the resolved settings carry the paper's values where none was given."""
    from dense_pt.config import ConfigError
    from dense_pt.config.collate import CollatorSettings

    for kwargs, key in (
        ({"pad_to": "shortest"}, "pad_to"),
        ({"enc_fill": "zero"}, "enc_fill"),
        ({"num_spans": 0}, "num_spans"),
        ({"seed": -1}, "seed"),
        ({"seed": True}, "seed"),
        ({"sigma": -0.5}, "sigma"),
        ({"p_enc": 1.5}, "p_enc"),
        ({"span_min": 3}, "span_min"),
    ):
        with pytest.raises(ConfigError, match=rf"^{key}: "):
            Collator(store, "cdmae", **kwargs)
    values, offsets = store.ragged("input_ids")
    with pytest.raises(ConfigError, match=r"^crop: "):
        Collator.from_arrays(values, offsets, vocab_size=store.vocab_size, special_tokens=store.special_tokens,
                             whole_word=False, crop="middle")  # fmt: skip
    a = Collator(store, "cdmae", max_length=20, seed=np.uint32(7))
    b = Collator(store, "cdmae", max_length=20, seed=7)
    assert all(np.array_equal(v, b(range(4))[k]) for k, v in a(range(4)).items())
    assert a.settings.p_dec == 0.5 and a.settings.sigma == 1.0 and a.settings.max_length == 20
    assert CollatorSettings().num_spans == Collator(store, "contrastive").settings.num_spans


def test_bad_input_raises_invalid_argument(store, tmp_path):
    with pytest.raises(InvalidArgumentError, match="unknown method"):
        Collator(store, "bert")
    with pytest.raises(InvalidArgumentError, match="max_length"):
        Collator(store, "mlm", max_length=2)
    c = Collator(store, "mlm")
    with pytest.raises(InvalidArgumentError, match="empty batch"):
        c([])
    with pytest.raises(InvalidArgumentError, match="row 40 is out of range"):
        c([1, 40])
    with pytest.raises(InvalidArgumentError, match="row -1 is out of range"):
        c([-1])
    with pytest.raises(InvalidArgumentError, match="rows must be integers"):
        c([0.5])  # type: ignore[list-item]  # bad on purpose
    with pytest.raises(InvalidArgumentError, match="enc_fill"):
        Collator(store, "mlm", enc_fill="zero")
    with pytest.raises(InvalidArgumentError, match="p_enc <= p_dec"):
        Collator(store, "simlm", p_enc=0.7)
    values, offsets = store.ragged("input_ids")
    no_imp = build_store_from_texts(tmp_path / "plain", [("a", "dense retrieval")], store.tokenizer())
    with pytest.raises(InvalidArgumentError, match="'importance' column"):
        Collator(no_imp, "cdmae")
    bad = values.astype(np.int64)
    bad[3] = store.vocab_size
    with pytest.raises(InvalidArgumentError, match=r"masks whole words .* pass word_ids"):
        Collator.from_arrays(bad, offsets, vocab_size=store.vocab_size, special_tokens=store.special_tokens)
    raw = Collator.from_arrays(
        bad, offsets, vocab_size=store.vocab_size, special_tokens=store.special_tokens, whole_word=False
    )
    with pytest.raises(InvalidArgumentError, match="outside \\[0, vocab_size"):
        raw(range(5))
    nan = store.ragged("importance")[0].astype(np.float32)
    nan[offsets[2]] = np.nan
    raw = Collator.from_arrays(
        values,
        offsets,
        vocab_size=store.vocab_size,
        special_tokens=store.special_tokens,
        importance=nan,
        method="cdmae",
        max_length=512,
    )
    with pytest.raises(InvalidArgumentError, match="NaN"):
        raw([2])


FORK_SCRIPT = textwrap.dedent(
    """
    import sys, numpy as np, torch
    from torch.utils.data import DataLoader
    from dense_pt.collate import Collator
    from dense_pt.data.store import CorpusStore
    from dense_pt.masking import random_mask

    # Make the thread pool in the parent first: a forked child inherits a dead copy of it.
    ids = np.ones((64, 32), dtype=np.int64)
    random_mask(ids, ids, 0.5, 0, num_threads=2)

    collator = Collator(CorpusStore.open(sys.argv[1]), "cdmae", max_length=32, seed=1)

    def collate(rows):
        random_mask(ids, ids, 0.5, 0, num_threads=2)  # a parallel call inside the worker too
        return collator(rows)

    loader = DataLoader(range(40), batch_size=8, num_workers=2, collate_fn=collate,
                        multiprocessing_context="fork")
    batches = list(loader)
    for i, b in enumerate(batches):
        want = collator(list(range(8 * i, 8 * i + 8)))
        assert all(np.array_equal(b[k], want[k]) for k in want)
    t = {k: torch.from_numpy(v) for k, v in batches[0].items()}
    assert t["input_ids"].dtype == torch.int64
    print("ok", len(batches))
    """
)


def test_fork_safety_with_dataloader_workers(store, tmp_path):
    script = tmp_path / "fork_check.py"
    script.write_text(FORK_SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script), str(store.path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok 5"


def test_collate_does_not_import_torch(store):
    code = f"import sys; from dense_pt.collate import Collator; Collator({str(store.path)!r}, 'mlm')([0]); assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cli_mask_preview(store):
    import json

    from typer.testing import CliRunner

    from dense_pt.cli import app

    runner = CliRunner()
    res = runner.invoke(
        app, ["mask", "preview", str(store.path), "--method", "cdmae", "--row", "3", "--row", "5", "--json"]
    )
    assert res.exit_code == 0, res.output
    items = json.loads(res.output)
    assert [i["row"] for i in items] == [3, 5]
    assert items[0]["encoder"].startswith("[CLS]") and "[MASK]" in items[0]["decoder"]
    res = runner.invoke(app, ["mask", "preview", str(store.path), "--method", "contrastive"])
    assert res.exit_code == 0 and "span 1:" in res.output
    res = runner.invoke(app, ["mask", "preview", str(store.path), "--method", "nope"])  # the option's choices
    assert res.exit_code == 2 and "'nope' is not one of" in " ".join(
        re.sub("[│╭╮╰╯─]", " ", res.output).split()
    )


def test_the_old_keyword_names_are_deprecated_aliases(store):
    """``enc_p`` / ``dec_p`` (the collator's names before it took MethodOptions') still work, with a
    DeprecationWarning, as ``p_enc`` / ``p_dec``; a run's MethodOptions is taken whole."""
    from dense_pt.config import ConfigError
    from dense_pt.objectives import MethodOptions

    new = Collator(store, "simlm", max_length=24, p_enc=0.2, p_dec=0.6)
    with pytest.warns(DeprecationWarning, match=r"(enc_p is now p_enc|dec_p is now p_dec)"):
        old = Collator(store, "simlm", max_length=24, enc_p=0.2, dec_p=0.6)
    assert old.settings == new.settings
    whole = Collator(store, "simlm", MethodOptions(p_enc=0.2, p_dec=0.6, generator="joint"), max_length=24)
    assert whole.settings == new.settings
    a, b = new(range(8)), whole(range(8))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    with pytest.raises(ConfigError, match="give p_enc alone"), pytest.warns(DeprecationWarning):
        Collator(store, "simlm", enc_p=0.2, p_enc=0.3)
    with pytest.raises(InvalidArgumentError, match="settings must be a CollatorSettings or MethodOptions"):
        Collator(store, "simlm", 24)  # type: ignore[arg-type]  # bad on purpose
