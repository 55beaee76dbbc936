"""The generated demo corpus (deterministic, labelled, every query answered by exactly one passage)
and the staged demo run (end to end, re-runnable, extensible)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dense_pt import artifacts
from dense_pt.cli import app
from dense_pt.data import CorpusStore, load_qrels, load_queries, read_corpus
from dense_pt.demo import DEMO_LABEL, SPLITS, STAGES, DemoContext, generate_demo, run_demo, write_demo_beir
from dense_pt.demo import vocab as V


@pytest.fixture(scope="module")
def demo():
    return generate_demo()


def test_generation_is_deterministic(demo):
    again = generate_demo()
    assert again.passages == demo.passages and again.queries == demo.queries and again.qrels == demo.qrels
    other = generate_demo(seed=1)
    assert other.passages != demo.passages


def test_shape_and_splits(demo):
    assert 300 <= len(demo.passages) <= 500
    pids = [p["_id"] for p in demo.passages]
    qids = [q["_id"] for q in demo.queries]
    assert len(set(pids)) == len(pids) and len(set(qids)) == len(qids)
    judged = Counter(qid for split in SPLITS for qid, _, _ in demo.qrels[split])
    assert set(judged) == set(qids) and set(judged.values()) == {1}  # one judgement per query
    assert all(pid in set(pids) for split in SPLITS for _, pid, _ in demo.qrels[split])
    sizes = {s: len(demo.qrels[s]) for s in SPLITS}
    assert sizes["train"] > sizes["test"] > sizes["dev"] > 50
    kinds = Counter(q["kind"] for q in demo.queries)
    assert kinds["paraphrase"] > 300 and kinds["lexical"] > 300


def _passages_matching(demo, *phrases):
    return [p["_id"] for p in demo.passages if all(ph.lower() in p["text"].lower() for ph in phrases)]


def test_every_paraphrase_query_has_exactly_one_matching_passage(demo):
    """Re-derive, from the passage texts alone, which passages fit each paraphrase query's
    description: exactly one, and it is the judged one."""
    gold = {qid: pid for split in SPLITS for qid, pid, _ in demo.qrels[split]}
    checked = 0
    for q in demo.queries:
        if q["kind"] != "paraphrase":
            continue
        kind, *parts = demo.keys[q["_id"]].split(":")
        if kind == "invention":
            adj, noun = V.INVENTION_ADJ[int(parts[0])][0], V.INVENTION_NOUN[int(parts[1])][0]
            found = _passages_matching(demo, f" {adj} {noun}")
            assert adj not in q["text"] and noun not in q["text"]  # paraphrased, not copied
        elif kind == "town":
            found = _passages_matching(demo, parts[0], f"its {parts[1]}")
        elif kind == "maker":
            prof, town, noun = V.PROFESSIONS[int(parts[0])][0], parts[1], V.INVENTION_NOUN[int(parts[2])][0]
            found = [
                pid
                for pid in _passages_matching(demo, prof, f"{town}", noun)
                if f"from {town}" in _text(demo, pid) or f"of {town}" in _text(demo, pid)
            ]
        else:
            cls, hi, ci, bi = parts[0], *map(int, parts[1:])
            color, part = V.COLORS[ci][0], V.BODY_PARTS[bi][0]
            found = _passages_matching(demo, f"is a {cls}", V.HABITATS[hi][0], f"{color} {part}")
        assert found == [gold[q["_id"]]], (q, found)
        checked += 1
    assert checked > 300


def _text(demo, pid):
    return next(p["text"] for p in demo.passages if p["_id"] == pid)


def test_written_beir_folder_reads_back_and_is_small(tmp_path, demo):
    out = write_demo_beir(tmp_path / "demo")
    assert DEMO_LABEL in (out / "README.md").read_text()
    assert [p.id for p in read_corpus(out)] == [p["_id"] for p in demo.passages]
    queries = load_queries(out)
    for split in SPLITS:
        qrels = load_qrels(out / "qrels" / f"{split}.tsv", query_ids=queries, strict=True)
        assert sum(map(len, qrels.values())) == len(demo.qrels[split])
    assert sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) < 1_000_000


def test_demo_runs_end_to_end_and_reruns_cleanly(tmp_path, monkeypatch, capsys):
    import torch

    from dense_pt import logs
    from dense_pt.demo.run import print_report

    torch.set_num_threads(1)
    monkeypatch.chdir(tmp_path)
    logs.configure()  # what the command line does: status lines on stderr (not a terminal here)
    out = Path("demo")  # relative, as `dense-pt demo` is run by default (--out demo-output)
    report = run_demo(out, finetune_steps=3, print_summary=False)  # a few steps: wiring, not quality
    err = capsys.readouterr().err
    # what a newcomer sees in a log file: every fine-tuning stage named, its training's progress, the
    # libraries' messages as our lines (transformers' load report of the re-ranker's new head), and
    # no terminal escape codes or redrawn bars anywhere
    for line in ("demo: finetune: [r1] running", "demo: finetune: [distill] done in", "retriever: training: done",
                 "reranker: training: done"):  # fmt: skip
        assert line in err, err
    # transformers' report of the new head, in the words of the installed version (5.x: a LOAD REPORT)
    assert ("transformers: BertForSequenceClassification LOAD REPORT" in err
            or "transformers: Some weights of BertForSequenceClassification were not initialized" in err), err  # fmt: skip
    assert "\x1b" not in err and "\r" not in err and "\n\n\n" not in err, err
    # the summary table cuts long cells on a narrow terminal: every path in full below it
    monkeypatch.setenv("COLUMNS", "60")
    print_report(report)
    shown = capsys.readouterr().out
    for path in (
        report["stages"]["finetune"]["file"],
        report["stages"]["pretrain"]["encoder"],
        report["out"],
    ):
        assert any(line.endswith(f"  {path}") for line in shown.splitlines()), shown
    stages = report["stages"]
    assert list(stages) == [name for name, _ in STAGES]
    assert stages["data"]["passages"] == stages["store"]["rows"] == len(generate_demo().passages)
    assert all(s["status"] == "ran" for s in stages.values())
    store = CorpusStore.open(out / "store")
    assert len(store) == stages["store"]["rows"]
    # the demo's folder says what it is, in the one manifest schema (dense_pt.artifacts)
    assert artifacts.open(out, "demo", complete=True)["written_by"]["command"] == "demo"
    assert not list(out.rglob(".dense-pt.json")) and not list(out.rglob("expansion.json"))
    assert json.loads((out / "summary.json").read_text()) == report
    # fine-tuning started from the pre-trained encoder and reports every stage on the dev split
    ft = stages["finetune"]
    assert ft["eval split"] == "dev" and ft["eval queries"] == len(
        load_qrels(out / "data" / "qrels" / "dev.tsv")
    )
    assert list(ft["metrics"]) == ["bm25", "zeroshot", "r1", "r2", "reranker", "distill"]
    assert all(0 <= m["nDCG@10"] <= 1 and 0 <= m["R@100"] <= 1 for m in ft["metrics"].values())
    assert ft["metrics"]["bm25"]["nDCG@10"] > 0.3  # lexical queries make BM25 strong on the demo data
    pipe = out / "finetune" / "pipeline"
    r1_train = json.loads((pipe / "r1" / "train" / "manifest.json").read_text())
    assert r1_train["inputs"]["model"]["path"] == stages["pretrain"]["encoder"] and r1_train["steps"] == 3
    assert (pipe / "report" / "report.md").is_file()
    again = run_demo(out, finetune_steps=3, print_summary=False)
    assert all(s["status"] == "up to date" for s in again["stages"].values())
    assert again["stages"]["finetune"]["metrics"] == ft["metrics"]
    # force redoes every stage (fine-tuning's forced re-run is the same pipeline from an empty folder,
    # left out here to keep the test fast)
    forced = run_demo(out, force=True, stages=STAGES[:-1], print_summary=False)
    assert all(s["status"] == "ran" for s in forced["stages"].values())


def test_stages_extend_and_see_the_context(tmp_path):
    seen: dict[str, Any] = {}

    def stage_probe(ctx: DemoContext) -> dict:
        assert ctx.store_path is not None  # the store stage ran before
        seen["rows"] = len(CorpusStore.open(ctx.store_path))
        seen["splits"] = sorted(ctx.qrels)
        (ctx.stage_dir("probe") / "x.txt").write_text("ok")
        return {"status": "ran", "rows": seen["rows"]}

    upto_store = STAGES[: [n for n, _ in STAGES].index("store") + 1]
    report = run_demo(tmp_path / "demo", stages=[*upto_store, ("probe", stage_probe)], print_summary=False)
    assert report["stages"]["probe"]["rows"] == seen["rows"] > 0
    assert seen["splits"] == ["dev", "test", "train"]
    assert (tmp_path / "demo" / "probe" / "x.txt").exists()


def test_cli_demo_on_a_user_beir_folder(tmp_path):
    beir = tmp_path / "beir"
    beir.mkdir()
    (beir / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": f"p{i}", "title": "", "text": f"passage number {i} about rivers"}) + "\n"
            for i in range(30)
        )
    )
    r = CliRunner().invoke(app, ["demo", "--out", str(tmp_path / "out"), "--corpus", str(beir)])
    assert r.exit_code == 0, r.output
    assert "user corpus" in r.output and "rows: 30" in r.output
    # each stage named when it starts and timed when it ends (plain lines: no terminal here)
    assert re.search(r"demo: \[3/6\] store \.\.\.\n(.*\n)*demo: \[3/6\] store: ran in [\d.,]+ s", r.output), (
        r.output
    )
    assert "skipped" in r.output  # no queries/qrels: nothing to fine-tune on
    assert not (tmp_path / "out" / "data").exists()
    # again, every stage up to date: the report as one JSON document on stdout (no table)
    r = CliRunner().invoke(app, ["demo", "--out", str(tmp_path / "out"), "--corpus", str(beir), "--json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["out"] == str((tmp_path / "out").resolve()) and report["stages"]["store"]["rows"] == 30
