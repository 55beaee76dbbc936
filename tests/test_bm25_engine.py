"""dense-pt bm25 on our engine (rust/core/src/bm25) against bm25s itself: the same tokens, the same
top-k lists and scores (apart from ties at the k-th cutoff) on SciFact and on the synthetic
MS MARCO; the index kept on disk, reused only while its key matches; query shards; the Python API."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dense_pt import _native
from dense_pt.cli import app
from dense_pt.config.retrieval import BM25Command, BM25Settings
from dense_pt.data import corpus_texts, load_queries
from dense_pt.errors import InvalidArgumentError
from dense_pt.retrieval import bm25_index as bi
from dense_pt.retrieval.bm25 import bm25, bm25_index, bm25_run, parse_query_shard
from dense_pt.runs import load_run

bm25s = pytest.importorskip("bm25s")
Stemmer = pytest.importorskip("Stemmer")

RTOL = 1e-5  # bm25s sums float32 impacts in float32; we sum the same impacts in float64


def reference(
    docs: list[tuple[str, str]], queries: dict[str, str], k: int
) -> dict[str, list[tuple[str, float]]]:
    """bm25s with the settings the previous `dense-pt bm25` used: Lucene, k1 0.9, b 0.4, English
    stopwords, PyStemmer's English stemmer, numpy backend."""
    stem = Stemmer.Stemmer("english")
    tok = bm25s.tokenize([t for _, t in docs], stopwords="en", stemmer=stem, show_progress=False)
    r = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
    r.index(tok, show_progress=False)
    # as strings, and only the queries with a word left: older bm25s fail on an empty query
    words = bm25s.tokenize(
        list(queries.values()), stopwords="en", stemmer=stem, show_progress=False, return_ids=False
    )
    asked = {q: w for q, w in zip(queries, words, strict=True) if w}
    out: dict[str, list[tuple[str, float]]] = {q: [] for q in queries}
    if asked:
        found, scores = r.retrieve(
            list(asked.values()), k=min(k, len(docs)), show_progress=False, n_threads=1
        )
        for i, q in enumerate(asked):
            out[q] = [(docs[int(d)][0], float(s)) for d, s in zip(found[i], scores[i], strict=True) if s > 0]
    return out


def assert_same_but_ties(ours: dict[str, dict[str, float]], ref: dict[str, list[tuple[str, float]]], k: int):
    """Same number of hits, the same scores rank by rank (to RTOL), the same passages wherever the
    score is not tied with the k-th (the cutoff, where either may keep any of the tied ones)."""
    assert set(ours) == set(ref)
    for q, want in ref.items():
        got = sorted(ours[q].items(), key=lambda kv: -kv[1])
        assert len(got) == len(want), q
        if not want:
            continue
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=RTOL, err_msg=q)
        cutoff = want[-1][1] * (1 + RTOL) if len(want) == k else -np.inf
        assert {p for p, s in got if s > cutoff} == {p for p, s in want if s > cutoff}, q
        common = set(ours[q]) & {p for p, _ in want}
        ref_score = dict(want)
        np.testing.assert_allclose([ours[q][p] for p in common], [ref_score[p] for p in common], rtol=RTOL)


def run_of(path: Path) -> dict[str, dict[str, float]]:
    return load_run(path)


# ---- the analysis ------------------------------------------------------------------------------
def test_stopwords_are_bm25s_english_list():
    from bm25s.stopwords import STOPWORDS_EN

    assert bi.STOPWORDS_EN == tuple(STOPWORDS_EN)
    assert bi.stopword_list("en") == bi.STOPWORDS_EN and bi.stopword_list(None) == ()
    with pytest.raises(InvalidArgumentError):
        bi.stopword_list("klingon")


def test_word_characters_are_pythons_regex_word():
    bits = np.unpackbits(np.frombuffer(bi.word_chars(), dtype=np.uint8), bitorder="little").astype(bool)
    rng = np.random.default_rng(0)
    points = np.concatenate([np.arange(0x3000), rng.integers(0x3000, 0x110000, 20_000)])
    word = re.compile(r"\w")
    assert all(bits[c] == (word.match(chr(c)) is not None) for c in points.tolist())


PIECES = [*"ab cdeXYZ_09 .,-'\"é²İßΣσςǅ\u0301\u0903\u0915\t\n中文", "the ", "The ", "of ", "ab "]
TEXT = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


@settings(max_examples=60, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=6))
def test_tokens_are_bm25s_tokens(texts):
    """Without stemming our term ids are bm25s's (both number tokens in order of first sight)."""
    a = _native.Bm25Analyzer(bi.word_chars(), list(bi.STOPWORDS_EN))
    ids, offsets = a.analyze([t.lower() for t in texts])
    ref = bm25s.tokenize(texts, stopwords="en", show_progress=False)
    assert [ids[offsets[i] : offsets[i + 1]].tolist() for i in range(len(texts))] == ref.ids


def test_each_new_word_is_stemmed_once():
    seen: list[str] = []

    def stem(words: list[str]) -> list[str]:
        seen.extend(words)
        return [w.rstrip("s") for w in words]

    a = _native.Bm25Analyzer(bi.word_chars(), ["the"])
    first, _ = a.analyze(["the cats and cat", "dogs"], stem)
    second, _ = a.analyze(["cat dogs cats", "eel"], stem)
    assert seen == ["cats", "and", "cat", "dogs", "eel"]
    assert first.tolist() == [0, 1, 0, 2] and second.tolist() == [0, 2, 0, 3]
    with pytest.raises(ValueError):
        a.analyze(["newword"], lambda words: [])  # one stem per word


# ---- against bm25s -----------------------------------------------------------------------------
@pytest.mark.slow  # ~6 s: bm25s indexes the 5,183 passages
def test_top_k_equals_bm25s_on_scifact(shared_data, tmp_path):
    sci = shared_data / "beir-scifact"
    docs = list(corpus_texts(sci / "corpus.jsonl"))
    queries = load_queries(sci / "queries.jsonl")
    bm25(
        sci / "corpus.jsonl",
        sci / "queries.jsonl",
        tmp_path / "run.trec",
        BM25Command(k=100, threads=2),
        index=tmp_path / "idx",
    )
    ours: dict[str, dict[str, float]] = {q: {} for q in queries} | run_of(
        tmp_path / "run.trec"
    )  # a query without hits has no line
    assert_same_but_ties(ours, reference(docs, queries, 100), 100)


@pytest.mark.slow  # ~5 s: 8,842 passages and 503 queries, generated, then both engines
def test_top_k_equals_bm25s_on_the_synthetic_msmarco(shared_data, tmp_path):
    from test_msmarco_synth import synth

    out = synth.generate(tmp_path / "synth", 0.001, seed=1, source=shared_data / "beir-scifact")
    docs = list(corpus_texts(out / "collection.tsv"))
    queries = load_queries(out / "queries.train.tsv")
    ours = bm25_run(docs, queries, BM25Settings(k=50))
    assert_same_but_ties(ours, reference(docs, queries, 50), 50)
    # the queries were drawn from their target passage: BM25 finds it near the top
    qrels = {line.split()[0]: line.split()[2] for line in (out / "qrels.train.tsv").read_text().splitlines()}
    found = [qrels[q] in dict(sorted(ours[q].items(), key=lambda kv: -kv[1])[:10]) for q in queries]
    assert np.mean(found) > 0.9


def test_bm25_run_matches_bm25s_with_ties_and_odd_passages(tmp_path):
    """Repeated words, repeated query words, stopword-only and unknown-word queries, passages of
    stopwords only, duplicate passages (exact ties) and k larger than the corpus."""
    docs = [
        ("a", "the cat sat on the mat"),
        ("b", "cat cat cat dog"),
        ("c", "the of and"),
        ("d", "cat dog"),
        ("e", "cat dog"),
        ("f", "Dogs running, dogs ran; a DOG runs!"),
        ("g", "mat"),
    ]
    queries = {
        "q1": "cat",
        "q2": "dog dog cat",
        "q3": "the of",
        "q4": "zebra",
        "q5": "running dogs mat",
        "q6": "cat dog",
    }
    for k in (1, 2, 3, 10):
        assert_same_but_ties(bm25_run(docs, queries, BM25Settings(k=k)), reference(docs, queries, k), k)
    got = bm25_run(docs, queries, BM25Settings(k=10))
    assert got["q3"] == {} and got["q4"] == {}
    # exact ties rank the passage earlier in the corpus first
    order = list(got["q6"])
    assert order.index("e") == order.index("d") + 1 and got["q6"]["d"] == got["q6"]["e"]


# ---- the index on disk -------------------------------------------------------------------------
def _corpus(path: Path, n: int, extra: str = "") -> Path:
    words = "trial vaccine immune response patients chronic elderly placebo disease cell".split()
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(f"p{i}\t{' '.join(words[(i * 7 + j) % len(words)] for j in range(3 + i % 5))}\n")
        f.write(extra)
    return path


def test_the_index_is_reused_while_its_key_matches_and_rebuilt_when_stale(tmp_path, capsys, monkeypatch):
    from dense_pt import logs
    from dense_pt.artifacts import file_checksum

    logs.configure()
    monkeypatch.setenv("DENSE_PT_CACHE_DIR", str(tmp_path / "cache"))
    data = tmp_path / "data"
    data.mkdir()
    corpus = _corpus(data / "c.tsv", 300)
    (data / "q.tsv").write_text("q1\tvaccine trial\nq2\tnovel word\n")
    args = (corpus, data / "q.tsv", tmp_path / "r.trec")
    bm25(*args, BM25Command(k=5, threads=1))
    # the default: in dense-pt's cache, keyed by the corpus's checksum and name; nothing beside it
    index = tmp_path / "cache" / "bm25" / f"{file_checksum(corpus)[:16]}-c.tsv.bm25"
    assert sorted(p.name for p in data.iterdir()) == ["c.tsv", "q.tsv"]
    built = json.loads((index / bi.MANIFEST).read_text())
    bm25(*args, BM25Command(k=7, threads=1))  # k is not part of the key
    assert json.loads((index / bi.MANIFEST).read_text()) == built
    err = capsys.readouterr().err
    assert err.count("building the index") == 1 and "rebuilding" not in err
    bm25(*args, BM25Command(k=5, k1=1.2, threads=1))
    assert "rebuilding the index at" in capsys.readouterr().err
    assert json.loads((index / bi.MANIFEST).read_text())["key"]["scoring"]["k1"] == 1.2
    _corpus(corpus, 300, extra="p300\tnovel word novel\n")  # the corpus changed: another key
    bm25(*args, BM25Command(k=5, threads=1))
    index = tmp_path / "cache" / "bm25" / f"{file_checksum(corpus)[:16]}-c.tsv.bm25"
    assert "building the index" in capsys.readouterr().err
    assert "p300" in run_of(tmp_path / "r.trec")["q2"]
    # a file damaged in place (same size) fails its checksum: rebuilt, not served
    docs = index / "docs.bin"
    raw = bytearray(docs.read_bytes())
    raw[:4] = b"\xff\xff\xff\x7f"
    docs.write_bytes(bytes(raw))
    bm25(*args, BM25Command(k=5, threads=1))
    assert "checksum mismatch" in capsys.readouterr().err
    assert (index / "docs.bin").read_bytes() != bytes(raw)
    # the same corpus changed at an --index folder: rebuilt there, saying why
    bm25(*args, BM25Command(k=5, threads=1), index=tmp_path / "idx")
    _corpus(corpus, 300)
    bm25(*args, BM25Command(k=5, threads=1), index=tmp_path / "idx")
    assert "another corpus" in capsys.readouterr().err
    assert sorted(p.name for p in data.iterdir()) == ["c.tsv", "q.tsv"]


def test_a_folder_that_is_not_an_index_is_never_replaced(tmp_path):
    corpus = _corpus(tmp_path / "c.tsv", 20)
    (tmp_path / "q.tsv").write_text("q1\tvaccine\n")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "precious.txt").write_text("keep me")
    with pytest.raises(InvalidArgumentError, match="not a dense-pt BM25 index"):
        bm25(corpus, tmp_path / "q.tsv", tmp_path / "r.trec", BM25Command(k=5), index=mine)
    assert (mine / "precious.txt").read_text() == "keep me" and not (tmp_path / "r.trec").exists()


def test_query_shards_concatenate_to_the_whole_run_on_any_thread_count(tmp_path):
    corpus = _corpus(tmp_path / "c.tsv", 500)
    words = "trial vaccine immune response patients chronic elderly placebo disease cell".split()
    (tmp_path / "q.tsv").write_text(
        "".join(f"q{i}\t{words[i % 10]} {words[(i * 3) % 10]}\n" for i in range(23))
    )
    whole = tmp_path / "whole.trec"
    bm25(corpus, tmp_path / "q.tsv", whole, BM25Command(k=9, threads=1))
    for n in (2, 3, 5):
        parts = []
        for i in range(n):
            part = tmp_path / f"part{i}.trec"
            bm25(corpus, tmp_path / "q.tsv", part, BM25Command(k=9, threads=2, query_shard=f"{i}/{n}"))
            parts.append(part.read_bytes())
        assert b"".join(parts) == whole.read_bytes(), n
    assert parse_query_shard(None) == (0, 1) and parse_query_shard("2/4") == (2, 4)
    for bad in ("4/4", "1", "a/b", "-1/3"):
        with pytest.raises(InvalidArgumentError):
            parse_query_shard(bad)


def test_cli_builds_the_index_alone_then_searches_shards(tmp_path):
    corpus = _corpus(tmp_path / "c.tsv", 50)
    (tmp_path / "q.tsv").write_text("q1\tvaccine trial\nq2\tcell\n")
    r = CliRunner()
    res = r.invoke(app, ["bm25", str(corpus), "--index", str(tmp_path / "idx")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "idx" / bi.MANIFEST).exists() and not (tmp_path / "c.tsv.bm25").exists()
    argv = [
        "bm25",
        str(corpus),
        "--queries",
        str(tmp_path / "q.tsv"),
        "--index",
        str(tmp_path / "idx"),
        "-k",
        "3",
    ]
    res = r.invoke(app, [*argv, "-o", str(tmp_path / "s1.trec"), "--query-shard", "1/2", "--threads", "1"])
    assert res.exit_code == 0, res.output
    assert set(run_of(tmp_path / "s1.trec")) == {"q2"}
    res = r.invoke(app, [*argv[:4], "-k", "3"])
    assert res.exit_code == 2 and "both --queries and --out" in res.output


def test_bm25_index_api_and_a_refused_method(tmp_path):
    corpus = _corpus(tmp_path / "c.tsv", 40)
    idx = bm25_index(corpus, tmp_path / "idx", BM25Settings(k1=1.0, b=0.5))
    assert idx.num_docs == 40 and idx.native.k1 == 1.0 and idx.native.b == 0.5
    docs, scores, offsets = idx.search(["vaccine", "zebra"], k=3)
    assert offsets.tolist() == [0, 3, 3] and np.all(np.diff(scores) <= 0)
    assert all(p.startswith("p") for p in idx.pids(docs))
    with pytest.raises(InvalidArgumentError, match="lucene"):
        bm25_run([("a", "b c")], {"q": "b"}, method="robertson")


def test_the_streamed_run_is_write_runs_bytes(tmp_path):
    from dense_pt.retrieval.bm25 import TAG, retrieve, write_hits
    from dense_pt.runs import RunChunk, read_run, write_run

    corpus = _corpus(tmp_path / "c.tsv", 200)
    idx = bm25_index(corpus, tmp_path / "idx")
    queries = [("q1", "vaccine trial"), ("q2", "zebra"), ("q3", "cell cell disease"), ("q4", "elderly")]
    chunks = list(retrieve(idx, queries, k=50))
    n = write_hits(tmp_path / "a.trec", chunks)
    as_dict: dict[str, dict[str, float]] = {q: {} for q, _ in queries}
    for c in chunks:
        as_dict.update(c.to_dict())
    # the same bytes as the dict through write_run: ties in trec_eval's order like every run
    m = write_run(tmp_path / "b.trec", as_dict, tag=TAG)
    assert n == m > 0 and (tmp_path / "a.trec").read_bytes() == (tmp_path / "b.trec").read_bytes()
    # the Arrow run holds the same rows, scores to the bit
    assert write_hits(tmp_path / "a.arrow", chunks) == n
    a, t = (RunChunk.concat(list(read_run(tmp_path / f"a.{x}"))) for x in ("arrow", "trec"))
    assert a.qids.equals(t.qids) and a.docids.equals(t.docids) and (a.offsets == t.offsets).all()
    assert a.scores.tobytes() == t.scores.tobytes() and (a.ranks == t.ranks).all()
    with pytest.raises(
        InvalidArgumentError, match="an id must be one word"
    ):  # the ids rule: TREC cannot hold it
        write_hits(tmp_path / "c.trec", list(retrieve(idx, [("q 2", "vaccine trial")], k=5)))


def test_a_forked_child_searches_on_threads_of_its_own(tmp_path):
    """The engine keeps its thread pools (rust/core/src/threads.rs); a forked child (a DataLoader
    worker) inherits them without their threads, so it must make its own, not wait forever."""
    import os
    import time

    corpus = _corpus(tmp_path / "c.tsv", 3000)
    idx = bm25_index(corpus, tmp_path / "idx")
    queries = [f"vaccine trial {w}" for w in ("cell", "placebo", "immune", "disease")] * 50
    want = idx.search(queries, 5, threads=2)  # the parent's pool of 2 exists from here on
    pid = os.fork()
    if pid == 0:  # the child: exit 0 when its search on 2 threads gives the parent's result
        got = idx.search(queries, 5, threads=2)
        os._exit(0 if all(np.array_equal(a, b) for a, b in zip(want, got, strict=True)) else 3)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child's search did not finish in 60 s (an inherited pool without threads)")
