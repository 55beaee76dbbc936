"""The fine-tuning losses against values computed by hand with plain Python loops."""

from __future__ import annotations

import math

import pytest
import torch

from dense_pt.errors import InvalidArgumentError
from dense_pt.objectives.gather import gather_with_grad
from dense_pt.objectives.retrieval import (
    LOSSES,
    distill_loss,
    eq3_loss,
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


def logsumexp(xs):
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def authors_simlm(q, p, tau):
    """SimLM's released loss (unilm/simlm ``full_contrastive_scores_and_labels`` + cross-entropy),
    written out with loops: query i's logits are cos(q_i, every passage), then for every j != i
    cos(d_i+, q_j), cos(q_i, q_j) and cos(d_i+, d_j+); the target is its positive."""
    b, n = q.shape[0], p.shape[0] // q.shape[0]
    total = 0.0
    for i in range(b):
        pos = p[i * n]
        logits = [cos(q[i], p[j]) / tau for j in range(b * n)]
        logits += [cos(pos, q[j]) / tau for j in range(b) if j != i]
        logits += [cos(q[i], q[j]) / tau for j in range(b) if j != i]
        logits += [cos(pos, p[j * n]) / tau for j in range(b) if j != i]
        total += logsumexp(logits) - logits[i * n]
    return total / b


def paper_eq3(q, p, tau):
    """SimLM eq. 3 as printed: the positive passage against every negative joins the denominator."""
    b, n = q.shape[0], p.shape[0] // q.shape[0]
    total = 0.0
    for i in range(b):
        pos = p[i * n]
        negs = [p[j] for j in range(b * n) if j != i * n]  # hard + in-batch negatives
        s_pos = cos(q[i], pos) / tau
        terms = [s_pos] + [cos(q[i], x) / tau for x in negs] + [cos(pos, x) / tau for x in negs]
        total += logsumexp(terms) - s_pos
    return total / b


def test_simlm_is_the_authors_loss_and_eq3_the_papers_text():
    q, p = data()
    for tau in (0.02, 0.5):
        assert float(simlm_loss(q, p, tau)) == pytest.approx(authors_simlm(q, p, tau), rel=1e-9)
        assert float(eq3_loss(q, p, tau)) == pytest.approx(paper_eq3(q, p, tau), rel=1e-9)
    assert LOSSES["simlm"].fn is simlm_loss and LOSSES["simlm-eq3"].fn is eq3_loss
    # With near-duplicate hard negatives the two differ a lot: eq. 3 scores d+ against its own
    # near-copies, the authors' code never scores d+ against a hard negative.
    g = torch.Generator().manual_seed(4)
    p2 = p.clone()
    for i in range(3):
        p2[i * 3 + 1] = p2[i * 3] + 0.05 * torch.randn(5, generator=g, dtype=torch.float64)
    a, e = float(simlm_loss(q, p2)), float(eq3_loss(q, p2))
    assert a == pytest.approx(authors_simlm(q, p2, 0.02), rel=1e-9)
    assert e == pytest.approx(paper_eq3(q, p2, 0.02), rel=1e-9)
    assert e > a + 1.0


def test_infonce_by_hand():
    q, p = data(seed=1)
    b, n = 3, 3
    for tau in (1.0, 0.1):
        ref = 0.0
        for i in range(b):
            s = [float(q[i] @ p[j]) / tau for j in range(b * n)]
            ref += logsumexp(s) - s[i * n]
        assert float(infonce_loss(q, p, tau)) == pytest.approx(ref / b, rel=1e-9)
    assert float(infonce_loss(q, p)) == pytest.approx(float(infonce_loss(q, p, 1.0)))  # default 1


def test_triplet_by_hand():
    q, p = data(seed=2)
    b, n, m = 3, 3, 1.0
    vals = [
        max(0.0, m - float(q[i] @ p[i * n]) + float(q[i] @ p[i * n + k]))
        for i in range(b)
        for k in range(1, n)
    ]
    assert float(triplet_loss(q, p, m)) == pytest.approx(sum(vals) / len(vals), rel=1e-5)


def test_listwise_rerank_by_hand():
    logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, -1.0]], dtype=torch.float64)
    ref = sum(logsumexp(row) - row[0] for row in logits.tolist()) / 2
    assert float(listwise_rerank_loss(logits)) == pytest.approx(ref)


def kl_by_hand(student, teacher):
    zs, zt = logsumexp(student), logsumexp(teacher)
    return sum(math.exp(t - zt) * ((t - zt) - (s - zs)) for s, t in zip(student, teacher, strict=True))


@pytest.mark.parametrize("contrastive", ["simlm", "simlm-eq3", "infonce"])
def test_distill_by_hand(contrastive):
    """KL(p_ranker || p_ret) over each group + alpha * the contrastive term; p_ret from the
    contrastive loss's own similarity: cosine / 0.02 (SimLM eq. 5) or dot product (CDMAE eq. 11)."""
    teacher = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, -1.0]], dtype=torch.float64)
    q, p = data(b=2, n=3, seed=3)
    alpha = 0.2
    score = (lambda x, y: float(x @ y)) if contrastive == "infonce" else (lambda x, y: cos(x, y) / 0.02)
    kl = sum(kl_by_hand([score(q[i], p[i * 3 + k]) for k in range(3)], teacher[i].tolist()) for i in range(2))
    term = {"simlm": authors_simlm(q, p, 0.02), "simlm-eq3": paper_eq3(q, p, 0.02)}.get(contrastive)
    if term is None:
        term = float(infonce_loss(q, p))
    ref = kl / 2 + alpha * term
    got = distill_loss(q, p, teacher, alpha, None, contrastive)
    assert float(got) == pytest.approx(ref, rel=1e-9)
    # KL is zero when the retriever already matches the ranker: only the contrastive part remains
    same = torch.tensor(
        [[score(q[i], p[i * 3 + k]) for k in range(3)] for i in range(2)], dtype=torch.float64
    )
    assert float(distill_loss(q, p, same, alpha, None, contrastive)) == pytest.approx(alpha * term, rel=1e-9)


def test_temperatures_and_names():
    assert {k: v.default_tau for k, v in LOSSES.items()} == {
        "simlm": 0.02, "simlm-eq3": 0.02, "infonce": 1.0, "triplet": None,
    }  # fmt: skip
    assert {k: v.similarity for k, v in LOSSES.items()} == {
        "simlm": "cosine", "simlm-eq3": "cosine", "infonce": "dot", "triplet": "dot",
    }  # fmt: skip
    assert LOSSES["infonce"].resolve_tau(0.05) == 0.05
    with pytest.raises(InvalidArgumentError, match="no temperature"):
        LOSSES["triplet"].resolve_tau(0.02)
    with pytest.raises(InvalidArgumentError, match="tau must be > 0"):
        LOSSES["simlm"].resolve_tau(0.0)
    q, p = data()
    with pytest.raises(InvalidArgumentError, match="contrastive term"):
        distill_loss(q, p, torch.zeros(3, 3, dtype=torch.float64), contrastive="triplet")


def test_the_losses_are_the_configs_names_with_its_temperatures():
    """The config models check loss names and tau against ``dense_pt.config.choices`` (no torch);
    the torch losses are the same names, in the same order, with the same defaults."""
    from dense_pt.config.choices import DISTILL_LOSSES, LOSS_TAU, resolve_tau

    assert tuple(LOSSES) == tuple(LOSS_TAU)
    assert all(LOSSES[k].default_tau == v for k, v in LOSS_TAU.items())
    assert set(DISTILL_LOSSES) <= {k for k, v in LOSS_TAU.items() if v is not None}
    with pytest.raises(
        InvalidArgumentError, match=r"loss must be one of \('simlm', 'simlm-eq3', 'infonce', 'triplet'\)"
    ):
        resolve_tau("cosine", None)


def test_gather_single_process_keeps_gradients():
    x = torch.randn(4, 3, requires_grad=True)
    assert gather_with_grad(x) is x
    simlm_loss(x[:2], torch.randn(4, 3)).backward()
    assert x.grad is not None and x.grad[:2].abs().sum() > 0


def test_losses_fall_when_optimising():
    torch.manual_seed(0)
    q = torch.randn(4, 8, requires_grad=True)
    p = torch.randn(8, 8, requires_grad=True)
    opt = torch.optim.SGD([q, p], lr=0.05)
    first = None
    for _ in range(30):
        loss = simlm_loss(q, p) + eq3_loss(q, p) + infonce_loss(q, p)
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < first
