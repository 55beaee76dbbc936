"""Hybrid retrieval (`dense-pt fuse`, the pipeline's fusion stage): RRF and score interpolation
against plain-Python definitions, on runs with ties, passages missing from one run, queries missing
from one run and constant scores."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from dense_pt.cli import app, exit_code
from dense_pt.errors import InvalidArgumentError
from dense_pt.retrieval.fusion import interpolate, rrf, tune_weight
from dense_pt.runs import load_run, write_run


def random_runs(seed: int = 0, queries: int = 12, docs: int = 30):
    rng = np.random.default_rng(seed)
    sparse, dense = {}, {}
    for qi in range(queries):
        q = f"q{qi}"
        pool = [f"d{j:02d}" for j in range(docs)]
        a = rng.choice(pool, size=15, replace=False)
        b = rng.choice(pool, size=15, replace=False)
        # BM25-like scores with ties (rounded), cosine-like dense scores
        sparse[q] = {d: float(np.round(rng.uniform(5, 25), 0)) for d in a}
        dense[q] = {d: float(rng.uniform(0.2, 0.9)) for d in b}
    sparse["only-sparse"] = {"d01": 3.0, "d02": 3.0}  # a query one run lacks, constant scores
    dense["only-dense"] = {"d05": 0.5}
    return sparse, dense


def ranked(hits):
    """trec_eval's order: score descending, then passage id descending."""
    return sorted(hits, key=lambda d: (hits[d], d), reverse=True)


def ref_rrf(runs, k):
    out: dict[str, dict[str, float]] = {}
    for q in {q for r in runs for q in r}:
        s: dict[str, float] = {}
        for r in runs:
            for i, d in enumerate(ranked(r.get(q, {}))):
                s[d] = s.get(d, 0) + 1 / (k + i + 1)
        out[q] = s
    return out


def ref_interp(sparse, dense, w):
    def norm(h):
        if not h:
            return {}
        lo, hi = min(h.values()), max(h.values())
        return {d: ((v - lo) / (hi - lo) if hi > lo else 1.0) for d, v in h.items()}

    out = {}
    for q in set(sparse) | set(dense):
        a, b = norm(sparse.get(q, {})), norm(dense.get(q, {}))
        out[q] = {d: w * b.get(d, 0) + (1 - w) * a.get(d, 0) for d in set(a) | set(b)}
    return out


@pytest.mark.parametrize("k", [0, 60])
def test_rrf_matches_the_definition(k):
    sparse, dense = random_runs()
    got = rrf([sparse, dense], k)
    ref = ref_rrf([sparse, dense], k)
    assert set(got) == set(ref)
    for q in ref:
        assert ranked(got[q]) == ranked(ref[q])
        for d, v in ref[q].items():
            assert got[q][d] == pytest.approx(v, abs=1e-15)


@pytest.mark.parametrize("w", [0.0, 0.3, 0.5, 1.0])
def test_interpolation_matches_the_definition(w):
    sparse, dense = random_runs(1)
    got = interpolate(sparse, dense, w)
    ref = ref_interp(sparse, dense, w)
    for q in ref:
        assert ranked(got[q]) == ranked(ref[q])
        np.testing.assert_allclose([got[q][d] for d in ref[q]], list(ref[q].values()), atol=1e-15)


def test_the_edges_of_the_interpolation_are_the_runs_themselves():
    sparse, dense = random_runs(2)
    only_sparse = interpolate(sparse, dense, 0.0)
    for q, hits in sparse.items():
        assert [d for d in ranked(only_sparse[q]) if d in hits] == ranked(hits)
    only_dense = interpolate(sparse, dense, 1.0)
    for q, hits in dense.items():
        # the dense order, the BM25-only passages scoring 0 like the dense run's lowest (its minimum)
        assert [d for d in ranked(only_dense[q]) if d in hits] == ranked(hits)
        assert ranked(only_dense[q])[: len(hits) - 1] == ranked(hits)[:-1]


def test_depth_cuts_each_query():
    sparse, dense = random_runs(3)
    assert all(len(h) <= 5 for h in rrf([sparse, dense], 60, depth=5).values())
    assert all(len(h) <= 5 for h in interpolate(sparse, dense, 0.5, depth=5).values())


def test_tuning_picks_the_best_weight_on_the_given_queries():
    # dense is right on every query, BM25 wrong: the tuned weight must lean to dense
    sparse = {f"q{i}": {"bad": 10.0, "good": 1.0} for i in range(5)}
    dense = {f"q{i}": {"good": 0.9, "bad": 0.1} for i in range(5)}
    qrels = {f"q{i}": {"good": 1} for i in range(5)}
    best, table = tune_weight(sparse, dense, qrels, "RR@10")
    assert table[0.0] == pytest.approx(0.5) and table[1.0] == pytest.approx(1.0)
    assert best == min(w for w, v in table.items() if v == max(table.values()))  # ties: smallest weight
    # at 0.5 the two tie and trec_eval's order (id descending) puts "good" first
    assert best == 0.5 and table[0.45] == pytest.approx(0.5)


def test_bad_arguments():
    sparse, dense = random_runs()
    with pytest.raises(InvalidArgumentError, match=r"\[0, 1\]"):
        interpolate(sparse, dense, 1.5)
    with pytest.raises(InvalidArgumentError, match="none of the 1 tuning queries is in both runs"):
        tune_weight(sparse, dense, {"zz": {"d01": 1}})


def test_tuning_ignores_queries_one_run_lacks():
    # The dense run covers q0-q1 only (a dev-only zero-shot run, say); the tuning qrels have q0-q4.
    # BM25 is wrong on q2-q4 too, so counting them as dense misses used to pull the weight to 0.
    sparse = {f"q{i}": {"bad": 10.0, "good": 1.0} for i in range(5)}
    dense = {f"q{i}": {"good": 0.9, "bad": 0.1} for i in range(2)}
    qrels = {f"q{i}": {"good": 1} for i in range(5)}
    best, table = tune_weight(sparse, dense, qrels, "RR@10")
    assert best == 0.5 and table[1.0] == pytest.approx(1.0)  # measured on q0-q1 alone
    with pytest.raises(InvalidArgumentError, match=r"the sparse run has 3, the dense run 0"):
        tune_weight(sparse, dense, {f"q{i}": {"good": 1} for i in range(2, 5)}, "RR@10")


def test_cli_fuse(tmp_path):
    sparse, dense = random_runs(4)
    write_run(tmp_path / "a.trec", sparse)
    write_run(tmp_path / "b.trec", dense)
    qrels = tmp_path / "q.qrels"
    qrels.write_text("".join(f"q{i} 0 d0{i} 1\n" for i in range(6)))
    runner = CliRunner()
    base = ["fuse", str(tmp_path / "a.trec"), str(tmp_path / "b.trec"), "-o", str(tmp_path / "f.trec")]
    r = runner.invoke(app, [*base, "--method", "rrf"])
    assert r.exit_code == 0, r.output
    got = load_run(tmp_path / "f.trec")
    ref = ref_rrf([load_run(tmp_path / "a.trec"), load_run(tmp_path / "b.trec")], 60)
    assert {q: ranked(h)[:10] for q, h in got.items()} == {q: ranked(h)[:10] for q, h in ref.items()}
    r = runner.invoke(app, [*base, "--tune-qrels", str(qrels)])
    assert r.exit_code != 0 and "f.trec already exists (use --force to replace it)" in str(r.exception)
    base.append("--force")
    r = runner.invoke(app, [*base, "--tune-qrels", str(qrels), "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.stdout)
    assert info["method"] == "interpolation" and 0 <= info["weight"] <= 1
    r = runner.invoke(app, [*base, "--weight", "0.4", "--tune-qrels", str(qrels)])
    assert r.exit_code != 0 and "exactly one" in str(r.exception)
    r = runner.invoke(app, [*base, "--method", "rrf", "--weight", "0.4"])
    assert r.exception is not None
    assert (
        exit_code(r.exception) == 2
        and str(r.exception) == "dense-pt fuse: weight is for method interpolation, not rrf"
    )
    r = runner.invoke(app, [*base, "--method", "borda"])  # refused by the option's choices
    said = " ".join(re.sub("[│╭╮╰╯─]", " ", r.output).split())  # a rich panel, wrapped
    assert r.exit_code == 2 and "'borda' is not one of 'interpolation', 'rrf'" in said
