"""Metrics equal pytrec_eval computed directly; the explicit conventions change what they say."""

from __future__ import annotations

import json

import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dense_pt.cli import app
from dense_pt.errors import FormatError, MismatchError
from dense_pt.evaluation import answer_recall, evaluate_run, has_answer, read_qrels, read_run, write_run

QRELS = {"q1": {"d1": 2, "d2": 1, "d9": 1}, "q2": {"d3": 1}, "q3": {"d5": 3, "d6": 0}}
RUN = {
    "q1": {"d2": 1.0, "d1": 1.0, "d4": 1.0, "d5": 0.5},  # a three-way tie at the top
    "q2": {"d1": 2.0, "d3": 2.0, "d7": 1.0},
    "q3": {"d6": 3.0, "d5": 2.0, "q3": 9.0},
    "qx": {"d1": 1.0},  # not judged
}
MEASURES = {"ndcg_cut_10": "nDCG@10", "recip_rank": "RR", "recall_100": "R@100", "map": "AP", "P_5": "P@5"}


def direct(qrels, run):
    ev = pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES))
    res = ev.evaluate({q: h for q, h in run.items() if q in qrels})
    return {MEASURES[k]: sum(r[k] for r in res.values()) / len(res) for k in MEASURES}


def test_equals_pytrec_eval_with_ties():
    got = evaluate_run(RUN, QRELS, measures=list(MEASURES.values())).measures
    want = direct(QRELS, RUN)
    for k, v in want.items():
        assert got[k] == pytest.approx(v, abs=1e-12), k


def test_score_only_keeps_file_order_among_ties():
    # score-only: q2's tie d1/d3 stays in file order (d1 first) -> RR 0.5;
    # docno (trec_eval) puts d3 first (descending docno) -> RR 1.
    so = evaluate_run({"q2": RUN["q2"]}, QRELS, measures=["RR"], tie_break="score-only")
    dn = evaluate_run({"q2": RUN["q2"]}, QRELS, measures=["RR"], tie_break="docno")
    assert so.measures["RR"] == pytest.approx(0.5)
    assert dn.measures["RR"] == pytest.approx(1.0)
    assert so.settings["tie_break"] == "score-only"
    # and equals pytrec_eval on the explicitly re-ranked run
    reranked = {"q2": {"d1": 3.0, "d3": 2.0, "d7": 1.0}}
    assert so.measures["RR"] == pytest.approx(direct(QRELS, reranked)["RR"])


def test_drop_self_hits_recorded():
    ev = evaluate_run({"q3": RUN["q3"]}, QRELS, measures=["RR@10"], drop_self_hits=True)
    assert ev.settings["dropped_self_hits"] == 1 and ev.settings["drop_self_hits"] is True
    assert ev.measures["RR@10"] == pytest.approx(direct(QRELS, {"q3": {"d6": 3.0, "d5": 2.0}})["RR"])
    kept = evaluate_run({"q3": RUN["q3"]}, QRELS, measures=["RR@10"])
    assert kept.measures["RR@10"] == pytest.approx(1 / 3)  # q3 itself, d6 (rel 0), then d5


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(st.sampled_from([f"d{i}" for i in range(8)]), st.integers(0, 3), min_size=1, max_size=8),
    st.dictionaries(
        st.sampled_from([f"d{i}" for i in range(8)]),
        st.sampled_from([0.0, 0.5, 1.0, 2.0]),  # few values: many ties
        min_size=1,
        max_size=8,
    ),
)
def test_random_runs_match_pytrec_eval(qrel, hits):
    got = evaluate_run({"q": hits}, {"q": qrel}, measures=list(MEASURES.values())).measures
    want = direct({"q": qrel}, {"q": hits})
    for k, v in want.items():
        assert got[k] == pytest.approx(v, abs=1e-12), k


def test_qrels_for_another_collection_refused():
    with pytest.raises(MismatchError):
        evaluate_run(RUN, {"zz": {"d1": 1}})
    other = {f"q{i}": {f"x{i}": 1} for i in range(6)}
    run = {f"q{i}": {f"d{i}": 1.0} for i in range(6)}
    with pytest.raises(MismatchError, match="another corpus"):
        evaluate_run(run, other)


def test_io_roundtrip_and_errors(tmp_path):
    write_run(tmp_path / "r.trec", RUN)
    assert read_run(tmp_path / "r.trec") == RUN
    (tmp_path / "q.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\n")
    assert read_qrels(tmp_path / "q.tsv") == {"q1": {"d1": 2}}
    (tmp_path / "bad.trec").write_text("q1 Q0 d1 1 1.0 t\nq1 Q0 d2 x\n")
    with pytest.raises(FormatError, match=r"bad.trec:2"):
        read_run(tmp_path / "bad.trec")


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
    res = CliRunner().invoke(
        app,
        [
            "evaluate",
            str(tmp_path / "r.trec"),
            "--qrels",
            str(tmp_path / "q.trec"),
            "--json",
            "-m",
            "nDCG@10",
            "-m",
            "RR@10",
            "--drop-self-hits",
        ],
    )
    assert res.exit_code == 0, res.output
    obj = json.loads(res.output)
    assert set(obj) == {"nDCG@10", "RR@10", "settings"}
    assert obj["settings"]["drop_self_hits"] is True
