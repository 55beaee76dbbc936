"""Queries as token ids aligned with a corpus store: decoder inputs/labels and contrastive contexts."""

from __future__ import annotations

import numpy as np
import pytest

from dense_pt.data.store import CorpusStore, build_store_from_texts
from dense_pt.data.tokenizer import train_wordpiece
from dense_pt.errors import InvalidArgumentError
from dense_pt.expansion.query_data import IGNORE, QueryTokens

TEXTS = [
    ("p0", "aspirin lowers the risk of heart attack"),
    ("p1", "coral reefs bleach when the sea warms"),
    ("p2", "insulin controls blood sugar levels"),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tok = train_wordpiece(
        [t for _, t in TEXTS] * 3 + ["what does aspirin do", "why coral bleach"], vocab_size=120
    )
    path = tmp_path_factory.mktemp("s") / "store"
    build_store_from_texts(path, TEXTS, tok)
    return CorpusStore.open(path)


def test_build_and_layout(store):
    qt = QueryTokens.build(store, {"p0": ["what does aspirin do", "aspirin heart"], "p2": ["insulin"]})
    assert [qt.num_queries(i) for i in range(3)] == [2, 0, 1]
    assert qt.rows_with_queries().tolist() == [0, 2]
    tok = store.tokenizer()
    assert qt.queries_of(0)[0].tolist() == tok.encode("what does aspirin do", add_special_tokens=False).ids
    with pytest.raises(InvalidArgumentError, match="not in the store"):
        QueryTokens.build(store, {"zzz": ["q"]})


def test_decoder_batch_is_slot_queries_sep_with_next_token_labels(store):
    sp = store.special_tokens
    qt = QueryTokens.build(store, {"p0": ["what does aspirin do", "aspirin heart"], "p2": ["insulin"]})
    b = qt.decoder_batch([0, 2, 1], sep=sp["sep"], pad=sp["pad"], max_length=64)
    q1, q2 = qt.queries_of(0)
    seq0 = np.concatenate([[sp["pad"]], q1, [sp["sep"]], q2, [sp["sep"]]])
    n0 = len(seq0)
    assert b["dec_input_ids"][0, :n0].tolist() == seq0.tolist()
    assert b["dec_labels"][0, : n0 - 1].tolist() == seq0[1:].tolist()  # slot predicts q1[0]
    assert (b["dec_labels"][0, n0 - 1 :] == IGNORE).all()
    assert b["dec_attention_mask"][0].sum() == n0
    assert b["dec_attention_mask"][2].sum() == 1 and (b["dec_labels"][2] == IGNORE).all()  # no queries
    cut = qt.decoder_batch([0], sep=sp["sep"], pad=sp["pad"], max_length=4)
    assert cut["dec_input_ids"].shape == (1, 4) and cut["dec_labels"][0, 3] == IGNORE


def test_context_batch_is_deterministic(store):
    sp = store.special_tokens
    qt = QueryTokens.build(store, {"p0": ["what does aspirin do", "aspirin heart"], "p2": ["insulin"]})
    a = qt.context_batch([0, 2], seed=1, epoch=0, cls=sp["cls"], sep=sp["sep"], pad=sp["pad"], max_length=16)
    b = qt.context_batch([0, 2], seed=1, epoch=0, cls=sp["cls"], sep=sp["sep"], pad=sp["pad"], max_length=16)
    assert (a["ctx_input_ids"] == b["ctx_input_ids"]).all()
    assert a["ctx_input_ids"][0, 0] == sp["cls"]
    seen = {
        tuple(qt.context_batch([0], 1, e, sp["cls"], sp["sep"], sp["pad"], 16)["ctx_input_ids"][0].tolist())
        for e in range(30)
    }
    assert len(seen) == 2  # both queries of p0 get used across epochs
    with pytest.raises(InvalidArgumentError, match="no query"):
        qt.context_batch([1], 1, 0, sp["cls"], sp["sep"], sp["pad"], 16)
