"""The fine-tuning losses against values computed by hand with plain Python loops."""

from __future__ import annotations

import math

import pytest
import torch

from dense_pt.objectives.retrieval import (
    distill_loss,
    gather_with_grad,
    infonce_loss,
    listwise_rerank_loss,
    simlm_loss,
    triplet_loss,
)


def cos(a, b):
    return float(a @ b / (a.norm() * b.norm()))


def data(b=3, n=3, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, d, generator=g, dtype=torch.float64), torch.randn(
        b * n, d, generator=g, dtype=torch.float64
    )


def test_simlm_eq3_by_hand():
    q, p = data()
    b, n, tau = 3, 3, 0.02
    total = 0.0
    for i in range(b):
        pos = p[i * n]
        negs = [p[j] for j in range(b * n) if j != i * n]  # hard + in-batch negatives
        num = math.exp(cos(q[i], pos) / tau)
        den = num + sum(math.exp(cos(q[i], x) / tau) + math.exp(cos(pos, x) / tau) for x in negs)
        total += -math.log(num / den)
    got = simlm_loss(q.double(), p.double(), tau)
    assert float(got) == pytest.approx(total / b, rel=1e-9)
    # the positive-vs-negative terms matter: dropping them changes the value
    no_extra = (
        sum(
            -math.log(
                math.exp(cos(q[i], p[i * n]) / tau)
                / sum(math.exp(cos(q[i], p[j]) / tau) for j in range(b * n))
            )
            for i in range(b)
        )
        / b
    )
    assert float(got) > no_extra


def test_infonce_by_hand():
    q, p = data(seed=1)
    b, n = 3, 3
    ref = 0.0
    for i in range(b):
        s = [float(q[i] @ p[j]) for j in range(b * n)]
        ref += -(s[i * n] - math.log(sum(math.exp(x) for x in s)))
    assert float(infonce_loss(q.double(), p.double())) == pytest.approx(ref / b, rel=1e-9)


def test_triplet_by_hand():
    q, p = data(seed=2)
    b, n, m = 3, 3, 1.0
    vals = [
        max(0.0, m - float(q[i] @ p[i * n]) + float(q[i] @ p[i * n + k]))
        for i in range(b)
        for k in range(1, n)
    ]
    assert float(triplet_loss(q, p, m)) == pytest.approx(sum(vals) / len(vals), rel=1e-5)


def test_listwise_and_distill_by_hand():
    logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, -1.0]], dtype=torch.float64)
    ref = sum(-(row[0] - math.log(sum(math.exp(x) for x in row))) for row in logits.tolist()) / 2
    assert float(listwise_rerank_loss(logits)) == pytest.approx(ref)

    q, p = data(b=2, n=3, seed=3)
    q, p = q.double(), p.double()
    tau, alpha = 0.02, 0.2
    kl = 0.0
    for i in range(2):
        s = [cos(q[i], p[i * 3 + k]) / tau for k in range(3)]
        t = logits[i].tolist()
        zs, zt = math.log(sum(math.exp(x) for x in s)), math.log(sum(math.exp(x) for x in t))
        pr = [math.exp(x - zt) for x in t]
        kl += sum(pr[k] * ((t[k] - zt) - (s[k] - zs)) for k in range(3))
    ref = kl / 2 + alpha * float(simlm_loss(q, p, tau))
    assert float(distill_loss(q, p, logits, alpha, tau)) == pytest.approx(ref, rel=1e-9)
    # KL is zero when the retriever already matches the ranker: only the contrastive part remains
    p_same = p.clone()
    assert float(distill_loss(q, p_same, torch.zeros(2, 3, dtype=torch.float64), 0.0, 1e6)) == pytest.approx(
        0.0, abs=1e-9
    )


def test_gather_single_process_keeps_gradients():
    x = torch.randn(4, 3, requires_grad=True)
    y, start = gather_with_grad(x)
    assert start == 0 and y is x
    simlm_loss(x[:2], torch.randn(4, 3)).backward()
    assert x.grad is not None and x.grad[:2].abs().sum() > 0


def test_losses_fall_when_optimising():
    torch.manual_seed(0)
    q = torch.randn(4, 8, requires_grad=True)
    p = torch.randn(8, 8, requires_grad=True)
    opt = torch.optim.SGD([q, p], lr=0.05)
    first = None
    for _ in range(30):
        loss = simlm_loss(q, p)
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < first
