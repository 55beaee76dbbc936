"""Fine-tuning stages on a tiny random model: retriever, re-ranker, scores, distillation; the
retriever checkpoints load with sentence-transformers and embed like our encoder."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dense_pt.errors import MismatchError
from dense_pt.evaluation import read_run, write_run
from dense_pt.finetune.data import build_sampler
from dense_pt.finetune.stages import score, train_distill, train_reranker, train_retriever
from dense_pt.retrieval.bm25 import bm25
from dense_pt.retrieval.encode import Embeddings, encode
from dense_pt.retrieval.negatives import NegativesTable, mine_negatives, read_negatives, write_negatives
from dense_pt.training import TrainConfig
from retrieval_fixtures import tiny_setup

TRAIN = TrainConfig(max_steps=4, batch_size=4, lr=1e-3, warmup=0, save_every=2, log_every=1, precision="fp32")


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ft")
    beir, model, store, _queries, qrels = tiny_setup(tmp)
    bm25(beir / "corpus.jsonl", beir / "queries.jsonl", tmp / "bm25.trec", k=20)
    table = mine_negatives(read_run(tmp / "bm25.trec"), qrels, depth=20, num=6)
    write_negatives(tmp / "neg.dpneg", table)
    return tmp, beir, model, store, qrels


def test_group_sampling_is_deterministic(chain):
    from dense_pt.data.store import CorpusStore

    tmp, beir, _model, store, qrels = chain
    s = CorpusStore.open(store)
    from dense_pt.evaluation import read_queries

    negs = {q: [p for p, _ in r] for q, r in read_negatives(tmp / "neg.dpneg").rows.items()}
    sam = build_sampler(s, read_queries(beir / "queries.jsonl"), qrels, negs, lambda t: [[5]] * len(t), 4, 7)
    ids = s.ids.to_pylist()
    a = [sam.group(i, 0) for i in range(len(sam))]
    b = [sam.group(i, 0) for i in reversed(range(len(sam)))][::-1]
    assert all(x[0] == y[0] and (x[1] == y[1]).all() for x, y in zip(a, b, strict=True))
    assert any(
        (x[1] != y[1]).any() for x, y in zip(a, [sam.group(i, 1) for i in range(len(sam))], strict=True)
    )
    for i, (pos, negrows) in enumerate(a):
        q = sam.qids[i]
        assert qrels[q][ids[pos]] > 0
        assert not any(qrels[q].get(ids[n], 0) > 0 for n in negrows)
        assert len(set(negrows.tolist())) == 3


def test_retriever_reranker_scores_distill(chain):
    from sentence_transformers import SentenceTransformer

    tmp, beir, model, store, qrels = chain
    common = dict(corpus=store, queries=beir / "queries.jsonl", qrels=beir / "qrels" / "train.tsv")
    m = train_retriever(
        model,
        out=tmp / "r1",
        negatives=tmp / "neg.dpneg",
        group_size=4,
        train=TRAIN,
        progress=False,
        **common,
    )
    assert m["steps"] == 4 and m["settings"]["normalize"] is True
    assert (tmp / "r1" / "log.jsonl").read_text().count("\n") == 4
    # the checkpoint loads as a sentence-transformers model and embeds like `dense-pt encode`
    st = SentenceTransformer(str(tmp / "r1" / "model"), device="cpu")
    encode(
        tmp / "r1" / "model",
        beir / "queries.jsonl",
        tmp / "qe",
        dtype="float32",
        progress=False,
        device="cpu",
    )
    qids, ours = Embeddings.open(tmp / "qe").load_all()
    texts = {
        json.loads(x)["_id"]: json.loads(x)["text"] for x in (beir / "queries.jsonl").read_text().splitlines()
    }
    ref = st.encode([texts[q] for q in qids[:5]])
    np.testing.assert_allclose(ours[:5], ref, atol=1e-4)
    assert np.allclose(np.linalg.norm(ref, axis=1), 1, atol=1e-4)

    r = train_reranker(
        model,
        negatives=tmp / "neg.dpneg",
        out=tmp / "rr",
        group_size=4,
        train=TRAIN,
        progress=False,
        **common,
    )
    assert r["steps"] == 4
    man = score(tmp / "rr" / "model", negatives=tmp / "neg.dpneg", out=tmp / "scores.dpneg", **common)
    assert "logits" in man["meaning"]
    scores = read_negatives(tmp / "scores.dpneg")
    q0 = next(iter(scores.rows))
    first = scores.rows[q0][0][0]
    assert qrels[q0][first] > 0  # positives first
    d = train_distill(
        tmp / "r1" / "model",
        scores=tmp / "scores.dpneg",
        out=tmp / "dist",
        group_size=4,
        train=TRAIN,
        progress=False,
        **common,
    )
    assert d["stage"] == "distill" and d["steps"] == 4
    SentenceTransformer(str(tmp / "dist" / "model"), device="cpu")


def test_bad_inputs(chain, tmp_path):
    _tmp, beir, model, store, qrels = chain
    common = dict(
        corpus=store, queries=beir / "queries.jsonl", out=tmp_path / "x", train=TRAIN, progress=False
    )
    write_negatives(tmp_path / "bad.dpneg", NegativesTable({"q0_0": [("nope", 1.0)]}))
    with pytest.raises(MismatchError, match="nope"):
        train_retriever(model, qrels=beir / "qrels" / "train.tsv", negatives=tmp_path / "bad.dpneg", **common)
    (tmp_path / "other.tsv").write_text("q1\t0\tdoc-elsewhere\t1\n")
    with pytest.raises(MismatchError, match="another corpus"):
        train_retriever(model, qrels=tmp_path / "other.tsv", **common)
    write_run(tmp_path / "r.trec", {"q0_0": {"ghost": 1.0}})
    from dense_pt.data.store import CorpusStore

    with pytest.raises(MismatchError, match="ghost"):
        mine_negatives(
            read_run(tmp_path / "r.trec"), qrels, known_ids=set(CorpusStore.open(store).ids.to_pylist())
        )
