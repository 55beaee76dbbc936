"""Evaluation a chunk of queries at a time gives the numbers the whole-run evaluation gave, to the
bit: the reference below is ``evaluate_run`` as it was before runs were streamed (commit 29880bb),
over ir-measures on the whole run as a dict, with its tie conventions."""

from __future__ import annotations

import random
from typing import Any

import pytest

from dense_pt.errors import MismatchError
from dense_pt.evaluation import evaluate_run
from dense_pt.evaluation.metrics import _provider, parse_measures
from dense_pt.runs import rank_hits, read_run, write_run


def reference(run, qrels, measures, tie_break="docno", drop_self_hits=False, rel_level=1):
    parsed = parse_measures(measures, rel_level)
    ranked, dropped = {}, 0
    for qid, hits in run.items():
        r = [d for d, _ in rank_hits(hits, tie_break)]
        if drop_self_hits:
            kept = [d for d in r if d != qid]
            dropped += len(r) - len(kept)
            r = kept
        ranked[qid] = r
    judged = list(qrels)
    with_hits = [q for q in judged if ranked.get(q) and qrels[q]]
    surrogate = {q: {d: float(len(ranked[q]) - i) for i, d in enumerate(ranked[q])} for q in with_hits}
    sub_qrels = {q: {d: int(r) for d, r in qrels[q].items()} for q in with_hits}
    by_provider: dict[Any, list[tuple[str, Any]]] = {}  # ir-measures' providers and measures: untyped
    for label, m in parsed:
        by_provider.setdefault(_provider(m), []).append((label, m))
    pq = {q: {label: 0.0 for label, _ in parsed} for q in judged}
    for provider, pairs in by_provider.items():
        label_of = {m: label for label, m in pairs}
        if with_hits:
            for metric in provider.iter_calc([m for _, m in pairs], sub_qrels, surrogate):
                if metric.query_id in sub_qrels:
                    pq[metric.query_id][label_of[metric.measure]] = float(metric.value)
    values = {label: sum(pq[q][label] for q in judged) / len(judged) for label, _ in parsed}
    counts = {
        "dropped_self_hits": dropped,
        "judged_queries_without_results": sum(1 for q in judged if not ranked.get(q)),
        "run_queries_without_judgements": sum(1 for q in ranked if q not in qrels),
    }
    return values, pq, counts


def random_case(seed: int):
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(30)] + ["é", "Z", "q3"]
    run, qrels = {}, {}
    for i in range(60):
        q = f"q{i}"
        if rng.random() < 0.8:
            hits = rng.sample(docs, rng.randint(1, 20))
            run[q] = {d: float(rng.randint(0, 4)) / 2 for d in hits}  # many ties
        if rng.random() < 0.7:
            qrels[q] = {d: rng.randint(0, 3) for d in rng.sample(docs, rng.randint(1, 5))}
    return run, qrels


MEASURES = ["nDCG@10", "RR@10", "R@5", "P@3", "AP", "RR", "nDCG@3"]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("tie_break", "drop", "level"), [("docno", False, 1), ("score-only", True, 2)])
def test_chunked_evaluation_equals_the_whole_run_evaluation(tmp_path, seed, tie_break, drop, level):
    run, qrels = random_case(seed)
    # the file keeps each query's hits in rank_hits order: score-only's "file order" is then
    # the written order, which the reference sees through the reloaded mapping
    write_run(tmp_path / "r.arrow", run)
    reloaded = {c: h for chunk in read_run(tmp_path / "r.arrow") for c, h in chunk.to_dict().items()}
    values, pq, counts = reference(reloaded, qrels, MEASURES, tie_break, drop, level)
    if tie_break == "docno":  # the dict's order does not matter then
        assert reference(run, qrels, MEASURES, tie_break, drop, level) == (values, pq, counts)
    kw = {"tie_break": tie_break, "drop_self_hits": drop, "rel_level": level, "per_query": True}
    for source in (
        read_run(tmp_path / "r.arrow", chunk_rows=5),  # a few queries per chunk
        tmp_path / "r.arrow",
        reloaded,
    ):
        ev = evaluate_run(source, qrels, MEASURES, **kw)
        assert ev.measures == values  # bit for bit
        assert ev.per_query == pq
        assert {k: ev.settings[k] for k in counts} == counts


def test_overlap_check_streams(tmp_path):
    """The 'qrels for another corpus' refusal, with the run in chunks of one query."""
    run = {f"q{i}": {f"x{i}": 1.0} for i in range(6)}
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(6)}
    write_run(tmp_path / "r.arrow", run)
    with pytest.raises(MismatchError, match="no document of the run is judged"):
        evaluate_run(read_run(tmp_path / "r.arrow", chunk_rows=1), qrels, ["RR@10"])
    # one query's passage judged for another query is enough (as before: the sets are global)
    run["q5"] = {"d0": 1.0}
    write_run(tmp_path / "r.arrow", run)
    assert evaluate_run(read_run(tmp_path / "r.arrow", chunk_rows=1), qrels, ["RR@10"]).measures["RR@10"] == 0


def test_answer_recall_from_files_equals_the_dict_version(tmp_path):
    """`evaluate --answers` streams the run and keeps only the passages it reads."""
    import json

    from typer.testing import CliRunner

    from dense_pt.cli import app
    from dense_pt.evaluation import answer_recall
    from dense_pt.evaluation.answers import answer_recall_files

    texts = {
        f"d{i}": f"passage {i} about topic {i % 4}" + (" the answer is blue" if i % 5 == 0 else "")
        for i in range(30)
    }
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in texts.items())
    )
    run = {f"q{j}": {f"d{(j + i) % 30}": float(10 - i) for i in range(8)} for j in range(6)}
    answers = {f"q{j}": ["blue"] for j in range(5)} | {"q5": ["topic 3"]}
    write_run(tmp_path / "r.arrow", run)
    (tmp_path / "a.jsonl").write_text(
        "".join(json.dumps({"_id": q, "answers": a}) + "\n" for q, a in answers.items())
    )
    want = answer_recall(run, texts, answers, ks=(1, 5))
    assert answer_recall_files(tmp_path / "r.arrow", tmp_path / "corpus.jsonl", answers, ks=(1, 5)) == want
    (tmp_path / "qrels.tsv").write_text("".join(f"{q}\t0\td{j}\t1\n" for j, q in enumerate(run)))
    r = CliRunner().invoke(app, ["evaluate", str(tmp_path / "r.arrow"), "--qrels", str(tmp_path / "qrels.tsv"), "-m",
                                 "RR@10", "--answers", str(tmp_path / "a.jsonl"), "--corpus", str(tmp_path / "corpus.jsonl"),
                                 "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)  # one JSON document on stdout
    assert got["AnswerRecall@5"] == answer_recall(run, texts, answers)["AnswerRecall@5"]
