"""Folders others can read: a trained retriever folder loads in sentence-transformers with our
lengths and pooling and embeds as `dense-pt encode` does; `dense-pt hub export` writes the
Hub-ready folder (card with the recipe and the evaluation, LICENSE), and `--push-to-hub` stops with
one line before any network when the token or huggingface_hub is missing (nothing here goes online)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import run_cli
from dense_pt.config.retrieval import BM25Command, EncodeSettings, MineCommand

pytest.importorskip("torch")
sentence_transformers = pytest.importorskip("sentence_transformers")

QUERY_LEN, PASSAGE_LEN = 12, 40  # below the tiny model's 128 positions, and unlike each other


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny retriever trained for 2 steps with lengths 12 / 40, mean pooling; its base model
    folder carries a card that names its licence, and a LICENSE."""
    from dense_pt.config.finetune import RetrieverInputs, RetrieverSettings
    from dense_pt.config.train import TrainConfig
    from dense_pt.finetune.stages import train_retriever
    from dense_pt.retrieval.bm25 import bm25
    from dense_pt.retrieval.encoder import write_pooling_modules
    from dense_pt.retrieval.negatives import mine_negatives, write_negatives
    from dense_pt.runs import load_run
    from retrieval_fixtures import tiny_setup

    tmp = tmp_path_factory.mktemp("hub")
    beir, model, store, _queries, qrels = tiny_setup(tmp)
    write_pooling_modules(model, 32, "mean", False, 128)  # the base's own pooling: mean
    (model / "README.md").write_text("---\nlicense: mit\n---\n# a base model\n")
    (model / "LICENSE").write_text("MIT License (the base model's)\n")
    bm25(beir / "corpus.jsonl", beir / "queries.jsonl", tmp / "bm25.trec", BM25Command(k=20))
    write_negatives(
        tmp / "neg.dpneg", mine_negatives(load_run(tmp / "bm25.trec"), qrels, MineCommand(depth=20, num=6))
    )
    inputs = RetrieverInputs(model=model, out=tmp / "r1", negatives=tmp / "neg.dpneg", corpus=store,
                             queries=beir / "queries.jsonl", qrels=beir / "qrels" / "train.tsv")  # fmt: skip
    settings = RetrieverSettings(group_size=4, query_max_length=QUERY_LEN, passage_max_length=PASSAGE_LEN)
    train = TrainConfig(
        max_steps=2, batch_size=4, lr=1e-3, warmup=0, save_every=2, log_every=1, precision="fp32"
    )
    train_retriever(inputs, settings, train, progress=False)
    return tmp, beir, store, tmp / "r1" / "model"


def test_the_folder_loads_in_sentence_transformers_with_our_lengths_and_pooling(trained):
    from sentence_transformers import SentenceTransformer

    from dense_pt.retrieval.encode import Embeddings, encode
    from dense_pt.retrieval.encoder import detect_spec

    tmp, beir, store, folder = trained
    st = SentenceTransformer(str(folder), device="cpu")
    ours = detect_spec(folder)
    assert ours.pooling == "mean" and st.max_seq_length == PASSAGE_LEN
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    assert (
        pooling.get("pooling_mode") in ("mean", ["mean"]) or pooling.get("pooling_mode_mean_tokens") is True
    )
    assert json.loads((folder / "retriever.json").read_text()) == {
        "query_max_length": QUERY_LEN, "passage_max_length": PASSAGE_LEN}  # fmt: skip
    st_config = json.loads((folder / "sentence_bert_config.json").read_text())
    # sentence-transformers >= 6 keeps a length per side: then the folder must carry both
    per_side = "query_length" in getattr(type(st[0]), "config_keys", ())
    if per_side:
        assert (st_config["query_length"], st_config["document_length"]) == (QUERY_LEN, PASSAGE_LEN)
    # the embeddings: dense-pt's encoder (float32) against sentence-transformers', both sides
    encode(
        folder,
        beir / "queries.jsonl",
        tmp / "qe",
        EncodeSettings(dtype="float32", device="cpu"),
        progress=False,
    )
    encode(folder, store, tmp / "pe", EncodeSettings(dtype="float32", device="cpu"), progress=False)
    qids, q_ours = Embeddings.open(tmp / "qe").load_all()
    pids, p_ours = Embeddings.open(tmp / "pe").load_all()
    queries = {
        json.loads(x)["_id"]: json.loads(x)["text"] for x in (beir / "queries.jsonl").read_text().splitlines()
    }
    passages = {
        json.loads(x)["_id"]: json.loads(x)["text"] for x in (beir / "corpus.jsonl").read_text().splitlines()
    }
    long_query = " ".join([queries[qids[0]]] * 8)  # longer than 12 tokens: the query length must apply
    if per_side:
        q_st = st.encode_query([queries[q] for q in qids], convert_to_numpy=True)
        p_st = st.encode_document([passages[p] for p in pids], convert_to_numpy=True)
        encode(folder, _queries_file(tmp / "long.jsonl", long_query), tmp / "le", EncodeSettings(dtype="float32", device="cpu"), progress=False)  # fmt: skip
        np.testing.assert_allclose(
            st.encode_query([long_query]), Embeddings.open(tmp / "le").load_all()[1], atol=1e-5
        )
    else:
        q_st = st.encode([queries[q] for q in qids], convert_to_numpy=True)  # short: no truncation either way
        p_st = st.encode([passages[p] for p in pids], convert_to_numpy=True)
    np.testing.assert_allclose(q_ours, q_st, atol=1e-5)
    np.testing.assert_allclose(p_ours, p_st, atol=1e-5)


def _queries_file(path: Path, text: str) -> Path:
    path.write_text(json.dumps({"_id": "long", "text": text}) + "\n")
    return path


def test_hub_export_writes_a_card_the_hub_reads(trained, tmp_path, capsys, monkeypatch):
    """The card's front matter, the recipe from the folder's records, the evaluation table from
    `dense-pt beir` results, the base model's licence and its text; the model files are the
    folder's own, and the copy loads in sentence-transformers."""
    from sentence_transformers import SentenceTransformer

    _tmp, _beir, _store, folder = trained
    results = tmp_path / "scifact.json"
    results.write_text(json.dumps({"rows": [
        {"dataset": "scifact", "system": "dense", "measures": {"nDCG@10": 0.5, "R@100": 0.75}, "queries": 3},
        {"dataset": "scifact", "system": "bm25", "measures": {"nDCG@10": 0.625, "R@100": 0.875}, "queries": 3}]}))  # fmt: skip
    out = tmp_path / "hub"
    code, stdout, err = run_cli(["hub", "export", str(folder), "-o", str(out), "--results", str(results), "--json"],
                                capsys, monkeypatch)  # fmt: skip
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["license"] == "mit" and doc["license_file"].endswith("LICENSE") and doc["evaluation_rows"] == 2
    card = (out / "README.md").read_text()
    front = card.split("---")[1]
    for line in ("library_name: sentence-transformers", "pipeline_tag: sentence-similarity", "license: mit",
                 "- sentence-transformers", "- dense-pt"):  # fmt: skip
        assert line in front.splitlines(), line
    assert "| scifact | bm25 | 0.6250 | 0.8750 |" in card and "## Training recipe" in card
    assert '"query_max_length": 12' in card and "up to 12 tokens and passages up to 40" in card
    assert (out / "LICENSE").read_text() == "MIT License (the base model's)\n"
    assert (
        "`mit` (the text is in `LICENSE`)." in card and 'SentenceTransformer("path/to/this/folder")' in card
    )
    for name in ("model.safetensors", "modules.json", "sentence_bert_config.json", "retriever.json",
                 "config_sentence_transformers.json", "1_Pooling/config.json", "tokenizer.json"):  # fmt: skip
        assert (out / name).read_bytes() == (folder / name).read_bytes(), name
    assert SentenceTransformer(str(out), device="cpu").max_seq_length == PASSAGE_LEN
    # a second export into the same folder needs --force; the licence given wins over the base's
    code, _, err = run_cli(["hub", "export", str(folder), "-o", str(out)], capsys, monkeypatch)
    assert code == 1 and "already exists" in err
    code, _, err = run_cli(["hub", "export", str(folder), "-o", str(out), "--force", "--license", "apache-2.0"],
                           capsys, monkeypatch)  # fmt: skip
    assert code == 0 and "license: apache-2.0" in (out / "README.md").read_text()


def test_push_to_hub_stops_before_the_network(trained, tmp_path, capsys, monkeypatch):
    """No token, offline mode, no huggingface_hub: one line each, exit 1, the folder prepared."""
    import huggingface_hub.constants

    _tmp, _beir, _store, folder = trained
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    argv = [
        "hub",
        "export",
        str(folder),
        "-o",
        str(tmp_path / "a"),
        "--push-to-hub",
        "someone/tiny-retriever",
    ]
    code, out, err = run_cli(argv, capsys, monkeypatch)
    assert code == 1 and "no Hugging Face token" in err and len(err.strip().splitlines()) == 1, err
    card = (tmp_path / "a" / "README.md").read_text()  # prepared, and named for the repository
    assert out == "" and "# tiny-retriever" in card and "hf download someone/tiny-retriever" in card
    # a token, but offline: refused before upload_folder is reached
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    code, _, err = run_cli(
        [*argv[:4], str(tmp_path / "b"), *argv[5:]], capsys, monkeypatch, env={"HF_TOKEN": "hf_x"}
    )
    assert code == 1 and "HF_HUB_OFFLINE is set" in err and "ready at" in err, err
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # not installed
    code, _, err = run_cli([*argv[:4], str(tmp_path / "c"), *argv[5:]], capsys, monkeypatch)
    assert code == 1 and "needs the 'huggingface_hub' package" in err, err


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--push-to-hub", "not a repo"], 2, "must be a Hub repository id"),
        (["--license", "Apache 2"], 2, "licence identifier"),
        (["--results", "{tmp}/nope.json"], 1, "no such results file"),
    ],
)
def test_bad_input_is_one_line(trained, tmp_path, capsys, monkeypatch, args, code, message):
    _tmp, _beir, _store, folder = trained
    argv = ["hub", "export", str(folder), "-o", str(tmp_path / "x"), *[a.format(tmp=tmp_path) for a in args]]
    got, _, err = run_cli(argv, capsys, monkeypatch)
    assert got == code and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x").exists()


def test_force_keeps_a_users_file_in_the_hub_folder(trained, tmp_path, capsys, monkeypatch):
    """`hub export --force` replaces a folder it wrote, never a file of the user's inside it (the
    nothing-lost rule, tests/test_nothing_lost.py, for the writer its world cannot feed)."""
    _tmp, _beir, _store, folder = trained
    out = tmp_path / "hub"
    code, _, err = run_cli(["hub", "export", str(folder), "-o", str(out)], capsys, monkeypatch)
    assert code == 0, err
    (out / "notes.txt").write_text("mine\n")
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    code, _, err = run_cli(["hub", "export", str(folder), "-o", str(out), "--force"], capsys, monkeypatch)
    assert code == 1 and f"it holds {out / 'notes.txt'}" in err and len(err.strip().splitlines()) == 1, err
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_folder_that_is_not_a_retriever_is_refused(trained, tmp_path, capsys, monkeypatch):
    _tmp, _beir, store, _folder = trained
    code, _, err = run_cli(["hub", "export", str(store), "-o", str(tmp_path / "x")], capsys, monkeypatch)
    assert code == 1 and "not a model folder" in err
