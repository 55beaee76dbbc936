"""`dense-pt beir`: one command gives the numbers of the commands it chains (corpus build, encode
twice, search, evaluate; bm25 and fuse for the extra rows), on a slice of SciFact with a tiny
model whose lengths and pooling come from its own folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import run_cli

pytest.importorskip("torch")
pytest.importorskip("faiss")

PASSAGES = 300  # SciFact's first 300 passages, and the training queries judged on them
MEASURES = ["nDCG@10", "RR@10", "R@100", "R@1000"]


def scifact_slice(src: Path, out: Path, passages: int = PASSAGES) -> Path:
    """A BEIR folder: the first ``passages`` passages of ``src``, the train judgements on them and
    their queries (in queries.jsonl's order)."""
    (out / "qrels").mkdir(parents=True)
    lines = (src / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:passages]
    (out / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    kept = {json.loads(x)["_id"] for x in lines}
    qrels = (src / "qrels" / "train.tsv").read_text(encoding="utf-8").splitlines()
    judged = [r for r in qrels[1:] if r.split("\t")[1] in kept]
    (out / "qrels" / "train.tsv").write_text("\n".join([qrels[0], *judged]) + "\n", encoding="utf-8")
    qids = {r.split("\t")[0] for r in judged}
    queries = [x for x in (src / "queries.jsonl").read_text(encoding="utf-8").splitlines()
               if json.loads(x)["_id"] in qids]  # fmt: skip
    (out / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A synthetic BEIR folder, SciFact's slice when the shared data is here (None otherwise), and
    a tiny retriever folder that says its own lengths (retriever.json: 24 / 96) and pooling
    (sentence-transformers files: mean, normalised), as fine-tuning writes them."""
    from conftest import find_shared_data
    from dense_pt.retrieval.encoder import RETRIEVER_LENGTHS, write_pooling_modules
    from pipeline_fixtures import synthetic_corpus, tiny_model, write_beir

    root = tmp_path_factory.mktemp("beir")
    shared = find_shared_data()
    sci = scifact_slice(shared / "beir-scifact", root / "scifact") if shared is not None else None
    docs, queries, qrels = synthetic_corpus()
    synth = write_beir(root / "synthetic", docs, queries, qrels)
    texts = [json.loads(x)["text"] for x in (sci / "corpus.jsonl").read_text().splitlines()] if sci else []
    model = tiny_model(root / "model", texts + [t for _, t in docs], vocab_size=600)
    write_pooling_modules(model, 32, "mean", True, 96)
    (model / RETRIEVER_LENGTHS).write_text(json.dumps({"query_max_length": 24, "passage_max_length": 96}))
    return root, sci, synth, model


@pytest.fixture
def sci(world, shared_data):
    """The SciFact slice (skipped without the shared data)."""
    return world[1]


def _cli(capsys, monkeypatch, *argv: object) -> dict:
    code, out, err = run_cli([str(a) for a in argv], capsys, monkeypatch)
    assert code == 0, err
    return json.loads(out) if out.strip().startswith(("{", "[")) else {}


def test_beir_equals_the_commands_it_chains(world, sci, tmp_path, capsys, monkeypatch):
    """Every row (dense, BM25, RRF hybrid) equals, to the bit, the measures of the run the
    separate commands write; the model's own lengths and pooling were used."""
    model = world[3]
    argv = [
        "beir",
        str(model),
        str(sci),
        "--split",
        "train",
        "--fuse",
        "--runs",
        str(tmp_path / "runs"),
        "--json",
    ]
    code, out, err = run_cli(argv, capsys, monkeypatch)
    assert code == 0, err
    doc = json.loads(out)  # the whole of stdout is the document
    rows = {r["system"]: r for r in doc["rows"]}
    assert list(rows) == ["dense", "bm25", "fused"] and all(r["dataset"] == "scifact" for r in rows.values())
    info = doc["datasets"]["scifact"]
    assert (info["query_max_length"], info["passage_max_length"]) == (24, 96)
    assert info["pooling"] == "mean" and info["normalize"] is True and info["split"] == "train"
    # the same work, command by command
    t, qrels = tmp_path, sci / "qrels" / "train.tsv"
    _cli(capsys, monkeypatch, "corpus", "build", sci / "corpus.jsonl", "-t", model, "-o", t / "store")
    _cli(capsys, monkeypatch, "encode", model, t / "store", "-o", t / "p")
    _cli(capsys, monkeypatch, "encode", model, sci / "queries.jsonl", "-o", t / "q")
    _cli(capsys, monkeypatch, "search", t / "q", t / "p", "-o", t / "dense.trec")
    _cli(capsys, monkeypatch, "bm25", sci / "corpus.jsonl", "--queries", sci / "queries.jsonl",
         "-o", t / "bm25.trec", "--index", t / "index")  # fmt: skip
    _cli(
        capsys,
        monkeypatch,
        "fuse",
        t / "bm25.trec",
        t / "dense.trec",
        "-o",
        t / "fused.trec",
        "--method",
        "rrf",
    )
    for system in ("dense", "bm25", "fused"):
        ev = _cli(capsys, monkeypatch, "evaluate", t / f"{system}.trec", "--qrels", qrels, "-m", ",".join(MEASURES),
                  "--json")  # fmt: skip
        assert rows[system]["measures"] == {m: ev[m] for m in MEASURES}, system
        assert Path(rows[system]["run"]).read_text() == (t / f"{system}.trec").read_text()
    assert 0 < rows["dense"]["measures"]["R@1000"] <= 1 and rows["bm25"]["measures"]["nDCG@10"] > 0.3
    judged = {line.split("\t")[0] for line in qrels.read_text().splitlines()[1:]}
    assert rows["dense"]["queries"] == len(judged)
    kept = json.loads((t / "runs" / "scifact" / "results.json").read_text())
    assert kept["rows"] == doc["rows"]


def test_several_folders_give_one_table(world, sci, capsys, monkeypatch):
    """Two folders: one row per dataset (dense only without --bm25), the text table lists both;
    without --split each takes its only split."""
    _root, _sci, synth, model = world
    doc = _cli(capsys, monkeypatch, "beir", model, sci, synth, "--json", "-m", "nDCG@10")
    assert [(r["dataset"], r["system"]) for r in doc["rows"]] == [
        ("scifact", "dense"),
        ("synthetic", "dense"),
    ]
    assert all(r["run"] is None and list(r["measures"]) == ["nDCG@10"] for r in doc["rows"])
    code, out, err = run_cli(["beir", str(model), str(sci), str(synth), "-m", "nDCG@10"], capsys, monkeypatch)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["dataset", "system", "queries", "nDCG@10"]
    values = {ln.split()[0]: float(ln.split()[3]) for ln in lines[1:3]}
    assert values == {r["dataset"]: round(r["measures"]["nDCG@10"], 4) for r in doc["rows"]}
    assert "# scifact: split train, lengths 24 / 96, mean pooling, normalised" in out


def test_the_library_function_takes_the_settings_whole(world):
    """``evaluate_beir`` from Python, settings as one model; an explicit length wins over the folder's."""
    from dense_pt.beir import evaluate_beir
    from dense_pt.config.beir import BeirSettings

    _root, _sci, synth, model = world
    res = evaluate_beir(
        model, [synth], BeirSettings(query_max_length=8, measures=["R@10"], k=10), progress=False
    )
    assert res.datasets["synthetic"]["query_max_length"] == 8
    assert res.datasets["synthetic"]["passage_max_length"] == 96
    assert len(res.rows) == 1 and 0 <= res.rows[0].measures["R@10"] <= 1


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        (["--split", "test"], 2, "no qrels/test.tsv (its splits: train)"),
        (["{missing}"], 1, "no such BEIR folder"),
        (["--fuse", "--method", "interpolation"], 2, "needs a weight"),
        (["--weight", "0.5"], 2, "weight is for method interpolation"),
        (["{synth}"], 2, "two BEIR folders are named synthetic"),
    ],
)
def test_bad_input_is_one_line(world, tmp_path, capsys, monkeypatch, extra, code, message):
    _root, _sci, synth, model = world
    args = [a.format(missing=tmp_path / "nope", synth=synth) for a in extra]
    got, out, err = run_cli(["beir", str(model), str(synth), *args], capsys, monkeypatch)
    assert got == code and message in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and out == ""


def test_a_folder_it_did_not_write_is_refused(world, tmp_path, capsys, monkeypatch):
    _root, _sci, synth, model = world
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    code, _, err = run_cli(
        ["beir", str(model), str(synth), "--runs", str(tmp_path / "mine")], capsys, monkeypatch
    )
    assert code == 1 and "dense-pt did not write it" in err
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
