"""AdamW with decoupled weight decay (none on biases and normalisation weights) and the learning-rate
schedules: linear warmup followed by linear decay, cosine decay, or a constant rate."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from dense_pt.training.config import TrainConfig


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Split trainable parameters into a decayed and a non-decayed group.

    Biases and the weights of normalisation layers (LayerNorm, RMSNorm, BatchNorm ...) are not
    decayed, as in BERT. Parameters are identified by object, so tied weights appear once.
    """
    norm_types = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm)
    no_decay: set[int] = set()
    for module in model.modules():
        is_norm = isinstance(module, norm_types) or "norm" in type(module).__name__.lower()
        for name, p in module.named_parameters(recurse=False):
            if is_norm or name.endswith("bias") or p.ndim < 2:
                no_decay.add(id(p))
    decay: list[nn.Parameter] = []
    plain: list[nn.Parameter] = []
    seen: set[int] = set()
    for p in model.parameters():
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        (plain if id(p) in no_decay else decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}]
    if plain:
        groups.append({"params": plain, "weight_decay": 0.0})
    return groups


def build_optimizer(
    model: nn.Module, cfg: TrainConfig, device: torch.device | str = "cpu", fused: bool | None = None
) -> torch.optim.AdamW:
    """AdamW over ``param_groups``; its fused kernel (one launch for every parameter) with
    ``fused_adamw`` on a GPU. ``fused`` forces the choice (torch has a fused CPU kernel too; the
    tests compare it with the default one)."""
    if fused is None:
        fused = cfg.fused_adamw and torch.device(device).type == "cuda"
    return torch.optim.AdamW(
        param_groups(model, cfg.weight_decay),
        lr=cfg.lr,
        betas=(cfg.adam_beta1, cfg.adam_beta2),
        eps=cfg.adam_eps,
        fused=True if fused else None,
    )


def lr_factor(step: int, total: int, warmup: int, schedule: str, min_ratio: float = 0.0) -> float:
    """Multiplier of the peak rate at optimiser step ``step`` (0-based)."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    span = max(1, total - warmup)
    progress = min(1.0, max(0.0, (step - warmup) / span))
    if schedule == "linear":
        decayed = 1.0 - progress
    elif schedule == "cosine":
        decayed = 0.5 * (1.0 + math.cos(math.pi * progress))
    else:
        raise ValueError(f"unknown schedule {schedule!r}")
    return min_ratio + (1.0 - min_ratio) * decayed


def build_scheduler(
    optimizer: torch.optim.Optimizer, cfg: TrainConfig, lr_lambda: Callable[[int], float] | None = None
) -> torch.optim.lr_scheduler.LambdaLR:
    """The config's schedule, or ``lr_lambda(step)`` (a multiplier of the peak rate) when given."""
    total, warmup = cfg.max_steps, cfg.warmup_steps()
    if lr_lambda is None:

        def lr_lambda(step: int) -> float:
            return lr_factor(step, total, warmup, cfg.schedule, cfg.min_lr_ratio)

    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
