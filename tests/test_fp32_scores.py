"""Every loss over representations computes its scores and softmax in float32 under a bf16 step
(``dense_pt.training.precision.fp32_scores``): given float32 representations, its value and its
gradients under ``torch.autocast("cpu", dtype=torch.bfloat16)`` equal the plain float32 ones to
1e-6 relative, called directly, through each model's ``coupled_loss``, in the full-batch step and
in the cached step. The representations are wide (384) with norms ~10 and a shared direction,
so dot products are ~80, where bf16 keeps about one unit: a score matrix computed
under the autocast is off by far more than 1e-6 (the check can fail: it did before the fix)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from types import SimpleNamespace

import pytest
import torch

torch.set_num_threads(1)

from torch import nn  # noqa: E402

from dense_pt.finetune.models import BiEncoder  # noqa: E402
from dense_pt.objectives.retrieval import (  # noqa: E402
    LOSSES,
    distill_loss,
    listwise_rerank_loss,
    rdrop_listwise_loss,
    triplet_loss,
)
from dense_pt.training.cache import cached_backward  # noqa: E402
from training_helpers import CASES, build  # noqa: E402

B, N, D, SPREAD = 6, 4, 384, 4.0
TOL = 1e-6


def bf16():
    return torch.autocast("cpu", dtype=torch.bfloat16)


def vectors(rows: int, g: torch.Generator) -> torch.Tensor:
    """Float32 vectors of norm ~10 sharing a direction of norm 9: every dot product ~80, the scores
    not saturated (their differences stay small)."""
    common = torch.randn(D, generator=torch.Generator().manual_seed(99))
    return common * (9 / common.norm()) + torch.randn(rows, D, generator=g) * (SPREAD / D**0.5)


def reps(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries [B, D] and passages [B * N, D], each positive a little closer to its query."""
    g = torch.Generator().manual_seed(seed)
    q, p = vectors(B, g), vectors(B * N, g)
    p[::N] = 0.8 * p[::N] + 0.2 * q
    return q, p


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def value_and_grads(fn, inputs: tuple[torch.Tensor, ...], under) -> tuple[torch.Tensor, list[torch.Tensor]]:
    leaves = [x.clone().requires_grad_() for x in inputs]
    with under():
        loss = fn(*leaves)
    assert loss.dtype == torch.float32
    return loss.detach(), list(torch.autograd.grad(loss, leaves))


def assert_fp32(fn, inputs: tuple[torch.Tensor, ...], what: str) -> None:
    want, want_g = value_and_grads(fn, inputs, contextlib.nullcontext)
    got, got_g = value_and_grads(fn, inputs, bf16)
    assert float(want) > 1e-3  # not saturated: the scores matter
    errs = [rel(got, want), *(rel(a, b) for a, b in zip(got_g, want_g, strict=True))]
    print(f"{what}: relative error of the loss and its gradients under bf16 autocast {max(errs):.3g}")
    assert max(errs) < TOL, (what, errs)


def teacher() -> torch.Tensor:
    return torch.randn(B, N, generator=torch.Generator().manual_seed(3)) * 3


def with_tau(name: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    spec = LOSSES[name]
    return lambda q, p: spec.fn(q, p, spec.default_tau)


LOSS_FNS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    **{name: with_tau(name) for name in LOSSES if name != "triplet"},  # the triplet loss takes a margin
    "triplet": lambda q, p: triplet_loss(q, p, 1.0),
    "distill-simlm": lambda q, p: distill_loss(q, p, teacher(), contrastive="simlm"),
    "distill-infonce": lambda q, p: distill_loss(q, p, teacher(), contrastive="infonce"),
}


@pytest.mark.parametrize("name", LOSS_FNS)
def test_each_retriever_loss_is_float32_under_bf16_autocast(name):
    assert_fp32(LOSS_FNS[name], reps(), name)


def test_the_reranker_losses_are_float32_under_bf16_autocast():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(B, N, generator=g) * 30, torch.randn(B, N, generator=g) * 30
    assert_fp32(listwise_rerank_loss, (a,), "listwise")
    assert_fp32(rdrop_listwise_loss, (a, b), "R-Drop listwise")


@pytest.mark.parametrize("case", CASES)
def test_each_models_coupled_loss_is_float32_under_bf16_autocast(case):
    """``coupled_loss``: what the full-batch step and the cached step's pass 2 call, under the
    step's autocast, on the representations (contrastive pre-training's InfoNCE included)."""
    model = build(case, dtype=torch.float32)
    q, p = reps()
    if case == "contrastive":
        names, inputs = ("passages", "contexts"), (q, p[::N].clone())
        batch: dict = {}
    else:
        names, inputs = ("q", "p"), (q, p)
        batch = {"teacher": teacher()} if case.startswith("distill-") else {}

    def loss(*xs):
        return model.coupled_loss(dict(zip(names, xs, strict=True)), batch)["loss"]

    assert_fp32(loss, inputs, case)


# --- the whole step, full-batch and cached --------------------------------------------------------


class Lookup(nn.Module):
    """A backbone whose vectors stay float32 under autocast (an embedding table: autocast casts no
    lookup), so that the step's representations are the float32 ones and only the loss can differ."""

    def __init__(self, vocab: int = 50):
        super().__init__()
        self.table = nn.Embedding(vocab, D)
        with torch.no_grad():
            self.table.weight.copy_(vectors(vocab, torch.Generator().manual_seed(4)))

    def forward(self, input_ids, attention_mask):
        return SimpleNamespace(last_hidden_state=self.table(input_ids))


def lookup_batch(case: str) -> dict:
    g = torch.Generator().manual_seed(2)
    q = torch.randint(0, 50, (B, 5), generator=g)
    p = torch.randint(0, 50, (B * N, 9), generator=g)
    batch = {"q_ids": q, "q_mask": torch.ones_like(q), "p_ids": p, "p_mask": torch.ones_like(p)}
    if case.startswith("distill-"):
        batch["teacher"] = teacher()
    return batch


def lookup_model(case: str) -> BiEncoder:
    torch.manual_seed(0)
    return BiEncoder(Lookup(), "cls", case.removeprefix("distill-"))


def step(case: str, under, chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    model, batch = lookup_model(case), lookup_batch(case)
    if chunk:
        loss = cached_backward(model, batch, chunk, autocast=under)["loss"]
    else:
        with under():
            loss = model(batch)["loss"]
        loss.backward()
    assert model.backbone.table.weight.grad is not None
    return loss.detach(), model.backbone.table.weight.grad


@pytest.mark.parametrize("chunk", [0, 5], ids=["uncached", "cached"])
@pytest.mark.parametrize("case", [c for c in CASES if c != "contrastive"])
def test_a_bf16_step_on_float32_vectors_is_the_float32_step(case, chunk):
    want, want_g = step(case, contextlib.nullcontext, chunk)
    got, got_g = step(case, bf16, chunk)
    errs = (rel(got, want), rel(got_g, want_g))
    print(f"{case}, chunk {chunk}: relative error of the loss, the gradient {errs[0]:.3g}, {errs[1]:.3g}")
    assert max(errs) < TOL, errs
