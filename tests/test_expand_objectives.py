"""querygen and contrastive objectives (LLM document expansion pre-training)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

torch.set_num_threads(1)

from dense_pt.objectives import MethodOptions, build_objective, resolve_options  # noqa: E402
from pretrain_helpers import CLS, PAD, SEP, VOCAB, make_batch, special_ids, tiny_encoder  # noqa: E402


def build(method):
    torch.manual_seed(0)
    return build_objective(method, tiny_encoder(), special_ids(), resolve_options(method, MethodOptions()))


def query_batch(bs=6, t=12, seed=1):
    rng = np.random.default_rng(seed)
    inp = np.full((bs, t), PAD, np.int64)
    lab = np.full((bs, t), -100, np.int64)
    am = np.zeros((bs, t), np.int64)
    for b in range(bs):
        n = int(rng.integers(4, t))
        seq = np.concatenate([[PAD], rng.integers(5, VOCAB, n - 2), [SEP]])
        inp[b, :n], am[b, :n], lab[b, : n - 1] = seq, 1, seq[1:]
    return {"dec_input_ids": inp, "dec_attention_mask": am, "dec_labels": lab}


def tensors(d):
    return {k: torch.as_tensor(v) for k, v in d.items()}


def test_querygen_decoder_sees_the_passage_only_through_h_cls():
    model = build("querygen").eval()
    b = tensors({**make_batch(), **query_batch()})
    b2 = dict(b)
    ids = b["input_ids"].clone()
    content = (ids != CLS) & (ids != SEP) & (ids != PAD)
    ids[content] = (ids[content] + 7 - 5) % (VOCAB - 5) + 5  # perturb every passage token
    b2["input_ids"] = ids
    with torch.no_grad():
        h1 = model.encode(b["input_ids"], b["attention_mask"]).last_hidden_state[:, 0]
        h2 = model.encode(b2["input_ids"], b2["attention_mask"]).last_hidden_state[:, 0]
        assert not torch.allclose(h1, h2)
        l1, l2 = model.decoder_loss(h1, b), model.decoder_loss(h2, b)
        assert l1 != l2  # the passage matters ...
        assert model.decoder_loss(h1, b2) == l1  # ... but only through h_cls
    # gradient of the decoder loss reaches the passage embeddings only via h_cls
    emb = model.encoder.get_input_embeddings()
    model.zero_grad()
    h = model.encode(b["input_ids"], b["attention_mask"]).last_hidden_state[:, 0]
    model.decoder_loss(h.detach(), b).backward()
    # with h_cls fixed, no encoder layer gets a gradient (only the shared token embeddings of the queries)
    layers = list(model.encoder.encoder.parameters())
    assert all(p.grad is None or float(p.grad.abs().sum()) == 0 for p in layers)
    assert float(emb.weight.grad.abs().sum()) > 0
    model.zero_grad()
    qb = dict(b)
    qb["dec_input_ids"] = torch.zeros_like(b["dec_input_ids"])  # decoder tokens: only the slot/pad
    out = model.decoder_loss(model.encode(b["input_ids"], b["attention_mask"]).last_hidden_state[:, 0], qb)
    out.backward()
    assert emb.weight.grad[5:].abs().sum() > 0  # the encoder gets a gradient through h_cls


def test_querygen_causal_decoder():
    model = build("querygen").eval()
    b = tensors(query_batch(bs=2, t=10))
    h = torch.randn(2, 32)
    with torch.no_grad():
        dec_in = model.embed(b["dec_input_ids"])
        from dense_pt.models.decoders import with_bottleneck
        from dense_pt.objectives.querygen import causal_keep

        out1 = model.decoder(with_bottleneck(dec_in, h), causal_keep(b["dec_attention_mask"]))
        ids = b["dec_input_ids"].clone()
        ids[:, 6:] = 9
        out2 = model.decoder(with_bottleneck(model.embed(ids), h), causal_keep(b["dec_attention_mask"]))
    assert torch.allclose(out1[:, :6], out2[:, :6], atol=1e-6)  # no peeking at later tokens


@pytest.mark.parametrize("method", ["querygen", "contrastive"])
def test_loss_falls_on_a_fixed_batch(method):
    model = build(method).train()
    b = {**make_batch(), **query_batch()}
    b["ctx_input_ids"] = np.where(b["dec_input_ids"] == PAD, PAD, b["dec_input_ids"])
    b["ctx_input_ids"][:, 0] = CLS
    b["ctx_attention_mask"] = b["dec_attention_mask"]
    b = tensors(b)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        out = model(b)
        opt.zero_grad()
        out["loss"].backward()
        opt.step()
        losses.append(float(out["loss"].detach()))
    assert losses[-1] < 0.7 * losses[0]
    assert not model.accumulation_safe if method == "contrastive" else model.accumulation_safe
