"""Fine-tuning stages on a tiny random model: retriever, re-ranker, scores, distillation; the
retriever checkpoints load with sentence-transformers and embed like our encoder."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dense_pt.config.finetune import (
    DistillInputs,
    DistillSettings,
    RerankerInputs,
    RerankerSettings,
    RetrieverInputs,
    RetrieverSettings,
    ScoreInputs,
)
from dense_pt.config.retrieval import BM25Command, EncodeSettings, MineCommand
from dense_pt.data import load_queries
from dense_pt.errors import InvalidArgumentError, MismatchError
from dense_pt.finetune.data import build_sampler
from dense_pt.finetune.stages import score_negatives, train_distill, train_reranker, train_retriever
from dense_pt.retrieval.bm25 import bm25
from dense_pt.retrieval.encode import Embeddings, encode
from dense_pt.retrieval.negatives import NegativesTable, mine_negatives, read_negatives, write_negatives
from dense_pt.runs import load_run, write_run
from dense_pt.training import TrainConfig
from retrieval_fixtures import tiny_setup

TRAIN = TrainConfig(max_steps=4, batch_size=4, lr=1e-3, warmup=0, save_every=2, log_every=1, precision="fp32")


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ft")
    beir, model, store, _queries, qrels = tiny_setup(tmp)
    bm25(beir / "corpus.jsonl", beir / "queries.jsonl", tmp / "bm25.trec", BM25Command(k=20))
    table = mine_negatives(load_run(tmp / "bm25.trec"), qrels, MineCommand(depth=20, num=6))
    write_negatives(tmp / "neg.dpneg", table)
    return tmp, beir, model, store, qrels


def test_group_sampling_is_deterministic(chain):
    from dense_pt.data.store import CorpusStore

    tmp, beir, _model, store, qrels = chain
    s = CorpusStore.open(store)

    negs = {q: [p for p, _ in r] for q, r in read_negatives(tmp / "neg.dpneg").rows.items()}
    sam = build_sampler(s, load_queries(beir / "queries.jsonl"), qrels, negs, lambda t: [[5]] * len(t), 4, 7)
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
    inputs = RetrieverInputs(model=model, out=tmp / "r1", negatives=tmp / "neg.dpneg", **common)
    m = train_retriever(inputs, RetrieverSettings(group_size=4), TRAIN, progress=False)
    assert m["steps"] == 4 and m["settings"]["normalize"] is True
    assert (tmp / "r1" / "log.jsonl").read_text().count("\n") == 4
    # the checkpoint loads as a sentence-transformers model and embeds like `dense-pt encode`
    st = SentenceTransformer(str(tmp / "r1" / "model"), device="cpu")
    # written by sentence-transformers' own save: its versions and configs, not a hand-made copy
    import sentence_transformers

    st_cfg = json.loads((tmp / "r1" / "model" / "config_sentence_transformers.json").read_text())
    assert st_cfg["__version__"]["sentence_transformers"] == sentence_transformers.__version__
    # the trained passage length, capped at the tiny model's 128 positions as sentence-transformers does
    assert st_cfg["similarity_fn_name"] == "cosine"
    assert st.max_seq_length == min(m["settings"]["passage_max_length"], 128)
    encode(
        tmp / "r1" / "model",
        beir / "queries.jsonl",
        tmp / "qe",
        EncodeSettings(dtype="float32", device="cpu"),
        progress=False,
    )
    qids, ours = Embeddings.open(tmp / "qe").load_all()
    texts = {
        json.loads(x)["_id"]: json.loads(x)["text"] for x in (beir / "queries.jsonl").read_text().splitlines()
    }
    ref = st.encode([texts[q] for q in qids[:5]])
    np.testing.assert_allclose(ours[:5], ref, atol=1e-4)
    assert np.allclose(np.linalg.norm(ref, axis=1), 1, atol=1e-4)

    r = train_reranker(
        RerankerInputs(model=model, negatives=tmp / "neg.dpneg", out=tmp / "rr", **common),
        # the authors' procedure (default loss "simlm") on the top half of each group
        RerankerSettings(group_size=4, forward_factor=2, max_length=96),
        TRAIN,
        progress=False,
    )
    assert r["steps"] == 4 and r["settings"]["loss"] == "simlm" and r["settings"]["trained_per_group"] == 2
    # the trained length travels in the tokenizer: sentence-transformers' CrossEncoder truncates there
    from sentence_transformers import CrossEncoder as STCrossEncoder

    ce = STCrossEncoder(str(tmp / "rr" / "model"), device="cpu")
    # (sentence-transformers >= 4 reports it as max_seq_length / max_length; 3.x truncates at the
    # tokenizer's model_max_length and leaves max_length None)
    limit = getattr(ce, "max_seq_length", None) or getattr(ce, "max_length", None)
    assert (limit or ce.tokenizer.model_max_length) == 96 and ce.tokenizer.model_max_length == 96
    assert len(ce.predict([("a query", "a passage " * 200)])) == 1  # longer input is truncated, not an error
    man = score_negatives(ScoreInputs(reranker=tmp / "rr" / "model", negatives=tmp / "neg.dpneg", out=tmp / "scores.dpneg",
                            **common))  # fmt: skip
    assert "logits" in man["meaning"]
    scores = read_negatives(tmp / "scores.dpneg")
    q0 = next(iter(scores.rows))
    first = scores.rows[q0][0][0]
    assert qrels[q0][first] > 0  # positives first
    d = train_distill(
        DistillInputs(model=tmp / "r1" / "model", scores=tmp / "scores.dpneg", out=tmp / "dist", **common),
        DistillSettings(group_size=4),
        TRAIN,
        progress=False,
    )
    assert d["inputs"]["scores"]["path"] == str(tmp / "scores.dpneg") and d["settings"]["alpha"] == 0.2
    assert d["stage"] == "distill" and d["steps"] == 4
    SentenceTransformer(str(tmp / "dist" / "model"), device="cpu")


def test_bad_inputs(chain, tmp_path):
    _tmp, beir, model, store, qrels = chain
    common = dict(model=model, corpus=store, queries=beir / "queries.jsonl", out=tmp_path / "x")

    def train(**inputs):
        return train_retriever(RetrieverInputs(**{**common, **inputs}), None, TRAIN, progress=False)

    write_negatives(tmp_path / "bad.dpneg", NegativesTable({"q0_0": [("nope", 1.0)]}))
    with pytest.raises(MismatchError, match="nope"):
        train(qrels=beir / "qrels" / "train.tsv", negatives=tmp_path / "bad.dpneg")
    (tmp_path / "other.tsv").write_text("q1\t0\tdoc-elsewhere\t1\n")
    with pytest.raises(MismatchError, match="another corpus"):
        train(qrels=tmp_path / "other.tsv")
    # a store tokenized with another vocabulary than the model's tokenizer.json is refused
    from dense_pt.data.store import CorpusStore, build_store_from_texts
    from dense_pt.data.tokenizer import train_wordpiece

    other = train_wordpiece(["zebra quokka narwhal"] * 5, vocab_size=40, min_frequency=1)
    build_store_from_texts(tmp_path / "other_store", [("p0", "zebra quokka")], other)
    with pytest.raises(MismatchError, match="another vocabulary"):
        train(qrels=beir / "qrels" / "train.tsv", corpus=tmp_path / "other_store")
    write_run(tmp_path / "r.trec", {"q0_0": {"ghost": 1.0}})

    with pytest.raises(MismatchError, match="ghost"):
        mine_negatives(
            load_run(tmp_path / "r.trec"), qrels, known_ids=set(CorpusStore.open(store).ids.to_pylist())
        )


@pytest.mark.parametrize(("loss", "normalize"), [("infonce", False), ("simlm", True)])
def test_cli_distill_similarity_follows_the_loss(chain, tmp_path, loss, normalize):
    """`dense-pt train distill --loss infonce` is CDMAE eq. 11 (dot-product student scores + eq. 10):
    the exported retriever has no Normalize module; with SimLM's cosine loss it has one."""
    from typer.testing import CliRunner

    from dense_pt.cli import app

    tmp, beir, model, store, qrels = chain
    table = read_negatives(tmp / "neg.dpneg")
    rows = {q: [(p, 3.0) for p, r in qrels[q].items() if r > 0] + [(p, -1.0) for p, _ in negs[:3]]
            for q, negs in table.rows.items()}  # fmt: skip
    write_negatives(tmp_path / "scores.dpneg", NegativesTable(rows))
    (tmp_path / "t.toml").write_text(
        "[train]\nwarmup = 0\nsave_every = 2\nprecision = 'fp32'\nlog_every = 1\n"
    )
    args = ["train", "distill", str(model), "--corpus", str(store), "--queries", str(beir / "queries.jsonl"),
            "--qrels", str(beir / "qrels" / "train.tsv"), "--scores", str(tmp_path / "scores.dpneg"),
            "--out", str(tmp_path / "d"), "--group-size", "4", "--loss", loss, "--config", str(tmp_path / "t.toml"),
            "--max-steps", "2", "--batch-size", "4"]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, (res.output, res.exception)
    man = json.loads((tmp_path / "d" / "manifest.json").read_text())
    s = man["settings"]
    assert s["loss"] == f"distill (KL + alpha * {loss})" and s["normalize"] is normalize
    assert s["similarity"] == ("dot" if loss == "infonce" else "cosine")
    assert s["tau"] == (1.0 if loss == "infonce" else 0.02) and s["alpha"] == 0.2
    modules = (tmp_path / "d" / "model" / "modules.json").read_text()
    assert ("Normalize" in modules) is normalize


def test_retriever_temperature_used_and_recorded(chain, tmp_path):
    tmp, beir, model, store, _qrels = chain
    common = dict(
        model=model, corpus=store, queries=beir / "queries.jsonl", qrels=beir / "qrels" / "train.tsv"
    )
    one = TrainConfig(max_steps=1, batch_size=4, warmup=0, precision="fp32")

    def train(out, **settings):
        inputs = RetrieverInputs(**common, negatives=tmp / "neg.dpneg", out=tmp_path / out)
        return train_retriever(inputs, RetrieverSettings(group_size=4, **settings), one, progress=False)

    m = train("a", loss="infonce", tau=0.05)
    assert m["settings"]["tau"] == 0.05 and m["settings"]["normalize"] is False
    m = train("b", loss="infonce")
    assert m["settings"]["tau"] == 1.0
    with pytest.raises(InvalidArgumentError, match="no temperature"):
        train("c", loss="triplet", tau=0.02)
    with pytest.raises(InvalidArgumentError, match="contrastive term"):
        DistillSettings(group_size=4, loss="triplet")


def test_store_tokenizer_is_saved_with_its_own_special_tokens(tmp_path):
    """No "[UNK]" assumed: a store whose tokenizer names its specials <unk>, <s>, ... gets a
    transformers tokenizer (save_pretrained) with those names, and the model length when given."""
    from tokenizers import Tokenizer, models
    from transformers import AutoTokenizer

    from dense_pt.data.tokenizer import hf_fast_tokenizer
    from dense_pt.finetune.stages import hf_tokenizer

    vocab = {"<pad>": 0, "<unk>": 1, "<s>": 2, "</s>": 3, "<mask>": 4, "river": 5}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    specials = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
    hf_fast_tokenizer(tok, specials, model_max_length=77).save_pretrained(str(tmp_path / "tok"))
    back = AutoTokenizer.from_pretrained(str(tmp_path / "tok"), local_files_only=True)
    assert (back.unk_token, back.cls_token, back.sep_token, back.pad_token, back.mask_token) == (
        "<unk>", "<s>", "</s>", "<pad>", "<mask>",
    )  # fmt: skip
    assert back.model_max_length == 77 and back.convert_tokens_to_ids("river") == 5

    class Store:  # what hf_tokenizer reads of a corpus store when the model folder has no tokenizer
        special_tokens = specials

        def tokenizer(self):
            return tok

    fallback = hf_tokenizer(tmp_path / "no-model-here", Store())
    assert fallback.unk_token == "<unk>" and fallback.cls_token_id == 2


@pytest.mark.parametrize(
    ("config", "pooling"),
    [
        (
            {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False},
            "cls",
        ),  # sentence-transformers < 6
        ({"pooling_mode_mean_tokens": True}, "mean"),
        ({"embedding_dimension": 8, "pooling_mode": "mean"}, "mean"),  # sentence-transformers >= 6
        ({"embedding_dimension": 8, "pooling_mode": "cls"}, "cls"),
    ],
)
def test_pooling_is_read_from_either_sentence_transformers_layout(tmp_path, config, pooling):
    from dense_pt.retrieval.encoder import detect_spec

    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(config))
    modules = [
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
        }
    ]
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    assert detect_spec(tmp_path).pooling == pooling
