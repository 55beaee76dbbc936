"""n-gram tables and AMI: the Rust core against the Counter reference, shards, spills, bad files."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dense_pt.config.pmi import PmiBuild
from dense_pt.data.store import CorpusStore, build_store_from_texts
from dense_pt.data.tokenizer import train_wordpiece
from dense_pt.errors import DensePtIOError, FormatError, InvalidArgumentError, MismatchError
from dense_pt.pmi import NgramTable, build, build_arrays, count_arrays, merge, parse_shard, score
from pmi_reference import ami, count_ngrams, pmi, pruned


def _needs_gb(message: str) -> float:
    """The budget a refusal says the count needs (``needs at least X GB``)."""
    m = re.search(r"needs at least ([0-9.]+) GB", message)
    assert m is not None, message
    return float(m.group(1))


def flatten(passages):
    values = np.array([t for p in passages for t in p], dtype=np.uint32)
    offsets = np.zeros(len(passages) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in passages], out=offsets[1:])
    return values, offsets


corpora = st.integers(2, 30).flatmap(
    lambda v: st.tuples(
        st.just(v), st.lists(st.lists(st.integers(0, v - 1), max_size=25), min_size=1, max_size=20)
    )
)


@settings(max_examples=40, deadline=None)
@given(corpora, st.integers(1, 3), st.booleans(), st.integers(1, 2))
def test_in_memory_counts_match_counter_reference(tmp_path_factory, corpus, min_count, tiny, threads):
    vocab, passages = corpus
    values, offsets = flatten(passages)
    orders, stats = count_arrays(
        values, offsets, vocab_size=vocab, max_n=4, min_count=min_count,
        memory_bytes=0 if tiny else 1 << 30, threads=threads, spill_dir=tmp_path_factory.mktemp("s"),
    )  # fmt: skip
    raw, totals = count_ngrams(passages, 4)
    counts = pruned(raw, min_count)
    bits = max(1, (vocab - 1).bit_length())
    assert stats["totals"] == totals
    for n, (keys, cnt) in enumerate(orders, 1):
        assert keys.dtype == np.uint64 and cnt.dtype == np.uint64
        assert np.all(keys[1:] > keys[:-1])
        want = {sum(t << (bits * (n - 1 - k)) for k, t in enumerate(g)): c for g, c in counts[n - 1].items()}
        assert dict(zip(keys.tolist(), cnt.tolist(), strict=True)) == want


def test_in_memory_counts_refuse_keys_wider_than_64_bits():
    with pytest.raises(InvalidArgumentError, match="64 bits"):
        count_arrays(np.zeros(4, np.uint32), np.array([0, 4]), vocab_size=1 << 17, max_n=4)


@settings(max_examples=40, deadline=None)
@given(corpora, st.integers(1, 3), st.booleans(), st.integers(2, 4))
def test_counts_pmi_ami_match_counter_reference(tmp_path_factory, corpus, min_count, tiny, window):
    vocab, passages = corpus
    out = tmp_path_factory.mktemp("t") / "t.ngram"
    values, offsets = flatten(passages)
    stats = build_arrays(
        values, offsets, out, vocab_size=vocab, max_n=4, min_count=min_count,
        memory_bytes=0 if tiny else 1 << 30, threads=2,
    )  # fmt: skip
    raw, totals = count_ngrams(passages, 4)
    counts = pruned(raw, min_count)
    t = NgramTable.open(out)
    assert stats["totals"] == totals == list(t.N.values())
    assert list(t.entries.values()) == [len(c) for c in counts]
    for n in range(1, 5):
        for g in raw[n - 1]:
            assert t.count(g) == counts[n - 1].get(g, 0)
            if n >= 2:
                want = pmi(counts, totals, g)
                got = t.pmi(g)
                if want is None:
                    assert math.isnan(got)
                else:
                    assert abs(got - want) <= 1e-9
    for p in passages:
        want_ami = ami(counts, totals, p, window)
        got_ami = t.ami(np.array(p, dtype=np.uint32), window=window)
        assert got_ami.dtype == np.float32 and len(got_ami) == len(p)
        np.testing.assert_allclose(got_ami, want_ami, rtol=1e-5, atol=1e-5)
    all_scores = t.ami_ragged(values, offsets, window=window, threads=2)
    for i, p in enumerate(passages):
        np.testing.assert_array_equal(
            all_scores[offsets[i] : offsets[i + 1]], t.ami(np.array(p, np.uint32), window)
        )


def test_fused_and_per_order_counting_agree(tmp_path):
    # Short passages (many shorter than max_n) and min_count > 1: the fused path (one sort for
    # all orders) and the per-order path (forced by a tiny budget) give the same arrays.
    rng = np.random.default_rng(1)
    passages = [list(rng.integers(0, 12, size=rng.integers(0, 9))) for _ in range(300)]
    values, offsets = flatten(passages)
    kw = dict(vocab_size=12, max_n=4, min_count=2, spill_dir=tmp_path)
    fused, fs = count_arrays(values, offsets, memory_gb=1, threads=2, **kw)
    per_order, ps = count_arrays(values, offsets, memory_bytes=0, threads=1, **kw)
    assert fs["fused"] and not ps["fused"]
    assert fs["totals"] == ps["totals"]
    for (k1, c1), (k2, c2) in zip(fused, per_order, strict=True):
        np.testing.assert_array_equal(k1, k2)
        np.testing.assert_array_equal(c1, c2)


def test_spill_path_with_tiny_budget_gives_same_bytes(tmp_path):
    rng = np.random.default_rng(0)
    passages = [list(rng.integers(0, 3, size=rng.integers(50, 150))) for _ in range(40)]
    values, offsets = flatten(passages)
    small = build_arrays(values, offsets, tmp_path / "small", vocab_size=3, memory_bytes=0, threads=2)
    big = build_arrays(values, offsets, tmp_path / "big", vocab_size=3, memory_gb=1, threads=1)
    assert small["spilled_runs"] > 0 and big["spilled_runs"] == 0
    assert small["peak_rss_bytes"] > 0
    assert (tmp_path / "small").read_bytes() == (tmp_path / "big").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big", "small"]  # no runs left behind


DOCS = [
    ("a", "the cell membrane protein binds the receptor in the cell"),
    ("b", "the receptor protein is expressed in the membrane of the cell"),
    ("c", "a randomized trial of the vaccine showed the vaccine is safe"),
    ("d", "the trial of the new vaccine in the elderly was randomized"),
    ("e", "protein folding in the cell is assisted by chaperone proteins"),
    ("f", "in the elderly the vaccine showed lower efficacy than in the young"),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tok = train_wordpiece([t for _, t in DOCS] * 3, vocab_size=200, min_frequency=1)
    return build_store_from_texts(tmp_path_factory.mktemp("s") / "store", DOCS, tok)


def test_store_build_shards_merge_score(store, tmp_path):
    whole = tmp_path / "whole.ngram"
    stats = build(store.path, whole, PmiBuild(max_n=3, min_count=2, threads=2))
    passages = [store.tokens(i).tolist() for i in range(len(store))]
    raw, totals = count_ngrams(passages, 3)
    assert stats["totals"] == totals
    t = NgramTable.open(whole)
    assert t.vocab_hash == store.vocab_hash and t.min_count == 2 and t.num_passages == len(store)
    parts = [build(store, tmp_path / f"p{i}", PmiBuild(max_n=3, shard=f"{i}/4", threads=1)) for i in range(4)]
    assert sum(p["passages"] for p in parts) == len(store)
    merged = tmp_path / "merged.ngram"
    merge([p["path"] for p in reversed(parts)], merged, min_count=2)
    assert merged.read_bytes() == whole.read_bytes()

    res = score(store.path, whole, window=3)
    s2 = CorpusStore.open(store.path)
    values, offsets = s2.ragged("importance")
    assert values.dtype == np.float32 and res["tokens"] == len(values)
    counts = pruned(raw, 2)
    for i, p in enumerate(passages):
        np.testing.assert_allclose(values[offsets[i] : offsets[i + 1]], ami(counts, totals, p, 3), atol=1e-5)
    assert s2.manifest["columns"]["importance"]["window"] == 3
    score(s2, whole, window=3, dtype="float16")
    half = CorpusStore.open(store.path).ragged("importance")[0]
    assert half.dtype == np.float16
    np.testing.assert_allclose(half.astype(np.float32), values, rtol=1e-2, atol=1e-2)


def test_score_refuses_a_table_of_another_vocabulary(store, tmp_path):
    values, offsets = store.ragged()
    other = tmp_path / "other.ngram"
    build_arrays(values, offsets, other, vocab_size=store.vocab_size, vocab_hash="ab" * 32, max_n=4)
    with pytest.raises(MismatchError, match=r"other\.ngram"):
        score(store, other)
    assert not store.has_column("importance") or "other" not in str(store.manifest["columns"])


def test_window_and_shard_arguments_are_validated(store, tmp_path):
    path = tmp_path / "t.ngram"
    build(store, path, PmiBuild(max_n=2))
    t = NgramTable.open(path)
    with pytest.raises(InvalidArgumentError, match="window"):
        t.ami(np.array([1, 2, 3], np.uint32), window=4)
    with pytest.raises(InvalidArgumentError):
        t.count([])
    with pytest.raises(InvalidArgumentError, match="I/N"):
        parse_shard("1-4")
    with pytest.raises(InvalidArgumentError):
        parse_shard("4/4")
    with pytest.raises(InvalidArgumentError, match="min_count"):
        build(store, tmp_path / "x", PmiBuild(shard="0/2", min_count=3))
    with pytest.raises(MismatchError, match=r"missing|twice"):
        p0 = build(store, tmp_path / "s0", PmiBuild(shard="0/2"))["path"]
        merge([p0, p0], tmp_path / "m")
    with pytest.raises(InvalidArgumentError, match="shard 1 of 2 is missing"):
        merge([p0], tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_corrupt_truncated_and_missing_tables_are_refused(store, tmp_path):
    path = tmp_path / "t.ngram"
    build(store, path, PmiBuild(max_n=3))
    good = path.read_bytes()
    cases = {
        "truncated": good[: len(good) - 5],
        "header-only": good[:100],
        "bad magic": b"XXXXXXXX" + good[8:],
        "version": good[:8] + (9).to_bytes(4, "little") + good[12:],
        "body flip": good[:-3] + bytes([good[-3] ^ 0x40]) + good[-2:],
        "trailing": good + b"\0",
        "empty": b"",
    }
    for name, data in cases.items():
        bad = tmp_path / f"bad-{name.replace(' ', '-')}"
        bad.write_bytes(data)
        with pytest.raises(FormatError, match=str(bad.name)):
            NgramTable.open(bad)
    with pytest.raises(FormatError, match="version 9"):
        NgramTable.open(tmp_path / "bad-version")
    with pytest.raises(DensePtIOError):
        NgramTable.open(tmp_path / "nope")
    # Without verify the body is not hashed; the structural checks may still catch the flip, and
    # either way nothing crashes.
    try:
        NgramTable.open(tmp_path / "bad-body-flip", verify=False)
    except FormatError:
        pass


def test_build_refuses_out_of_vocabulary_ids(tmp_path):
    with pytest.raises(InvalidArgumentError, match="token id 7 at position 1"):
        build_arrays(np.array([1, 7], np.uint32), np.array([0, 2]), tmp_path / "t", vocab_size=5)
    assert not list(tmp_path.iterdir())


def test_demo_stage(store, tmp_path):
    from dense_pt.demo.pmi import demo_stage

    res = demo_stage(store.path, tmp_path / "work")
    assert res["status"] == "ran" and (tmp_path / "work" / "ngrams.pmi").exists()
    s = CorpusStore.open(store.path)
    assert s.has_column("importance")
    assert res["n-grams"][0] == len(np.unique(s.ragged()[0]))
    assert demo_stage(store.path, tmp_path / "work")["status"] == "up to date"
    assert demo_stage(store.path, tmp_path / "work", force=True)["status"] == "ran"
    assert demo_stage(store.path, tmp_path / "work", window=3)["status"] == "ran"


def test_a_raising_progress_callback_cancels_and_leaves_nothing(tmp_path):
    rng = np.random.default_rng(1)
    values = rng.integers(0, 50, size=20_000).astype(np.uint32)
    offsets = np.arange(0, 20_001, 100, dtype=np.int64)
    seen = []

    def progress(phase, done, total):
        seen.append(phase)
        if phase == "order 3":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_arrays(values, offsets, tmp_path / "t.ngram", vocab_size=50, progress=progress)
    assert "order 4" not in seen
    assert not list(tmp_path.iterdir())


def test_ctrl_c_interrupts_a_long_build(tmp_path):
    import _thread
    import signal
    import threading
    import time

    rng = np.random.default_rng(2)
    values = rng.integers(0, 5000, size=3_000_000).astype(np.uint32)
    offsets = np.arange(0, 3_000_001, 1000, dtype=np.int64)
    # The least budget this corpus accepts (it is refused below that, naming it) makes the build
    # slow: ~100 passes per order, seconds even on a fast machine. Ctrl-C must stop it early.
    with pytest.raises(InvalidArgumentError, match="too small for this corpus") as refused:
        build_arrays(values, offsets, tmp_path / "t.ngram", vocab_size=5000, memory_bytes=0, threads=1)
    least = _needs_gb(str(refused.value))
    # interrupt_main() does nothing unless Python's own SIGINT handler is installed: make sure it
    # is, whatever an earlier test or library did to it.
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.3, _thread.interrupt_main).start()
        t0 = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            build_arrays(values, offsets, tmp_path / "t.ngram", vocab_size=5000, memory_gb=least, threads=1)
        assert time.perf_counter() - t0 < 30
    finally:
        signal.signal(signal.SIGINT, saved)
    assert not list(tmp_path.iterdir())


def test_top_zero_is_an_empty_list_and_negative_arguments_are_clear_errors(tmp_path):
    """`pmi inspect --top 0` panicked (index out of bounds); negative counts were OverflowErrors."""
    values, offsets = flatten([[0, 1, 2, 1, 0], [2, 1, 0]])
    build_arrays(values, offsets, tmp_path / "t", vocab_size=3)
    t = NgramTable.open(tmp_path / "t")
    assert t.top_pmi(2, 0) == [] and len(t.top_pmi(2, 3)) == 3
    for call, name in [
        (lambda: t.top_pmi(2, -1), "k"),
        (lambda: t.top_pmi(1, 3), "n"),
        (lambda: t.count([-1, 2]), "token ids"),
        (lambda: t.ami(np.array([0, -3]), window=2), "token ids"),
        (lambda: t.ami(np.array([0, 1]), window=-2), "window"),
        (lambda: build_arrays(values, offsets, tmp_path / "u", vocab_size=3, min_count=-3), "min_count"),
        (lambda: build_arrays(values, offsets, tmp_path / "u", vocab_size=3, max_n=-1), "max_n"),
        (lambda: merge([tmp_path / "t"], tmp_path / "m", min_count=0), "min_count"),
    ]:
        with pytest.raises(InvalidArgumentError, match=name):
            call()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]


def test_a_budget_needing_unbounded_passes_is_refused_and_the_minimum_works(tmp_path):
    """SciFact-sized corpus, --threads 1: 0.03 GB took 692 s (22,104 passes), 0.001 GB ran 15+
    minutes without a word. Now: refused before any work, naming the least budget; at that budget
    each order takes at most 2 * 64 + 1 passes and the bytes are those of a roomy build."""
    rng = np.random.default_rng(7)
    values = rng.integers(0, 8000, size=600_000).astype(np.uint32)
    offsets = np.arange(0, 600_001, 300, dtype=np.int64)
    phases = []
    with pytest.raises(InvalidArgumentError, match="too small for this corpus") as info:
        build_arrays(values, offsets, tmp_path / "t", vocab_size=8000, memory_gb=0.03, threads=1,
                     progress=lambda *a: phases.append(a))  # fmt: skip
    assert phases == [] and not list(tmp_path.iterdir())  # refused before any work
    least = _needs_gb(str(info.value))
    assert "raise --memory-gb (memory_gb=) to" in str(info.value)
    stats = build_arrays(values, offsets, tmp_path / "t", vocab_size=8000, memory_gb=least, threads=1,
                         progress=lambda *a: phases.append(a))  # fmt: skip
    assert not stats["fused"] and stats["passes"] <= 3 * (2 * 64 + 1)
    assert len(phases) >= stats["passes"]  # progress reported at least once per pass
    build_arrays(values, offsets, tmp_path / "w", vocab_size=8000, memory_gb=1, threads=1)
    assert (tmp_path / "t").read_bytes() == (tmp_path / "w").read_bytes()


BUILD_UNDER_A_LIMIT = """
import json, resource, sys
import numpy as np
from dense_pt.pmi import build_arrays

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

rng = np.random.default_rng(0)
values = rng.integers(0, 30000, size=10_000_000).astype(np.uint32)
offsets = np.arange(0, values.size + 1, 200, dtype=np.int64)
budget = 0.15
base = status("VmRSS:")  # the interpreter, numpy, and the 40 MB corpus itself
# Address space: what is mapped now, plus the budget, plus 128 MB for two threads' stacks and
# allocator arenas. A build that overran its budget would fail to allocate.
limit = status("VmSize:") + int(budget * (1 << 30)) + (128 << 20)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
stats = build_arrays(values, offsets, sys.argv[1], vocab_size=30000, memory_gb=budget, threads=2)
print(json.dumps({"grew": status("VmHWM:") - base, "budget": int(budget * (1 << 30)),
                  "passes": stats["passes"]}))
"""


def test_build_stays_within_its_memory_budget_under_an_address_space_limit(tmp_path):
    """10M tokens, --memory-gb 0.15, 2 threads, under RLIMIT_AS: the build completes and its
    resident memory grows by less than the budget (which also counts the corpus it reads)."""
    import json
    import os
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-c", BUILD_UNDER_A_LIMIT, str(tmp_path / "t.pmi")],
        capture_output=True,
        text=True,
        env={**os.environ, "MALLOC_ARENA_MAX": "2"},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["grew"] < out["budget"], out
    assert out["passes"] > 1  # the budget shaped the plan


SCORE_UNDER_A_LIMIT = """
import json, os, resource, sys
from dense_pt.data.store import CorpusStore
from dense_pt.pmi import NgramTable, score

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

store = CorpusStore.open(sys.argv[1])
tokens = int(store.lengths().sum())
table = NgramTable.open(sys.argv[2])
base = status("VmRSS:")
bound = 16 * tokens + os.path.getsize(sys.argv[2]) + (64 << 20)  # the documented bound (docs/errors.md)
limit = status("VmSize:") + bound + (64 << 20)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
score(store, table, window=4, threads=2)
print(json.dumps({"grew": status("VmHWM:") - base, "bound": bound, "tokens": tokens}))
"""


def test_score_stays_within_its_memory_bound_under_an_address_space_limit(tmp_path):
    import json
    import os
    import subprocess
    import sys

    rng = np.random.default_rng(5)
    words = " ".join(t for _, t in DOCS).split()
    docs = [(f"p{i}", " ".join(rng.choice(words, 120))) for i in range(6000)]
    tok = train_wordpiece([t for _, t in DOCS] * 3, vocab_size=300, min_frequency=1)
    store = build_store_from_texts(tmp_path / "s", docs, tok)
    build(store, tmp_path / "t.pmi", PmiBuild(memory_gb=0.5))
    r = subprocess.run(
        [sys.executable, "-c", SCORE_UNDER_A_LIMIT, str(store.path), str(tmp_path / "t.pmi")],
        capture_output=True,
        text=True,
        env={**os.environ, "MALLOC_ARENA_MAX": "2"},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["tokens"] > 500_000 and out["grew"] < out["bound"], out
