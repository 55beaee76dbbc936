"""The precision of every loss over representations: its scores and softmax in float32 whatever
the step's autocast says.

Under bf16 autocast a matmul casts its inputs to bf16 (8 bits of mantissa: a dot product near 200
is known to +-1), so a score matrix computed inside the step's autocast region is coarse even when
its inputs are float32, and a contrastive loss over it drifts (3.1% on the first step of
contrastive pre-training on an H100, the first GPU run). Every such loss (the retriever losses,
distillation's KL and contrastive term, the triplet loss, contrastive pre-training's InfoNCE, the
re-ranker's listwise and R-Drop losses) is decorated with ``fp32_scores``: its floating-point tensor
arguments are promoted to at least float32 (float64 stays, for the exactness tests) and autocast is
disabled while it runs, in the uncached step and in the cached one (``cache.py``'s pass 2) alike.
The encoders still run in the step's precision; only the small [B, P] score matrices are float32.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch import Tensor

F = TypeVar("F", bound=Callable[..., Any])


def loss_precision(x: Tensor) -> Tensor:
    """``x`` in at least float32: what a loss over representations computes in (float64 stays)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def _promoted(value: Any) -> Any:
    return loss_precision(value) if isinstance(value, Tensor) and value.is_floating_point() else value


def fp32_scores(fn: F) -> F:
    """Decorator: ``fn`` runs with its floating-point tensor arguments in at least float32 and
    autocast disabled on their device (the first tensor argument's), so its matmuls, softmax and
    log-softmax compute in float32 under a bf16 / fp16 step. Nested calls are free (the inner one
    finds float32 and autocast already off; leaving it does not clear autocast's weight cache,
    which only the outermost autocast region does)."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        first = next((a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)), None)
        if first is None:
            return fn(*args, **kwargs)
        with torch.autocast(device_type=first.device.type, enabled=False):
            return fn(*(_promoted(a) for a in args), **{k: _promoted(v) for k, v in kwargs.items()})

    return run  # type: ignore[return-value]
