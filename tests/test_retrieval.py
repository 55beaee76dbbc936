"""BM25, encode (resumable), faiss search (chunked == one-shot), mining and the negatives file."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dense_pt.cli import app
from dense_pt.config.retrieval import EncodeSettings, SearchSettings
from dense_pt.data import load_qrels
from dense_pt.errors import FormatError, MismatchError
from dense_pt.evaluation import evaluate_run
from dense_pt.retrieval.encode import Embeddings, encode
from dense_pt.retrieval.negatives import (
    NegativesTable,
    export_text,
    read_negatives,
    write_negatives,
)
from dense_pt.retrieval.search import search, search_arrays
from dense_pt.runs import load_run
from retrieval_fixtures import tiny_setup


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return tiny_setup(tmp_path_factory.mktemp("retr"))


def test_bm25_finds_topic(setup, tmp_path):
    beir, *_ = setup
    res = CliRunner().invoke(
        app, ["bm25", str(beir / "corpus.jsonl"), "--queries", str(beir / "queries.jsonl"), "--out", str(tmp_path / "bm25.trec"), "-k", "20"]
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    run = load_run(tmp_path / "bm25.trec")

    ev = evaluate_run(run, load_qrels(beir / "qrels" / "train.tsv"), ["R@20"])
    assert ev.measures["R@20"] > 0.5  # lexical overlap with the topic words


def test_encode_resume_equals_uninterrupted(setup, tmp_path, monkeypatch):
    import dense_pt.retrieval.encode as encode_module

    _, model, store, _, _ = setup
    full = encode(
        model, store, tmp_path / "full", EncodeSettings(shard_size=10, device="cpu"), progress=False
    )
    part = tmp_path / "part"
    real = encode_module._write_shard
    written: list[int] = []

    def killed_in_the_third(*args, **kw):
        if len(written) == 2:
            raise KeyboardInterrupt  # Ctrl-C while the third shard is being written
        real(*args, **kw)
        written.append(args[2])

    monkeypatch.setattr(encode_module, "_write_shard", killed_in_the_third)
    with pytest.raises(KeyboardInterrupt):
        encode(model, store, part, EncodeSettings(shard_size=10, device="cpu"), progress=False)
    monkeypatch.undo()
    m = json.loads((part / "manifest.json").read_text())
    assert len(m["shards"]) == 2 and not m["complete"]
    with pytest.raises(FormatError, match="incomplete"):
        Embeddings.open(part)
    before = (part / "emb-00000.npy").stat().st_mtime_ns
    encode(model, store, part, EncodeSettings(shard_size=10, device="cpu"), progress=False)
    assert (part / "emb-00000.npy").stat().st_mtime_ns == before  # finished shards not redone
    ids_a, a = Embeddings.open(full).load_all()
    ids_b, b = Embeddings.open(part).load_all()
    assert ids_a == ids_b and a.dtype == np.float16
    np.testing.assert_array_equal(a, b)
    with pytest.raises(MismatchError, match="pooling"):
        encode(
            model, store, part, EncodeSettings(shard_size=10, pooling="mean", device="cpu"), progress=False
        )


def test_encode_matches_unsorted_reference(setup, tmp_path):
    """Length-sorted batching gives the embeddings of one-at-a-time encoding."""
    import torch
    from transformers import AutoModel

    from dense_pt.data.store import CorpusStore

    _, model, store, _, _ = setup
    _ids, emb = Embeddings.open(
        encode(model, store, tmp_path / "e", EncodeSettings(dtype="float32", device="cpu"), progress=False)
    ).load_all()
    s = CorpusStore.open(store)
    m = AutoModel.from_pretrained(str(model)).eval()
    for i in (0, 7, 30):
        x = torch.tensor([[2, *s.tokens(i).tolist(), 3]])
        with torch.no_grad():
            ref = m(input_ids=x).last_hidden_state[0, 0].numpy()
        np.testing.assert_allclose(emb[i], ref, atol=1e-4)


def test_query_encoding_and_search(setup, tmp_path):
    beir, model, store, _, _qrels = setup
    encode(model, store, tmp_path / "p", EncodeSettings(device="cpu"), progress=False)
    encode(model, beir / "queries.jsonl", tmp_path / "q", EncodeSettings(device="cpu"), progress=False)
    run1 = search(tmp_path / "q", tmp_path / "p", tmp_path / "r1.trec", SearchSettings(k=15))
    run2 = search(tmp_path / "q", tmp_path / "p", None, SearchSettings(k=15, max_memory_gb=32 * 4 * 7 / 1e9))
    assert list(run1) == list(run2)
    for q in run1:
        assert list(run1[q]) == list(run2[q])
        assert list(run1[q].values()) == list(run2[q].values())  # rescored: bit-equal
    assert load_run(tmp_path / "r1.trec").keys() == run1.keys()


def test_empty_query_refused(setup, tmp_path):
    _, model, *_ = setup
    (tmp_path / "q.tsv").write_text("q1\thello\nq2\t  \n")
    with pytest.raises(FormatError, match=r"q.tsv:2.*empty"):
        encode(model, tmp_path / "q.tsv", tmp_path / "o", progress=False)


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 40), st.integers(1, 12), st.sampled_from(["ip", "cosine"]), st.integers(0, 10**6))
def test_search_without_faiss_gives_the_same_run(n, k, metric, seed):
    """A machine without faiss (the lent GPU machines) proposes the candidates with NumPy: the
    same rows and float64 scores as faiss, to the bit, ties included (rounded vectors tie often),
    one-shot and in chunks."""
    from unittest import mock

    from dense_pt.retrieval import search as search_module

    rng = np.random.default_rng(seed)
    q = rng.normal(size=(5, 8)).astype(np.float32)
    shards = [np.round(rng.normal(size=(n, 8)), 1).astype(np.float16) for _ in range(3)]
    for budget in (None, 4 * 8 * 3 / 1e9):
        s1, r1 = search_arrays(q, shards, k, metric, max_memory_gb=budget)
        with mock.patch.object(search_module, "_faiss", return_value=None):
            s2, r2 = search_arrays(q, shards, k, metric, max_memory_gb=budget)
        np.testing.assert_array_equal(r1, r2)
        np.testing.assert_array_equal(s1, s2)


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 40), st.integers(1, 12), st.sampled_from(["ip", "cosine"]), st.integers(0, 10**6))
def test_chunked_search_equals_one_shot(n, k, metric, seed):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(5, 8)).astype(np.float32)
    shards = [rng.normal(size=(n, 8)).astype(np.float16) for _ in range(3)]
    s1, r1 = search_arrays(q, shards, k, metric)
    s2, r2 = search_arrays(q, shards, k, metric, max_memory_gb=4 * 8 * 3 / 1e9)  # 3 rows a chunk
    np.testing.assert_array_equal(r1, r2)
    np.testing.assert_allclose(s1, s2, rtol=1e-6)
    # and both equal brute force
    allp = np.concatenate(shards).astype(np.float32)
    qq = q
    if metric == "cosine":
        allp = allp / np.linalg.norm(allp, axis=1, keepdims=True)
        qq = q / np.linalg.norm(q, axis=1, keepdims=True)
    full = qq @ allp.T
    ref = -np.sort(-full, axis=1)[:, : min(k, len(allp))]
    # same top-k scores as brute force (indices may differ only among float-level ties)
    np.testing.assert_allclose(np.take_along_axis(full, r1, 1), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("d", [1, 7, 8, 33, 384, 385])
def test_pair_scores_do_not_depend_on_position_or_shape(d):
    """The rescoring dot product of a pair is bit-identical wherever the pair sits."""
    from dense_pt.retrieval.search import _dot_pairs

    rng = np.random.default_rng(d)
    c, q = rng.normal(size=(4, 9, d)), rng.normal(size=(4, d))
    full = _dot_pairs(c, q)
    perm = rng.permutation(9)
    np.testing.assert_array_equal(_dot_pairs(c[:, perm], q), full[:, perm])
    for i, j in [(0, 0), (3, 8), (2, 5)]:
        pad = np.empty(d + 1)  # misaligned copies
        pad[1:] = c[i, j]
        assert _dot_pairs(pad[1:][None, None], q[i : i + 1])[0, 0] == full[i, j]


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 6), st.integers(0, 10**6))
def test_search_ranks_near_ties_exactly_whatever_the_chunking(budget_rows, seed):
    """Pairs of passages whose scores differ below float32 resolution: the later row scores higher
    in exact arithmetic, so a float32 ranking (ties by row) gets the pair backwards. Every memory
    budget must give the exact float64 ranking, ties by row."""
    rng = np.random.default_rng(seed)
    d = 8
    q = rng.normal(size=(3, d)).astype(np.float32)
    q[:, -1] = np.float32(1e-4)  # the last component barely moves a score
    base = rng.normal(size=(6, d)).astype(np.float16)
    base[:, -1] = 0
    twin = base.copy()
    twin[:, -1] = np.float16(2**-14)  # +6e-9 on each score, below float32 resolution at |s| ~ 1
    dup = base[:2]  # exact ties too
    passages = np.concatenate([base, twin, dup])
    shards = [passages[:7], passages[7:]]
    k = 9
    s, r = search_arrays(q, shards, k, "ip", max_memory_gb=4 * d * budget_rows / 1e9)
    exact = q.astype(np.float64) @ passages.astype(np.float64).T
    order = np.lexsort((np.broadcast_to(np.arange(len(passages)), exact.shape), -exact), axis=-1)
    np.testing.assert_array_equal(r, order[:, :k])
    np.testing.assert_allclose(s, np.take_along_axis(exact, order[:, :k], 1), rtol=1e-12)


def test_negatives_file_roundtrip_and_corruption(tmp_path):
    t = NegativesTable({"q1": [("a", 0.5), ("b", 0.25)], "q2": [], "q3": [("a", -1.0)]})
    p = tmp_path / "n.dpneg"
    write_negatives(p, t)
    assert read_negatives(p).rows == t.rows
    export_text(p, tmp_path / "n.tsv")
    assert (tmp_path / "n.tsv").read_text() == "q1\ta\t0.5\nq1\tb\t0.25\nq3\ta\t-1\n"
    with pytest.raises(MismatchError, match="'b'"):
        read_negatives(p, known_ids={"a"})
    raw = bytearray(p.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    (tmp_path / "bad.dpneg").write_bytes(bytes(raw))
    with pytest.raises(FormatError, match="checksum"):
        read_negatives(tmp_path / "bad.dpneg")
    (tmp_path / "short.dpneg").write_bytes(p.read_bytes()[:20])
    with pytest.raises(FormatError):
        read_negatives(tmp_path / "short.dpneg")


def test_cli_mine(setup, tmp_path):
    beir, _, store, _, _ = setup
    r = CliRunner()
    res = r.invoke(app, ["bm25", str(beir / "corpus.jsonl"), "--queries", str(beir / "queries.jsonl"), "--out", str(tmp_path / "b.trec"), "-k", "30"])  # fmt: skip
    assert res.exit_code == 0
    res = r.invoke(app, ["negatives", "mine", str(tmp_path / "b.trec"), "--qrels", str(beir / "qrels" / "train.tsv"), "--out", str(tmp_path / "n.dpneg"), "--num", "5", "--corpus", str(store), "--text", str(tmp_path / "n.tsv")])  # fmt: skip
    assert res.exit_code == 0, res.output
    man = json.loads((tmp_path / "n.dpneg.manifest.json").read_text())
    assert (
        man["settings"]["num"] == 5
        and len(man["run_sha256"]) == 64
        and man["stats"]["excluded_positives"] > 0
    )
    assert len((tmp_path / "n.tsv").read_text().splitlines()) == man["stats"]["negatives"]


def test_search_of_an_empty_corpus_returns_no_hits():
    s, r = search_arrays(np.ones((2, 4), np.float32), [np.zeros((0, 4), np.float16)], 5)
    assert s.shape == r.shape == (2, 0)
