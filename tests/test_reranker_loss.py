"""The re-ranker's training procedures against plain re-implementations on fixed tensors.

``simlm`` (the default) is SimLM's released procedure (unilm/simlm ``train_reranker_marco.sh``
``--rerank_forward_factor 4 --rerank_use_rdrop True``, ``Reranker.forward``): the group is scored
without gradients, the positive and the top-scoring negatives (``group_size // forward_factor``)
are kept, and they are trained with R-Drop. ``listwise`` is SimLM eq. 4 over the whole group.
Each piece is checked against numpy in float64: the selection (ties, the positive scoring lowest),
the loss value, and its gradient written out by hand; the authors' own formulation (torch's
``KLDivLoss(batchmean, log_target=True)`` + ``CrossEntropyLoss`` on log-probabilities) gives the
same value and gradient; and the module picks the rows its eval-mode scores say, with dropout on."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dense_pt.config.finetune import RerankerSettings
from dense_pt.objectives.retrieval import listwise_rerank_loss, rdrop_listwise_loss, select_top_group


def _ref_select(scores: np.ndarray, keep: int) -> np.ndarray:
    """The positive (column 0) first, then the negatives by descending score, ties by position."""
    out = []
    for row in scores:
        negs = sorted(range(1, len(row)), key=lambda j: (-row[j], j))
        out.append([0, *negs[: keep - 1]])
    return np.asarray(out)


def _log_softmax(z: np.ndarray) -> np.ndarray:
    m = z.max(axis=1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=1, keepdims=True))


def _ref_rdrop(za: np.ndarray, zb: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Loss and its gradient in closed form: L = mean_b [ (CE_a + CE_b) / 2 + (KL(pa||pb) + KL(pb||pa)) / 2 ].
    d/dz_a of KL(pa||pb) = pa (d - E_pa[d]) with d = log pa - log pb; d/dz_b of it = pb - pa."""
    la, lb = _log_softmax(za), _log_softmax(zb)
    pa, pb = np.exp(la), np.exp(lb)
    n_q = za.shape[0]
    e0 = np.zeros_like(za)
    e0[:, 0] = 1
    d = la - lb
    loss = np.mean(-(la[:, 0] + lb[:, 0]) / 2 + ((pa * d).sum(1) + (pb * -d).sum(1)) / 2)
    ed_a = (pa * d).sum(1, keepdims=True)
    ed_b = (pb * -d).sum(1, keepdims=True)
    ga = (0.5 * (pa - e0) + 0.5 * (pa * (d - ed_a) + (pa - pb))) / n_q
    gb = (0.5 * (pb - e0) + 0.5 * ((pb - pa) + pb * (-d - ed_b))) / n_q
    return float(loss), ga, gb


def test_selection_keeps_the_positive_and_the_top_negatives():
    scores = torch.tensor(
        [
            [-5.0, 1.0, 3.0, 2.0, 3.0, 0.0, 4.0, -1.0],  # the positive scores lowest; a tie at 3.0
            [9.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],  # all negatives tied: the mined order decides
            [0.5, 0.7, -2.0, 0.6, 0.1, 0.9, 0.2, 0.3],
        ],
        dtype=torch.float64,
    )
    for keep in (1, 2, 3, 4, 8):
        got = select_top_group(scores, keep).numpy()
        np.testing.assert_array_equal(got, _ref_select(scores.numpy(), keep))
    assert select_top_group(scores, 4)[0].tolist() == [0, 6, 2, 4]
    with pytest.raises(Exception, match="keep"):
        select_top_group(scores, 9)


def test_rdrop_loss_and_gradient_match_the_closed_form():
    rng = np.random.default_rng(3)
    za, zb = rng.normal(size=(5, 16)) * 3, rng.normal(size=(5, 16)) * 3
    ta = torch.tensor(za, dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(zb, dtype=torch.float64, requires_grad=True)
    loss = rdrop_listwise_loss(ta, tb)
    loss.backward()
    want, ga, gb = _ref_rdrop(za, zb)
    assert loss.item() == pytest.approx(want, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(ta.grad.numpy(), ga, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(tb.grad.numpy(), gb, rtol=1e-10, atol=1e-13)
    # identical passes (no dropout): the KL vanishes and R-Drop is the listwise loss
    same = torch.tensor(za, dtype=torch.float64)
    assert rdrop_listwise_loss(same, same).item() == pytest.approx(
        listwise_rerank_loss(same).item(), rel=1e-12
    )


def test_rdrop_loss_is_the_authors_formulation():
    """The authors' Reranker.forward: log-softmax of both passes, 0.5 (KLDiv(lp1, lp2) + KLDiv(lp2, lp1))
    with reduction batchmean and log_target, plus 0.5 (CE(lp1) + CE(lp2)), labels all 0."""
    gen = torch.Generator().manual_seed(0)
    za = torch.randn(4, 16, generator=gen, dtype=torch.float64) * 2
    zb = torch.randn(4, 16, generator=gen, dtype=torch.float64) * 2
    a1, b1 = za.clone().requires_grad_(), zb.clone().requires_grad_()
    a2, b2 = za.clone().requires_grad_(), zb.clone().requires_grad_()
    kl = torch.nn.KLDivLoss(reduction="batchmean", log_target=True)
    ce = torch.nn.CrossEntropyLoss(reduction="mean")
    labels = torch.zeros(4, dtype=torch.long)
    lp1, lp2 = torch.log_softmax(a2, dim=1), torch.log_softmax(b2, dim=1)
    theirs = 0.5 * (kl(lp1, lp2) + kl(lp2, lp1)) + 0.5 * (ce(lp1, labels) + ce(lp2, labels))
    theirs.backward()
    ours = rdrop_listwise_loss(a1, b1)
    ours.backward()
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-12)
    torch.testing.assert_close(a1.grad, a2.grad, rtol=1e-10, atol=1e-14)
    torch.testing.assert_close(b1.grad, b2.grad, rtol=1e-10, atol=1e-14)


def test_listwise_option_is_eq4_over_the_whole_group():
    rng = np.random.default_rng(1)
    z = rng.normal(size=(3, 8))
    t = torch.tensor(z, requires_grad=True)
    loss = listwise_rerank_loss(t)
    loss.backward()
    lz = _log_softmax(z)
    assert loss.item() == pytest.approx(float(np.mean(-lz[:, 0])), rel=1e-12)
    e0 = np.zeros_like(z)
    e0[:, 0] = 1
    np.testing.assert_allclose(t.grad.numpy(), (np.exp(lz) - e0) / 3, rtol=1e-10, atol=1e-14)


def _tiny_classifier(dropout: float = 0.3):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=32, num_labels=1,
                     hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)  # fmt: skip
    return BertForSequenceClassification(cfg).double()


def test_cross_encoder_trains_on_the_rows_its_eval_scores_pick():
    """The module with dropout on: it scores the group in eval mode (dropout off: the same scores
    as an independent eval pass), keeps the reference selection's rows, and its loss equals R-Drop
    over one batch holding the kept pairs twice, under the same dropout draws."""
    from dense_pt.finetune.models import CrossEncoder

    n, n_q, width = 8, 3, 10
    gen = torch.Generator().manual_seed(7)
    ids = torch.randint(5, 50, (n * n_q, width), generator=gen)
    mask = torch.ones_like(ids)
    mask[::3, 7:] = 0
    types = torch.zeros_like(ids)
    types[:, 4:] = 1
    batch = {"x_ids": ids, "x_mask": mask, "x_types": types}
    module = CrossEncoder(_tiny_classifier(), n, "simlm", 4)
    module.train()
    assert module.keep == 2
    with torch.no_grad():
        module.model.eval()
        scores = module.logits(ids, mask, types).view(n_q, n).numpy()
        module.model.train()
    picked = _ref_select(scores, 2)
    rows = (picked + n * np.arange(n_q)[:, None]).reshape(-1)
    torch.manual_seed(11)
    loss = module(batch)["loss"]
    assert module.model.training  # restored after the scoring pass
    torch.manual_seed(11)
    x = [t[torch.from_numpy(rows)] for t in (ids, mask, types)]
    twice = module.logits(*(torch.cat([t, t]) for t in x)).float().view(2, n_q, 2)  # as the module casts
    assert not torch.equal(twice[0], twice[1])  # dropout on: two different passes
    assert loss.item() == pytest.approx(rdrop_listwise_loss(twice[0], twice[1]).item(), rel=1e-12)
    (_, got) = module.select((ids, mask, types))
    np.testing.assert_array_equal(got.numpy(), picked)
    loss.backward()  # the scoring pass holds no graph; the kept pairs carry the gradient
    assert module.model.classifier.weight.grad is not None


def test_settings_refuse_a_selection_without_a_negative():
    assert RerankerSettings().loss == "simlm" and RerankerSettings().forward_factor is None
    with pytest.raises(ValueError, match="keeps 1 passage"):
        RerankerSettings(group_size=4)  # 4 // 4: the positive alone
    RerankerSettings(group_size=4, forward_factor=2)
    RerankerSettings(group_size=4, loss="listwise")
    with pytest.raises(ValueError, match="forward_factor must be 1"):
        RerankerSettings(loss="listwise", forward_factor=4)
    with pytest.raises(ValueError, match="loss must be one of"):
        RerankerSettings(loss="pointwise")
