"""The metrics against three independent references: plain-Python definitions of each measure,
``ir_measures.calc_aggregate`` and pytrec_eval, on hand-made runs, on real runs over SciFact (BM25
and a dense run, ties included) and on crafted runs over the real TREC DL 2019/2020 judgements.
The explicit conventions (tie order, relevance level, self hits, judged queries missing from the
run) change what the metrics say, and are recorded."""

from __future__ import annotations

import json
import math
import re
import struct
import zlib

import numpy as np
import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dense_pt.cli import app
from dense_pt.config.retrieval import BM25Settings
from dense_pt.data import load_qrels, load_queries
from dense_pt.errors import FormatError, InvalidArgumentError, MismatchError
from dense_pt.evaluation import DEFAULT_MEASURES, answer_recall, evaluate_run, has_answer, split_measures
from dense_pt.runs import load_run, rank_hits, read_run, write_run

QRELS = {"q1": {"d1": 2, "d2": 1, "d9": 1}, "q2": {"d3": 1}, "q3": {"d5": 3, "d6": 0}}
RUN = {
    "q1": {"d2": 1.0, "d1": 1.0, "d4": 1.0, "d5": 0.5},  # a three-way tie at the top
    "q2": {"d1": 2.0, "d3": 2.0, "d7": 1.0},
    "q3": {"d6": 3.0, "d5": 2.0, "q3": 9.0},
    "qx": {"d1": 1.0},  # not judged
}
MEASURES = {"ndcg_cut_10": "nDCG@10", "recip_rank": "RR", "recall_100": "R@100", "map": "AP", "P_5": "P@5"}


# ---- the references ----------------------------------------------------------------------------
def trec_order(hits: dict[str, float]) -> list[str]:
    """trec_eval's ranking, written independently of dense_pt: score descending, then docno
    descending (compare the negated code points)."""
    return sorted(hits, key=lambda d: (-hits[d], [-ord(c) for c in d]))


def plain(name: str, ranked: list[str], judged: dict[str, int], level: int = 1) -> float:
    """One query's value of a measure, by its textbook (trec_eval) definition."""
    m = re.fullmatch(r"(nDCG|RR|R|P|AP)(?:@(\d+))?", name)
    assert m, name
    kind, k = m.group(1), int(m.group(2)) if m.group(2) else len(ranked)
    top = ranked[:k]
    rel = [judged.get(d, 0) >= level for d in top]
    n_rel = sum(1 for g in judged.values() if g >= level)
    if kind == "nDCG":
        dcg = sum(max(judged.get(d, 0), 0) / math.log2(i + 2) for i, d in enumerate(top))
        ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:k]
        idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
        return dcg / idcg if idcg > 0 else 0.0
    if kind == "RR":
        return next((1.0 / (i + 1) for i, r in enumerate(rel) if r), 0.0)
    if kind == "R":
        return sum(rel) / n_rel if n_rel else 0.0
    if kind == "P":
        return sum(rel) / k
    hits, ap = 0, 0.0  # AP over the whole ranking
    for i, r in enumerate(rel):
        if r:
            hits += 1
            ap += hits / (i + 1)
    return ap / n_rel if n_rel else 0.0


def plain_mean(name, run, qrels, level=1):
    """Mean over every judged query; a query missing from the run is zero."""
    return sum(plain(name, trec_order(run.get(q, {})), qrels[q], level) for q in qrels) / len(qrels)


def direct(qrels, run):
    ev = pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES))
    res = ev.evaluate({q: h for q, h in run.items() if q in qrels})
    return {MEASURES[k]: sum(r[k] for r in res.values()) / len(res) for k in MEASURES}


def calc_aggregate(names, qrels, run):
    import ir_measures

    parsed = {n: ir_measures.parse_measure(n) for n in names}
    got = ir_measures.calc_aggregate(list(parsed.values()), qrels, run)
    return {n: got[m] for n, m in parsed.items()}


def resolved(run):
    """The run with trec_eval's tie order written into strictly decreasing scores."""
    return {q: {d: float(len(h) - i) for i, d in enumerate(trec_order(h))} for q, h in run.items()}


# ---- small runs ---------------------------------------------------------------------------------
def test_equals_pytrec_eval_with_ties():
    judged = {q: QRELS[q] for q in QRELS}
    got = evaluate_run(RUN, judged, measures=list(MEASURES.values())).measures
    want = direct(QRELS, RUN)
    for k, v in want.items():
        assert got[k] == pytest.approx(v, abs=1e-12), k


def test_score_only_keeps_file_order_among_ties():
    # score-only: q2's tie d1/d3 stays in file order (d1 first) -> RR 0.5;
    # docno (trec_eval) puts d3 first (descending docno) -> RR 1.
    q2 = {"q2": QRELS["q2"]}
    so = evaluate_run({"q2": RUN["q2"]}, q2, measures=["RR"], tie_break="score-only")
    dn = evaluate_run({"q2": RUN["q2"]}, q2, measures=["RR"], tie_break="docno")
    assert so.measures["RR"] == pytest.approx(0.5)
    assert dn.measures["RR"] == pytest.approx(1.0)
    assert so.settings["tie_break"] == "score-only"
    # and equals pytrec_eval on the explicitly re-ranked run
    reranked = {"q2": {"d1": 3.0, "d3": 2.0, "d7": 1.0}}
    assert so.measures["RR"] == pytest.approx(direct(q2, reranked)["RR"])
    # the run writer ranks with the evaluation's default rule
    assert [d for d, _ in rank_hits(RUN["q1"])] == trec_order(RUN["q1"])


def test_drop_self_hits_recorded():
    q3 = {"q3": QRELS["q3"]}
    ev = evaluate_run({"q3": RUN["q3"]}, q3, measures=["RR@10"], drop_self_hits=True)
    assert ev.settings["dropped_self_hits"] == 1 and ev.settings["drop_self_hits"] is True
    assert ev.measures["RR@10"] == pytest.approx(direct(q3, {"q3": {"d6": 3.0, "d5": 2.0}})["RR"])
    kept = evaluate_run({"q3": RUN["q3"]}, q3, measures=["RR@10"])
    assert kept.measures["RR@10"] == pytest.approx(1 / 3)  # q3 itself, d6 (rel 0), then d5


def test_cut_measures_stop_at_their_cutoff():
    """Runs longer than the cutoff with the first relevant hit past it (the RR@10 bug: every test
    run had fewer than 10 hits, so the uncut reciprocal rank went unnoticed)."""
    qrels = {"a": {"p31": 1}, "b": {"p11": 1, "p3": 1}, "c": {"p10": 1}}
    run = {q: {f"p{i}": 100.0 - i for i in range(1, 41)} for q in qrels}
    ev = evaluate_run(run, qrels, measures=["RR@10", "RR", "R@10", "nDCG@10", "P@10", "AP"])
    m = ev.measures
    assert m["RR@10"] == pytest.approx((0 + 1 / 3 + 1 / 10) / 3)  # a's relevant is at rank 31
    assert m["RR"] == pytest.approx((1 / 31 + 1 / 3 + 1 / 10) / 3)
    assert m["R@10"] == pytest.approx((0 + 0.5 + 1) / 3)
    assert ev.settings["providers"]["RR@10"] == "msmarco"
    for name in ("RR@10", "RR", "R@10", "nDCG@10", "P@10", "AP"):
        assert m[name] == pytest.approx(plain_mean(name, run, qrels), abs=1e-12), name


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(st.sampled_from([f"d{i}" for i in range(8)]), st.integers(0, 3), min_size=1, max_size=8),
    st.dictionaries(
        st.sampled_from([f"d{i}" for i in range(8)]),
        st.sampled_from([0.0, 0.5, 1.0, 2.0]),  # few values: many ties
        min_size=1,
        max_size=8,
    ),
    st.integers(1, 3),
)
def test_random_runs_match_the_references(qrel, hits, level):
    names = ["nDCG@10", "nDCG@3", "RR@3", "RR", "R@3", "P@2", "P@5", "AP"]
    got = evaluate_run({"q": hits}, {"q": qrel}, measures=names, rel_level=level).measures
    for name in names:
        assert got[name] == pytest.approx(plain(name, trec_order(hits), qrel, level), abs=1e-12), name
    if level == 1:
        want = direct({"q": qrel}, {"q": hits})
        for k in ("nDCG@10", "RR", "AP", "P@5"):
            assert got[k] == pytest.approx(want[k], abs=1e-12), k


def test_qrels_for_another_collection_refused():
    with pytest.raises(MismatchError):
        evaluate_run(RUN, {"zz": {"d1": 1}})
    other = {f"q{i}": {f"x{i}": 1} for i in range(6)}
    run = {f"q{i}": {f"d{i}": 1.0} for i in range(6)}
    with pytest.raises(MismatchError, match="another corpus"):
        evaluate_run(run, other)


def test_measure_lists_and_levels():
    assert split_measures(["nDCG@10,RR@10", "R@100", "P(rel=2,judged_only=True)@5"]) == [
        "nDCG@10", "RR@10", "R@100", "P(rel=2,judged_only=True)@5",
    ]  # fmt: skip
    with pytest.raises(InvalidArgumentError, match="empty measure"):
        split_measures(["nDCG@10,"])
    with pytest.raises(InvalidArgumentError, match="unknown measure"):
        evaluate_run(RUN, QRELS, measures=["nDCG@10,MRR@@3"])
    with pytest.raises(InvalidArgumentError, match="rel_level"):
        evaluate_run(RUN, QRELS, rel_level=0)
    # a level written in the measure wins over rel_level
    qrels = {"q": {"a": 1, "b": 2}}
    run = {"q": {"a": 2.0, "b": 1.0}}
    ev = evaluate_run(run, qrels, measures=["RR@10", "RR(rel=1)@10"], rel_level=2)
    assert ev.measures == {"RR@10": 0.5, "RR(rel=1)@10": 1.0}
    assert ev.settings["rel_level"] == 2


# ---- real runs: SciFact BM25 and a dense run ----------------------------------------------------
@pytest.fixture(scope="module")
def scifact(shared_data):
    from dense_pt.data import corpus_texts
    from dense_pt.retrieval.bm25 import bm25_run

    sci = shared_data / "beir-scifact"
    qrels = load_qrels(sci / "qrels" / "train.tsv")
    queries = {q: t for q, t in load_queries(sci / "queries.jsonl").items() if q in qrels}
    docs = list(corpus_texts(sci / "corpus.jsonl"))
    bm25 = bm25_run(docs, queries, BM25Settings(k=100))
    return qrels, queries, docs, bm25


def dense_run(docs, queries, dim=256, k=100, buckets=4096):
    """A dense run without a neural model: idf-weighted hashed bag-of-words vectors through a fixed
    random projection, float32 cosine scores (nDCG@10 about 0.40 on these queries)."""
    proj = np.random.default_rng(0).standard_normal((buckets, dim)).astype(np.float32)

    def counts(texts):
        c = np.zeros((len(texts), buckets), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z0-9]+", t.lower()):
                c[i, zlib.crc32(w.encode()) % buckets] += 1
        return c

    cd, cq = counts([t for _, t in docs]), counts([queries[q] for q in queries])
    idf = np.log((1 + len(docs)) / (1 + (cd > 0).sum(0))).astype(np.float32)

    def embed(c):
        v = (np.log1p(c) * idf) @ proj
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    pids, qids = [p for p, _ in docs], list(queries)
    scores = embed(cq) @ embed(cd).T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return {q: {pids[j]: float(scores[i, j]) for j in top[i]} for i, q in enumerate(qids)}


def check_all(run, qrels, with_ties: bool):
    got = evaluate_run(run, qrels).measures
    assert list(got) == list(DEFAULT_MEASURES)
    for name in DEFAULT_MEASURES:
        assert got[name] == pytest.approx(plain_mean(name, run, qrels), abs=1e-12), name
    ref = calc_aggregate(DEFAULT_MEASURES, qrels, resolved(run))
    for name in DEFAULT_MEASURES:
        assert got[name] == pytest.approx(ref[name], abs=1e-12), name
    if not with_ties:  # on the raw scores too: no provider's tie rule can matter
        raw = calc_aggregate(DEFAULT_MEASURES, qrels, run)
        for name in DEFAULT_MEASURES:
            assert got[name] == pytest.approx(raw[name], abs=1e-12), name
    return got


def count_ties(run):
    return sum(len(h) - len(set(h.values())) for h in run.values())


def test_real_runs_match_references(scifact):
    qrels, queries, docs, bm25 = scifact
    dense = dense_run(docs, queries)
    for name, run in (("bm25", bm25), ("dense", dense)):
        ties = count_ties(run)
        got = check_all(run, qrels, with_ties=ties > 0)
        # RR@10 is cut at 10: some queries find their first relevant passage below rank 10
        late = sum(1 for q in qrels if plain("RR", trec_order(run[q]), qrels[q]) < 0.1 and
                   plain("RR", trec_order(run[q]), qrels[q]) > 0)  # fmt: skip
        assert late > 5, name
        assert got["RR@10"] < plain_mean("RR", run, qrels) - 1e-3, name
        # the same run with heavy ties (scores rounded to 2 significant digits)
        tied = {q: {d: float(f"{s:.2g}") for d, s in h.items()} for q, h in run.items()}
        assert count_ties(tied) > 10 * len(tied)
        check_all(tied, qrels, with_ties=True)
        # trec_eval's tie rule (docno descending) and run-file order really differ on these ties
        so = evaluate_run(tied, qrels, tie_break="score-only").measures
        assert so != evaluate_run(tied, qrels).measures
        so_ref = {q: {d: float(len(h) - i) for i, d in enumerate(sorted(h, key=lambda d: -h[d]))}
                  for q, h in tied.items()}  # fmt: skip
        for name_m in DEFAULT_MEASURES:
            assert so[name_m] == pytest.approx(plain_mean(name_m, so_ref, qrels), abs=1e-12)


# ---- TREC DL: graded judgements, relevance level, missing queries --------------------------------
@pytest.mark.parametrize("year", ["2019", "2020"])
def test_trec_dl_relevance_level_and_missing_queries(shared_data, year):
    qrels = load_qrels(shared_data / "msmarco-qrels" / f"{year}qrels-pass.txt")
    assert {g for j in qrels.values() for g in j.values()} == {0, 1, 2, 3}
    rng = np.random.default_rng(int(year))
    run: dict[str, dict[str, float]] = {}
    qids = sorted(qrels)
    for i, q in enumerate(qids):
        if i % 9 == 4:
            continue  # judged but missing from the run: counts as zero
        by_grade = {g: sorted(d for d, r in qrels[q].items() if r == g) for g in range(4)}
        # 40 hits: unjudged filler, grade-1 passages early, the first grade >= 2 passage late
        # (often past rank 10), so RR@10 at level 1 and level 2 differ and the cut matters.
        ranked = [f"x{q}-{j}" for j in range(40)]
        for g1 in by_grade[1][:2]:
            ranked.insert(int(rng.integers(0, 6)), g1)
        strong = by_grade[2][:1] + by_grade[3][:1]
        for s in strong:
            ranked.insert(int(rng.integers(3, 30)), s)
        run[q] = {d: 50.0 - j for j, d in enumerate(ranked)}
    missing = len(qrels) - len(run)
    names = ["nDCG@10", "RR@10", "R@100", "AP"]
    for level in (1, 2):
        ev = evaluate_run(run, qrels, measures=names, rel_level=level)
        assert ev.settings["rel_level"] == level
        assert ev.settings["judged_queries_without_results"] == missing > 0
        assert ev.settings["queries_evaluated"] == len(qrels)
        for name in names:
            assert ev.measures[name] == pytest.approx(plain_mean(name, run, qrels, level), abs=1e-12), name
        # ir-measures with the level in the measure name (it too counts missing queries as zero)
        ref = calc_aggregate([f"RR(rel={level})@10", f"AP(rel={level})", "nDCG@10"], qrels, run)
        assert ev.measures["RR@10"] == pytest.approx(ref[f"RR(rel={level})@10"], abs=1e-12)
        assert ev.measures["AP"] == pytest.approx(ref[f"AP(rel={level})"], abs=1e-12)
        assert ev.measures["nDCG@10"] == pytest.approx(ref["nDCG@10"], abs=1e-12)
    lvl1 = evaluate_run(run, qrels, measures=["RR@10"], rel_level=1).measures["RR@10"]
    lvl2 = evaluate_run(run, qrels, measures=["RR@10"], rel_level=2).measures["RR@10"]
    assert lvl2 < lvl1
    # SimLM's compute_mrr: MRR@10 at grade >= 2 over every judged query, missing ones zero
    mrr = 0.0
    for q in qrels:
        for i, d in enumerate(trec_order(run.get(q, {}))[:10]):
            if qrels[q].get(d, 0) >= 2:
                mrr += 1 / (i + 1)
                break
    assert lvl2 == pytest.approx(mrr / len(qrels), abs=1e-12)


# ---- run files ----------------------------------------------------------------------------------
def test_run_file_keeps_scores_bit_for_bit_and_the_evaluation_order(tmp_path):
    rng = np.random.default_rng(7)
    f32 = rng.standard_normal(3000).astype(np.float32)
    special = [0.1, 1 / 3, -2.5e-7, 1e-300, 5e-324, 1.7976931348623157e308, 123456789.123456789, -0.0]
    values = [float(x) for x in f32] + [float(x) for x in rng.standard_normal(2000)] + special
    values += [values[0], values[1], values[1]]  # real ties
    run: dict[str, dict[str, float]] = {}
    for i, v in enumerate(values):
        run.setdefault(f"q{i % 7}", {})[f"d{i:05d}"] = v
    write_run(tmp_path / "r.trec", run)
    back = load_run(tmp_path / "r.trec")
    assert back.keys() == run.keys()
    for q in run:
        assert back[q].keys() == run[q].keys()
        for d, s in run[q].items():
            assert struct.pack("<d", back[q][d]) == struct.pack("<d", s), (q, d, s, back[q][d])
    # the rank column is trec_eval's order (the evaluation's default), ties by docno descending
    written = {
        q: c.take([i]) for c in read_run(tmp_path / "r.trec") for i, q in enumerate(c.qids.to_pylist())
    }
    for q in run:
        assert written[q].ranks.tolist() == list(range(1, len(run[q]) + 1))
        assert written[q].docids.to_pylist() == trec_order(run[q])
    # so reading the file back and keeping its order ("score-only") gives the same numbers
    qrels = {q: {d: 1 for d in list(h)[::50]} for q, h in run.items()}
    mem = evaluate_run(run, qrels).measures
    assert evaluate_run(back, qrels, tie_break="score-only").measures == mem
    assert evaluate_run(back, qrels).measures == mem


def test_io_roundtrip_and_errors(tmp_path):
    write_run(tmp_path / "r.trec", RUN)
    # The metrics read runs and qrels through the shared readers of dense_pt.data.
    assert load_run(tmp_path / "r.trec") == RUN
    (tmp_path / "q.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\n")
    assert load_qrels(tmp_path / "q.tsv") == {"q1": {"d1": 2}}
    (tmp_path / "bad.trec").write_text("q1 Q0 d1 1 1.0 t\nq1 Q0 d2 x\n")
    with pytest.raises(FormatError, match=r"bad.trec:2: expected 6"):
        load_run(tmp_path / "bad.trec")
    (tmp_path / "dup.trec").write_text("q1 Q0 d1 1 1.0 t\nq1 Q0 d1 2 0.5 t\n")
    with pytest.raises(FormatError, match=r"dup.trec:2: passage 'd1' is ranked twice"):
        load_run(tmp_path / "dup.trec")
    (tmp_path / "bad.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\thigh\n")
    with pytest.raises(FormatError, match=r"bad.tsv:2: relevance must be an integer"):
        load_qrels(tmp_path / "bad.tsv")


def test_answer_recall():
    assert has_answer("The Eiffel Tówer is in Paris.", ["eiffel tower"])
    assert not has_answer("Parisian cafés", ["paris"])
    run = {"q1": {"p1": 2.0, "p2": 1.0}, "q2": {"p1": 1.0}}
    passages = {"p1": "nothing here", "p2": "Barack Obama was president"}
    got = answer_recall(run, passages, {"q1": ["Obama"], "q2": ["x"]}, ks=(1, 2))
    assert got == {"AnswerRecall@1": 0.0, "AnswerRecall@2": 0.5}


def test_cli_json(tmp_path):
    write_run(tmp_path / "r.trec", RUN)
    (tmp_path / "q.trec").write_text(
        "".join(f"{q} 0 {d} {r}\n" for q, ds in QRELS.items() for d, r in ds.items())
    )
    args = ["evaluate", str(tmp_path / "r.trec"), "--qrels", str(tmp_path / "q.trec"), "--json"]
    res = CliRunner().invoke(app, [*args, "-m", "nDCG@10", "-m", "RR@10", "--drop-self-hits"])
    assert res.exit_code == 0, res.output
    obj = json.loads(res.output)
    assert set(obj) == {"nDCG@10", "RR@10", "settings"}
    assert obj["settings"]["drop_self_hits"] is True and obj["settings"]["rel_level"] == 1
    # a comma-separated list, and the relevance level recorded like the tie-break
    res = CliRunner().invoke(app, [*args, "-m", "nDCG@10,RR@10", "-m", "AP", "--rel-level", "2"])
    assert res.exit_code == 0, res.output
    obj = json.loads(res.output)
    assert list(obj) == ["nDCG@10", "RR@10", "AP", "settings"]
    assert obj["settings"]["rel_level"] == 2 and obj["settings"]["tie_break"] == "docno"
    want = evaluate_run(RUN, QRELS, measures=["nDCG@10", "RR@10", "AP"], rel_level=2).measures
    assert {k: obj[k] for k in want} == want
    # text output names the conventions and judged queries without results
    res = CliRunner().invoke(app, [*args[:-1], "-m", "RR@10", "--rel-level", "2"])
    assert res.exit_code == 0 and "# rel_level: 2" in res.output and "# tie_break: docno" in res.output
    bad = CliRunner().invoke(app, [*args, "--rel-level", "0"])
    assert isinstance(bad.exception, InvalidArgumentError) and "rel_level" in str(bad.exception)
