"""dense_pt.masking against the plain reference (bit for bit) and its documented properties."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import masking_reference as ref
from dense_pt import _native
from dense_pt.errors import InvalidArgumentError
from dense_pt.masking import (
    IGNORE_INDEX,
    importance_mask,
    nested_masks,
    random_mask,
    replace,
    span_crop,
)

SPECIALS = (0, 1, 2, 3, 4)  # [PAD] [UNK] [CLS] [SEP] [MASK], like train_wordpiece
VOCAB = 60


@st.composite
def batches(draw, max_rows=6, max_len=20):
    """A padded batch: [CLS] content [SEP] [PAD]..., word ids with multi-token words, importance."""
    b = draw(st.integers(1, max_rows))
    length = draw(st.integers(0, max_len))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    ids = np.zeros((b, length), dtype=np.int64)
    att = np.zeros((b, length), dtype=np.int64)
    special = np.zeros((b, length), dtype=bool)
    words = np.full((b, length), -1, dtype=np.int64)
    for r in range(b):
        n = int(rng.integers(0, length + 1))
        ids[r, :n] = rng.integers(5, VOCAB, n)
        att[r, :n] = 1
        if n:
            ids[r, 0], special[r, 0] = 2, True
        if n > 1:
            ids[r, n - 1], special[r, n - 1] = 3, True
        w = np.cumsum(rng.random(n) < 0.6) - 1
        words[r, :n] = np.where(special[r, :n], -1, w)
    importance = np.round(rng.normal(size=(b, length)) * 2) / 2  # coarse: ties happen
    dtype = draw(st.sampled_from([np.float16, np.float32, np.float64]))
    return ids, att, special, words, importance.astype(dtype)


probs = st.floats(0.0, 1.0)
seeds = st.integers(0, 2**64 - 1)


def test_rng_stream_matches_reference_port():
    for seed, key, purpose in [(0, 0, 1), (2**64 - 1, 12345, 2), (7, 2**63, 99)]:
        got = _native._rng_stream("u64", seed, key, purpose, 50)
        r = ref.RowRng.for_purpose(seed, key, purpose)
        assert [int(v) for v in got] == [r.next_u64() for _ in range(50)]
    got = _native._rng_stream("normal", 3, 4, 2, 20_000)
    r = ref.RowRng.for_purpose(3, 4, 2)
    assert np.array_equal(got, [ref.standard_normal(r) for _ in range(20_000)])
    assert abs(got.mean()) < 0.03 and abs(got.std() - 1) < 0.03 and got.max() > ref.ZIG_R
    got = _native._rng_stream("noise", 3, 4, 2, 20_001)
    noise = ref.Noise(ref.RowRng.for_purpose(3, 4, 2))
    assert np.array_equal(got, [noise.deviate(i) for i in range(20_001)])
    assert abs(got.mean()) < 0.03 and abs(got.std() - 1) < 0.03 and got.max() > ref.ZIG_R


@settings(max_examples=100, deadline=None)
@given(batches(), probs, seeds, st.booleans())
def test_random_mask_matches_reference(batch, p, seed, whole_words):
    ids, att, special, words, _ = batch
    w = words if whole_words else None
    got = random_mask(ids, att, p, seed, special, word_ids=w)
    assert np.array_equal(got, ref.random_mask(ids, att, p, seed, special, word_ids=w))
    for r in range(ids.shape[0]):
        n = int((att[r].astype(bool) & ~special[r]).sum())
        if not whole_words:
            assert got[r].sum() == math.floor(n * p)
        assert got[r].sum() <= math.floor(n * p)
    assert not (got & ~att.astype(bool)).any() and not (got & special).any()


@settings(max_examples=100, deadline=None)
@given(batches(), probs, seeds, st.sampled_from([0.0, 0.5, 1.0]), st.booleans())
def test_importance_mask_matches_reference(batch, p, seed, sigma, whole_words):
    ids, att, special, words, imp = batch
    w = words if whole_words else None
    got = importance_mask(ids, att, imp, p, seed, sigma, special, word_ids=w)
    assert np.array_equal(got, ref.importance_mask(ids, att, imp, p, seed, sigma, special, word_ids=w))
    assert not (got & ~att.astype(bool)).any() and not (got & special).any()


@settings(max_examples=100, deadline=None)
@given(batches(), probs, seeds)
def test_sigma_zero_is_exact_topk(batch, p, seed):
    ids, att, special, _, imp = batch
    got = importance_mask(ids, att, imp, p, seed, 0.0, special)
    for r in range(ids.shape[0]):
        pos = [c for c in range(ids.shape[1]) if att[r, c] and not special[r, c]]
        pos.sort(key=lambda c: (-float(imp[r, c]), c))  # ties: earlier position first
        want = np.zeros(ids.shape[1], dtype=bool)
        want[pos[: math.floor(len(pos) * p)]] = True
        assert np.array_equal(got[r], want)
    # sigma=0 ignores the seed
    assert np.array_equal(got, importance_mask(ids, att, imp, p, seed ^ 1, 0.0, special))


@settings(max_examples=100, deadline=None)
@given(batches(), probs, probs, seeds, st.booleans(), st.booleans())
def test_nested_masks_match_reference_and_nest(batch, p1, p2, seed, use_imp, whole_words):
    ids, att, special, words, imp = batch
    p_enc, p_dec = min(p1, p2), max(p1, p2)
    w = words if whole_words else None
    importance = imp if use_imp else None
    enc, dec = nested_masks(ids, att, p_enc, p_dec, seed, importance, special, word_ids=w)
    r_enc, r_dec = ref.nested_masks(ids, att, p_enc, p_dec, seed, importance, special, word_ids=w)
    assert np.array_equal(enc, r_enc) and np.array_equal(dec, r_dec)
    assert not (enc & ~dec).any()
    if not whole_words:
        n = (att.astype(bool) & ~special).sum(1)
        assert np.array_equal(enc.sum(1), np.floor(n * p_enc)) and np.array_equal(
            dec.sum(1), np.floor(n * p_dec)
        )
    single = (
        importance_mask(ids, att, imp, p_dec, seed, 1.0, special, word_ids=w)
        if use_imp
        else random_mask(ids, att, p_dec, seed, special, word_ids=w)
    )
    assert np.array_equal(dec, single)


@settings(max_examples=100, deadline=None)
@given(batches(), probs, seeds, st.sampled_from([(0.8, 0.1), (1.0, 0.0), (0.0, 1.0), (0.5, 0.5)]))
def test_replace_matches_reference_and_labels_exactly_where_masked(batch, p, seed, probs_):
    ids, att, special, _, _ = batch
    mask = random_mask(ids, att, p, seed, special)
    mask_prob, random_prob = probs_
    new, labels = replace(ids, mask, 4, VOCAB, seed, mask_prob, random_prob, special_ids=SPECIALS)
    r_new, r_labels = ref.replace(ids, mask, 4, VOCAB, seed, mask_prob, random_prob, special_ids=SPECIALS)
    assert np.array_equal(new, r_new) and np.array_equal(labels, r_labels)
    assert new.dtype == ids.dtype and labels.dtype == np.int64
    assert np.array_equal(labels != IGNORE_INDEX, mask)  # labels set exactly where masked
    assert np.array_equal(labels[mask], ids[mask])
    assert np.array_equal(new[~mask], ids[~mask])
    changed = mask & (new != 4)
    assert not np.isin(new[changed], SPECIALS).any()  # random tokens are never special


def test_replacement_proportions_within_binomial_bounds():
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 1000, size=(2000, 100))
    mask = np.ones_like(ids, dtype=bool)
    new, _ = replace(ids, mask, 4, 1000, seed=123, special_ids=SPECIALS)
    n = ids.size
    random_hits_original = 0.1 / 995  # a random draw can equal the original id
    for observed, p in [
        ((new == 4).sum(), 0.8),
        ((new == ids).sum(), 0.1 + random_hits_original),
        (((new != 4) & (new != ids)).sum(), 0.1 - random_hits_original),
    ]:
        sd = math.sqrt(n * p * (1 - p))
        assert abs(observed - n * p) < 4.5 * sd, (observed, n * p)
    assert not np.isin(new, [0, 1, 2, 3]).any()
    # random replacements are uniform over the non-special vocabulary (chi-square, 995 bins)
    rand = new[(new != 4) & (new != ids)]
    counts = np.bincount(rand, minlength=1000)[5:]
    expected = rand.size / 995
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 995 + 5 * math.sqrt(2 * 995)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(0, 300), min_size=1, max_size=20),
    st.integers(1, 50),
    st.integers(0, 60),
    seeds,
    st.integers(1, 4),
)
def test_span_crop_matches_reference(lengths, min_len, extra, seed, n):
    max_len = min_len + extra
    s, e = span_crop(np.array(lengths), min_len, max_len, seed, n=n)
    rs, re_ = ref.span_crop(lengths, min_len, max_len, seed, n)
    assert np.array_equal(s, rs) and np.array_equal(e, re_)
    lens = np.array(lengths)[:, None]
    assert ((0 <= s) & (s <= e) & (e <= lens)).all()
    width = e - s
    assert ((width >= np.minimum(min_len, lens)) & (width <= np.minimum(max_len, lens))).all()


@settings(max_examples=30, deadline=None)
@given(batches(max_rows=8), probs, seeds, st.integers(1, 7))
def test_determinism_across_threads_and_batch_splits(batch, p, seed, cut):
    ids, att, special, words, imp = batch
    B = ids.shape[0]
    cut = cut % B  # the tail is never empty
    for fn in (
        lambda sl, **kw: random_mask(ids[sl], att[sl], p, seed, special[sl], word_ids=words[sl], **kw),
        lambda sl, **kw: importance_mask(ids[sl], att[sl], imp[sl], p, seed, 1.0, special[sl], **kw),
        lambda sl, **kw: nested_masks(ids[sl], att[sl], p / 2, p, seed, None, special[sl], **kw)[0],
    ):
        full = fn(slice(None))
        assert np.array_equal(full, fn(slice(None), num_threads=4))
        tail = fn(slice(cut, None), row_keys=np.arange(cut, B))
        assert np.array_equal(full[cut:], tail)
    mask = random_mask(ids, att, p, seed, special)
    rep = replace(ids, mask, 4, VOCAB, seed, special_ids=SPECIALS)
    rep_tail = replace(
        ids[cut:], mask[cut:], 4, VOCAB, seed, special_ids=SPECIALS, row_keys=np.arange(cut, B)
    )
    rep_par = replace(ids, mask, 4, VOCAB, seed, special_ids=SPECIALS, num_threads=3)
    assert np.array_equal(rep[0][cut:], rep_tail[0]) and np.array_equal(rep[0], rep_par[0])


def test_special_ids_exclude_positions_without_a_mask():
    ids = np.array([[2, 10, 11, 12, 3, 0, 0]])
    att = (ids != 0).astype(np.int32)
    m = random_mask(ids, att, 1.0, 0, special_ids=(0, 2, 3))
    assert m.tolist() == [[False, True, True, True, False, False, False]]


def test_dtypes_are_accepted_without_changing_results():
    rng = np.random.default_rng(1)
    ids = rng.integers(5, 50, size=(3, 9))
    att = np.ones_like(ids)
    imp = rng.random((3, 9))
    want = importance_mask(ids, att, imp, 0.4, 5)
    for id_dtype in (np.int32, np.uint32, np.int16, np.uint64):
        for att_dtype in (bool, np.uint8, np.int8, np.int64):
            got = importance_mask(ids.astype(id_dtype), att.astype(att_dtype), imp, 0.4, 5)
            assert np.array_equal(got, want)
    # non-contiguous inputs
    wide = np.zeros((3, 18), dtype=np.int64)
    wide[:, ::2] = ids
    assert np.array_equal(random_mask(wide[:, ::2], att, 0.5, 1), random_mask(ids, att, 0.5, 1))


def test_every_argument_form_takes_the_one_path():
    """The natives read [B, L] arrays in place and hand anything else to ``masking._coerce``:
    lists, strided views, other integer dtypes, float16, a numpy seed, special ids and row keys in
    any sequence give the in-place call's bits, with word ids, special ids and row keys together
    (the combination the former fast path never took)."""
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 40, size=(4, 12))
    ids[:, 0] = 2
    att = np.ones_like(ids)
    att[2, 8:] = 0
    imp = rng.random(ids.shape).astype(np.float16)
    words = np.repeat(np.arange(6), 2)[None].repeat(4, 0)
    # Any: the test hands the natives every accepted form of each argument.
    kw: dict[str, Any] = {
        "word_ids": words,
        "special_ids": (0, 2),
        "row_keys": np.array([9, 3, 7, 1], dtype=np.uint64),
    }
    alt: dict[str, Any] = {
        "word_ids": words.tolist(),
        "special_ids": np.array([0, 2]),
        "row_keys": [9, 3, 7, 1],
    }
    wide = np.zeros((4, 24), dtype=np.int64)
    wide[:, ::2] = ids
    forms: list[tuple[Any, Any, Any]] = [
        (ids, att, 7),
        (ids.tolist(), att.astype(np.int16), np.uint32(7)),
        (wide[:, ::2], att.astype(bool), 7),
    ]
    want = (
        random_mask(ids, att, 0.4, 7, **kw),
        importance_mask(ids, att, imp, 0.4, 7, **kw),
        nested_masks(ids, att, 0.2, 0.5, 7, imp, **kw),
    )
    for i, a, seed in forms:
        for extra in (kw, alt):
            got = (
                random_mask(i, a, 0.4, seed, **extra),
                importance_mask(i, a, imp.tolist() if extra is alt else imp,
                                0.4, seed, **extra),
                nested_masks(i, a, 0.2, 0.5, seed, imp, **extra),
            )  # fmt: skip
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[2][0], want[2][0])
            assert np.array_equal(got[2][1], want[2][1])
            assert np.array_equal(got[1], want[1])  # float16 as a list: float64, the same values
    mask = want[0]
    new, labels = replace(ids, mask, 4, 40, 7, special_ids=(0, 2), row_keys=kw["row_keys"])
    new2, labels2 = replace(ids.astype(np.int32).tolist(), mask.tolist(), 4, 40, np.int64(7), special_ids=[0, 2],
                            row_keys=[9, 3, 7, 1])  # fmt: skip
    assert np.array_equal(new, new2) and np.array_equal(labels, labels2)
    assert new.dtype == ids.dtype and replace(ids.astype(np.int32), mask, 4, 40, 7)[0].dtype == np.int32


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda a: random_mask(a["ids"], a["att"], 1.5, 0), "p must be in"),
        (lambda a: random_mask(a["ids"], a["att"], -0.1, 0), "p must be in"),
        (lambda a: random_mask(a["ids"], a["att"], float("nan"), 0), "p must be in"),
        (lambda a: random_mask(a["ids"], a["att"][:, :3], 0.5, 0), "attention_mask has shape"),
        (lambda a: random_mask(a["ids"], a["att"], 0.5, 0, a["att"][:1]), "special_tokens_mask has shape"),
        (lambda a: random_mask(a["ids"], a["att"], 0.5, 0, word_ids=a["att"].T), "word_ids has shape"),
        (lambda a: random_mask(a["ids"][:0], a["att"][:0], 0.5, 0), "empty batch"),
        (lambda a: random_mask(a["ids"][0], a["att"][0], 0.5, 0), "2-d"),
        (lambda a: random_mask(a["ids"], a["att"], 0.5, -1), "seed"),
        (
            lambda a: random_mask(a["ids"], a["att"].astype(float), 0.5, 0),
            "attention_mask must hold integers",
        ),
        (
            lambda a: importance_mask(a["ids"], a["att"], a["nan"], 0.5, 0),
            "importance is NaN at row 1, position 2",
        ),
        (lambda a: importance_mask(a["ids"], a["att"], a["imp"][:, :2], 0.5, 0), "importance has shape"),
        (lambda a: importance_mask(a["ids"], a["att"], a["imp"], 0.5, 0, sigma=-1.0), "sigma"),
        (lambda a: nested_masks(a["ids"], a["att"], 0.6, 0.5, 0), "p_enc must be <= p_dec"),
        (lambda a: nested_masks(a["ids"], a["att"], 0.2, 1.1, 0), "p_dec must be in"),
        (lambda a: replace(a["ids"], a["att"], 4, 20, 0), "input_ids holds id 25"),
        (lambda a: replace(a["ids"], a["att"][:1], 4, 100, 0), "mask has shape"),
        (lambda a: replace(a["ids"], a["att"], 100, 100, 0), "mask_token_id"),
        (lambda a: replace(a["ids"], a["att"], 4, 100, 0, 0.9, 0.2), "mask_prob \\+ random_prob"),
        (lambda a: replace(a["ids"], a["att"], 4, 100, 0, special_ids=[100]), "special_ids"),
        (lambda a: replace(a["ids"], a["att"], 4, 100, 0, row_keys=[1]), "row_keys"),
        (
            lambda a: random_mask(a["ids"], a["att"], 0.5, 0, special_ids=["x"]),  # type: ignore[list-item]  # bad on purpose
            "special_ids must be a sequence",
        ),
        (
            lambda a: random_mask(a["ids"], a["att"], 0.5, 0, row_keys=[-1, 0]),
            "row_keys must hold non-negative",
        ),
        (
            lambda a: random_mask(a["ids"], a["att"], 0.5, 0, row_keys=np.arange(3)),
            "row_keys must have shape",
        ),
        (
            lambda a: nested_masks(a["ids"], a["att"], 0.2, 0.5, 0, word_ids=a["att"][:1]),
            "word_ids has shape",
        ),
        (
            lambda a: importance_mask(a["ids"], a["att"], a["imp"].astype(str), 0.5, 0),
            "importance must hold real",
        ),
        (lambda a: random_mask(a["ids"], a["att"], 0.5, np.int64(-2)), "seed must be an integer"),
        (lambda a: random_mask(a["ids"], a["att"], 0.5, 2**64), "seed must be an integer"),
        (lambda a: span_crop([3, -1], 1, 2, 0), "lengths\\[1\\] is negative"),
        (lambda a: span_crop([3], 4, 2, 0), "min_len"),
        (lambda a: span_crop([], 1, 2, 0), "empty batch"),
    ],
)
def test_bad_input_raises_invalid_argument(call, match):
    ids = np.array([[2, 10, 11, 3], [2, 25, 12, 3]])
    imp = np.ones(ids.shape, dtype=np.float32)
    nan = imp.copy()
    nan[1, 2] = np.nan
    with pytest.raises(InvalidArgumentError, match=match) as info:
        call({"ids": ids, "att": np.ones_like(ids), "imp": imp, "nan": nan})
    assert isinstance(info.value, ValueError)


def test_nan_importance_on_padding_is_ignored():
    ids = np.array([[2, 10, 11, 0]])
    imp = np.array([[0.0, 1.0, 2.0, np.nan]])
    m = importance_mask(ids, np.array([[1, 1, 1, 0]]), imp, 0.5, 0, 0.0, np.array([[1, 0, 0, 0]]))
    assert m.tolist() == [[False, False, True, False]]


def test_import_does_not_pull_torch():
    import subprocess
    import sys

    code = "import sys, dense_pt.masking; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def _long_batch(seed: int, rows: int = 4, length: int = 300):
    """Long rows (the native code's vector loops run whole blocks), one with holes in the
    attention mask (not one run), float32 importance with ties."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, VOCAB, size=(rows, length))
    att = np.zeros((rows, length), dtype=np.int64)
    special = np.zeros((rows, length), dtype=bool)
    for r in range(rows):
        n = int(rng.integers(length // 2, length + 1))
        att[r, :n] = 1
        special[r, 0] = special[r, n - 1] = True
    att[0] *= rng.random(length) < 0.8  # holes
    imp = (np.round(rng.normal(size=(rows, length)) * 4) / 4).astype(np.float32)
    return ids, att, special, imp


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_long_rows_match_reference(seed):
    ids, att, special, imp = _long_batch(seed)
    for sigma in (0.0, 1.0, 1e-3):
        for dtype in (np.float32, np.float16):
            x = imp.astype(dtype)
            got = importance_mask(ids, att, x, 0.45, seed, sigma, special)
            assert np.array_equal(got, ref.importance_mask(ids, att, x, 0.45, seed, sigma, special))
    got = random_mask(ids, att, 0.3, seed, special)
    assert np.array_equal(got, ref.random_mask(ids, att, 0.3, seed, special))
    new, labels = replace(ids, got, 4, VOCAB, seed, special_ids=SPECIALS)
    r_new, r_labels = ref.replace(ids, got, 4, VOCAB, seed, special_ids=SPECIALS)
    assert np.array_equal(new, r_new) and np.array_equal(labels, r_labels)


_LEVEL_SCRIPT = """
import sys, numpy as np
sys.path.insert(0, {tests!r})
from test_masking import _long_batch
from dense_pt.masking import importance_mask, nested_masks, random_mask, replace
out = []
for seed in range(6):
    ids, att, special, imp = _long_batch(seed, rows=8, length=200 + 37 * seed)
    for sigma in (0.0, 1.0):
        out.append(importance_mask(ids, att, imp, 0.5, seed, sigma, special))
        out.append(importance_mask(ids, att, imp.astype(np.float16), 0.5, seed, sigma, special))
    m = random_mask(ids, att, 0.3, seed, special)
    out += [m, *nested_masks(ids, att, 0.2, 0.4, seed, imp, special)]
    out += list(replace(ids, m, 4, 60, seed, special_ids=[0, 1, 2, 3, 4]))
np.savez({path!r}, *out)
"""


def test_simd_levels_give_the_same_bits(tmp_path):
    """The run-time dispatched SIMD paths against the portable code, through the installed
    extension: the same script with DENSE_PT_SIMD=baseline (no vector kernels) and without."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    results = {}
    for level in ("baseline", "native"):
        path = tmp_path / f"{level}.npz"
        env = dict(os.environ)
        env.pop("DENSE_PT_SIMD", None)
        if level == "baseline":
            env["DENSE_PT_SIMD"] = "baseline"
        script = _LEVEL_SCRIPT.format(tests=str(Path(__file__).parent), path=str(path))
        subprocess.run([sys.executable, "-c", script], check=True, env=env)
        with np.load(path) as z:
            results[level] = [z[k] for k in sorted(z.files, key=lambda s: int(s.split("_")[1]))]
    assert len(results["baseline"]) == len(results["native"]) > 0
    for a, b in zip(results["baseline"], results["native"], strict=True):
        assert np.array_equal(a, b)


def test_noise_is_standard_normal():
    """Moments and the Kolmogorov-Smirnov statistic of the importance noise (indexed stream)."""
    z = np.sort(_native._rng_stream("noise", 11, 12, 2, 200_001))
    n = len(z)
    assert abs(z.mean()) < 0.01 and abs(z.var() - 1) < 0.015
    kurt = ((z - z.mean()) ** 4).mean() / z.var() ** 2
    assert abs(kurt - 3) < 0.06
    cdf = 0.5 * (1 + np.array([math.erf(v / math.sqrt(2)) for v in z]))
    d = max((np.arange(1, n + 1) / n - cdf).max(), (cdf - np.arange(n) / n).max())
    assert d < 1.63 / math.sqrt(n)  # the 1% critical value
    assert z[0] < -ref.ZIG_R and z[-1] > ref.ZIG_R  # the tail is reached on both sides
