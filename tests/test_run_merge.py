"""Shard runs merged (``dense-pt runs merge``) equal the run of one search over everything, bit for
bit: 2 query shards, 2 passage shards (with exact ties at the top-k cut), both formats; fusion of
two run files streamed by aligned query chunks equals the per-query fusion of earlier versions to
the bit; random access by query (RunIndex) and the pipeline's legacy run files."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from dense_pt.cli import app
from dense_pt.config.retrieval import BM25Command
from dense_pt.errors import InvalidArgumentError
from dense_pt.retrieval.search import id_tie_key, search_arrays, write_arrays
from dense_pt.runs import load_run, rank_hits, read_run, write_run
from dense_pt.runs.index import AlignedRuns, RunIndex
from dense_pt.runs.merge import merge_runs

K = 7


def corpus(seed: int = 0):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(12, 8)).astype(np.float32)
    p = rng.normal(size=(60, 8)).astype(np.float16)
    p[40:52] = p[0]  # twelve exact copies of passage 0, across the shard cut: ties at every depth
    pids = [f"doc{int(x)}" for x in rng.permutation(1000)[:60]]  # id order unlike row order
    q[:3] = p[0].astype(np.float32)  # three queries whose best passages are the tied copies
    return q, p, pids, [f"q{i}" for i in range(12)]


def searched(q, p, pids, qids, out, tie_by_id=True):
    ids = pa.array(pids)
    s, r = search_arrays(q, [p], K, "ip", tie_key=id_tie_key(ids) if tie_by_id else None)
    write_arrays(out, qids, ids, s, r)


def content(path):
    return [(c.qids.to_pylist(), c.offsets.tolist(), c.docids.to_pylist(), c.scores.view(np.uint64).tolist(),
             c.ranks.tolist()) for c in read_run(path, chunk_rows=1 << 30)]  # fmt: skip


@pytest.mark.parametrize("suffix", [".trec", ".arrow"])
def test_two_shards_merge_into_the_one_machine_run(tmp_path, suffix):
    q, p, pids, qids = corpus()
    searched(q, p, pids, qids, tmp_path / f"full{suffix}")
    # passage shards: each searched alone, to the same depth
    searched(q, p[:45], pids[:45], qids, tmp_path / "p0.arrow")
    searched(q, p[45:], pids[45:], qids, tmp_path / "p1.trec")  # the formats may differ
    info = merge_runs([tmp_path / "p0.arrow", tmp_path / "p1.trec"], tmp_path / f"merged_p{suffix}")
    assert info["mode"] == "passages" and info["k"] == K
    # query shards: each searched over every passage
    searched(q[:5], p, pids, qids[:5], tmp_path / "q0.arrow")
    searched(q[5:], p, pids, qids[5:], tmp_path / "q1.arrow")
    assert (
        merge_runs([tmp_path / "q0.arrow", tmp_path / "q1.arrow"], tmp_path / f"merged_q{suffix}")["mode"]
        == "queries"
    )
    for merged in ("merged_p", "merged_q"):
        got = tmp_path / f"{merged}{suffix}"
        assert content(got) == content(tmp_path / f"full{suffix}")
        if suffix == ".trec":
            assert got.read_bytes() == (tmp_path / "full.trec").read_bytes()
    # the ties are real: cut by corpus row instead, the whole search keeps other tied passages
    # than the shards' union does, which is why search cuts by passage id
    searched(q, p, pids, qids, tmp_path / "by_row.arrow", tie_by_id=False)
    assert load_run(tmp_path / "by_row.arrow") != load_run(tmp_path / f"merged_p{suffix}")


def test_merge_refusals_and_cli(tmp_path):
    write_run(tmp_path / "a.arrow", {"q1": {"d1": 1.0, "d2": 0.5}, "q2": {"d3": 1.0}})
    write_run(tmp_path / "b.arrow", {"q1": {"d2": 0.7}})
    with pytest.raises(InvalidArgumentError, match="passage 'd2' is in two inputs for query 'q1'"):
        merge_runs([tmp_path / "a.arrow", tmp_path / "b.arrow"], tmp_path / "m.arrow")
    with pytest.raises(InvalidArgumentError, match="query 'q1' is in two inputs"):
        merge_runs([tmp_path / "a.arrow", tmp_path / "b.arrow"], tmp_path / "m.arrow", mode="queries")
    assert not (tmp_path / "m.arrow").exists()
    write_run(tmp_path / "c.trec", {"q1": {"d9": 2.0, "d8": 0.1}, "q3": {"d1": 1.0}})
    r = CliRunner().invoke(app, ["runs", "merge", str(tmp_path / "a.arrow"), str(tmp_path / "c.trec"), "-o",
                                 str(tmp_path / "m.trec"), "-k", "2"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert load_run(tmp_path / "m.trec") == {
        "q1": {"d9": 2.0, "d1": 1.0},
        "q2": {"d3": 1.0},
        "q3": {"d1": 1.0},
    }
    r = CliRunner().invoke(
        app, ["runs", "convert", str(tmp_path / "m.trec"), str(tmp_path / "m.arrow"), "--tag", "x"]
    )
    assert r.exit_code == 0, r.output
    assert load_run(tmp_path / "m.arrow") == load_run(tmp_path / "m.trec")


def test_run_index_reads_queries_in_any_order(tmp_path):
    run = {f"q{i}": {f"d{j}": float(j % 3) for j in range(i % 5)} for i in range(40)}
    write_run(tmp_path / "r.trec", run)  # TREC: indexed through a temporary Arrow copy
    with RunIndex(tmp_path / "r.trec") as ix:
        want = ["q7", "q39", "missing", "q0", "q7"]
        got = ix.get(want).to_dict()
        assert got == {q: dict(rank_hits(run.get(q, {}))) for q in want}  # no rows for "missing"
        assert list(got["q7"]) == [d for d, _ in rank_hits(run["q7"])]
    a = {"x": {"d": 1.0}, "y": {"d": 2.0}}
    b = {"z": {"e": 1.0}, "y": {"f": 3.0}}
    write_run(tmp_path / "a.arrow", a)
    write_run(tmp_path / "b.arrow", b)
    with AlignedRuns([tmp_path / "a.arrow", tmp_path / "b.arrow"]) as runs:
        steps = list(runs.chunks(chunk_rows=1))
    assert [s[0].qids.to_pylist() for s in steps] == [["x"], ["y"], ["z"]]
    assert [[c.to_dict() for c in s] for s in steps][1] == [{"y": {"d": 2.0}}, {"y": {"f": 3.0}}]


def reference_rrf(runs, k, depth):
    """rrf of commit 29880bb, verbatim in substance: the bits the streamed fusion must give."""
    out = {}
    for q in sorted({q for r in runs for q in r}):
        fused: dict[str, float] = {}
        for run in runs:
            for rank, (d, _) in enumerate(rank_hits(run.get(q, {})), start=1):
                fused[d] = fused.get(d, 0.0) + 1.0 / (k + rank)
        out[q] = dict(rank_hits(fused)[:depth])
    return out


def reference_interpolate(sparse, dense, weight, depth):
    def minmax(scores):
        if not scores:
            return {}
        lo, hi = min(scores.values()), max(scores.values())
        span = hi - lo
        return {d: (s - lo) / span if span > 0 else 1.0 for d, s in scores.items()}

    out = {}
    for q in sorted(set(sparse) | set(dense)):
        s, d = minmax(sparse.get(q, {})), minmax(dense.get(q, {}))
        fused = {p: weight * d.get(p, 0.0) + (1.0 - weight) * s.get(p, 0.0) for p in set(s) | set(d)}
        out[q] = dict(rank_hits(fused)[:depth])
    return out


def fusion_case(seed):
    rng = np.random.default_rng(seed)
    sparse, dense = {}, {}
    for i in range(30):
        pool = [f"d{j}" for j in range(25)]
        if i % 7:
            sparse[f"q{i}"] = {d: float(rng.integers(0, 6)) for d in rng.choice(pool, 12, replace=False)}
        if i % 5:
            dense[f"q{i}"] = {d: float(rng.uniform(-1, 1)) for d in rng.choice(pool, 12, replace=False)}
    dense["q3"] = {"d1": 0.5, "d2": 0.5}  # constant scores
    return sparse, dense


@pytest.mark.parametrize("seed", [0, 1])
def test_streamed_fusion_equals_the_per_query_fusion_bit_for_bit(tmp_path, seed):
    from dense_pt.config.fusion import FuseSettings
    from dense_pt.retrieval.fusion import fuse_files, interpolate, rrf

    sparse, dense = fusion_case(seed)
    assert rrf([sparse, dense], 60, 10) == reference_rrf([sparse, dense], 60, 10)
    assert interpolate(sparse, dense, 0.3, 10) == reference_interpolate(sparse, dense, 0.3, 10)
    write_run(tmp_path / "s.arrow", sparse)
    write_run(tmp_path / "d.trec", dict(reversed(list(dense.items()))))  # another query order
    for method, kw, ref in (("rrf", {"rrf_k": 60}, reference_rrf([sparse, dense], 60, 10)),
                            ("interpolation", {"weight": 0.3}, reference_interpolate(sparse, dense, 0.3, 10))):  # fmt: skip
        fuse_files(
            tmp_path / "s.arrow", tmp_path / "d.trec", tmp_path / f"{method}.arrow",
            FuseSettings(method=method, k=10, **kw),
        )  # fmt: skip
        got = load_run(tmp_path / f"{method}.arrow")
        assert got == ref and all(list(got[q]) == list(ref[q]) for q in ref)
        bits = {q: [np.float64(v).view(np.uint64) for v in h.values()] for q, h in got.items()}
        assert bits == {q: [np.float64(v).view(np.uint64) for v in h.values()] for q, h in ref.items()}


def test_a_pipeline_folder_finished_with_a_trec_run_is_still_read(tmp_path):
    from dense_pt.pipeline.common import run_file

    write_run(tmp_path / "run.trec", {"q": {"d": 1.0}})
    assert run_file(tmp_path) == tmp_path / "run.trec"
    write_run(tmp_path / "run.arrow", {"q": {"d": 1.0}})
    assert run_file(tmp_path) == tmp_path / "run.arrow"


def test_bm25_query_shards_merge_into_the_unsharded_run(tmp_path):
    """`dense-pt bm25 --query-shard I/N` per task, then `runs merge`: the run of one machine."""
    import json

    from dense_pt.retrieval.bm25 import bm25

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "title": "", "text": " ".join(rng.choice(words, 12))}) + "\n"
                              for i in range(60)))  # fmt: skip
    (tmp_path / "q.tsv").write_text("".join(f"q{i}\t{' '.join(rng.choice(words, 3))}\n" for i in range(9)))
    for suffix in (".arrow", ".trec"):
        bm25(corpus, tmp_path / "q.tsv", tmp_path / f"all{suffix}", BM25Command(k=10), index=tmp_path / "idx")
        for i in range(2):
            bm25(
                corpus,
                tmp_path / "q.tsv",
                tmp_path / f"s{i}{suffix}",
                BM25Command(k=10, query_shard=f"{i}/2"),
                index=tmp_path / "idx",
            )
        info = merge_runs([tmp_path / f"s0{suffix}", tmp_path / f"s1{suffix}"], tmp_path / f"m{suffix}")
        assert info["mode"] == "queries"
        assert content(tmp_path / f"m{suffix}") == content(tmp_path / f"all{suffix}")
        if suffix == ".trec":
            assert (tmp_path / "m.trec").read_bytes() == (tmp_path / "all.trec").read_bytes()


def _search_k(q, p, pids, qids, k, out):
    ids = pa.array(pids)
    s, r = search_arrays(q, [p], k, "ip", tie_key=id_tie_key(ids))
    write_arrays(out, qids, ids, s, r, depth=k)  # as dense-pt search records it


def _cut(path, k):
    """A run's rows, each query cut to its top ``k``: what an exact merge to depth k must equal."""
    return {q: list(hits.items())[:k] for q, hits in load_run(path).items()}


@pytest.mark.parametrize("suffix", [".arrow", ".trec"])
def test_passage_shards_of_unequal_depth_merge_exactly_or_are_refused(tmp_path, suffix):
    """Shards searched with -k 20 and -k 10: the union is exact only to depth 10 (the -k 10 shard
    does not list its 11th passage, which may be in the whole corpus's top 20). The merge keeps the
    top 10, says so, and equals the unsharded run cut to 10; -k 20 is refused. Arrow shards record
    their depth; TREC shards are judged by their most hits per query."""
    from dense_pt.runs import convert_run

    q, p, pids, qids = corpus()
    _search_k(q, p, pids, qids, 20, tmp_path / "full.arrow")
    _search_k(q, p[:30], pids[:30], qids, 20, tmp_path / "a.arrow")
    _search_k(q, p[30:], pids[30:], qids, 10, tmp_path / "b.arrow")
    shards = [tmp_path / f"a{suffix}", tmp_path / f"b{suffix}"]
    if suffix == ".trec":
        for s in shards:
            convert_run(s.with_suffix(".arrow"), s)
    info = merge_runs(shards, tmp_path / "m.arrow", mode="passages")
    assert info["k"] == 10
    assert info["note"].startswith("the shards' depths differ (20, 10): kept the top 10 per query")
    assert _cut(tmp_path / "m.arrow", 10) == _cut(tmp_path / "full.arrow", 10)
    assert max(len(h) for h in load_run(tmp_path / "m.arrow").values()) == 10
    with pytest.raises(
        InvalidArgumentError, match=r"-k 20: these passage shards give an exact top-k only to depth 10"
    ):
        merge_runs(shards, tmp_path / "m20.arrow", mode="passages", k=20)
    assert not (tmp_path / "m20.arrow").exists()
    assert merge_runs(shards, tmp_path / "m5.arrow", mode="passages", k=5)["note"] is None
    assert _cut(tmp_path / "m5.arrow", 5) == _cut(tmp_path / "full.arrow", 5)
    # the command line says so in one line, and in --json
    res = CliRunner().invoke(app, ["runs", "merge", *map(str, shards), "-o", str(tmp_path / "c.trec"),
                                   "--mode", "passages", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "kept the top 10 per query" in res.stdout.split('"note"')[1]
    res = CliRunner().invoke(
        app, ["runs", "merge", *map(str, shards), "-o", str(tmp_path / "c2.trec"), "-k", "20"]
    )
    assert isinstance(res.exception, InvalidArgumentError) and "exact top-k only to depth 10" in str(
        res.exception
    )


def test_a_shard_that_holds_fewer_passages_than_its_k_is_exact_to_its_k(tmp_path):
    """A shard of 5 passages searched with -k 10 lists all 5: its recorded depth (10), not its hits
    per query (5), bounds the merge, which stays exact to 10."""
    q, p, pids, qids = corpus()
    _search_k(q, p, pids, qids, 10, tmp_path / "full.arrow")
    _search_k(q, p[:55], pids[:55], qids, 10, tmp_path / "a.arrow")
    _search_k(q, p[55:], pids[55:], qids, 10, tmp_path / "b.arrow")
    info = merge_runs([tmp_path / "a.arrow", tmp_path / "b.arrow"], tmp_path / "m.arrow", mode="passages")
    assert info["k"] == 10 and info["note"] is None
    assert load_run(tmp_path / "m.arrow") == load_run(tmp_path / "full.arrow")
