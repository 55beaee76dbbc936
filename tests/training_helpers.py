"""The models and batches of the cached-gradient and GPU-switch tests: every loss with in-batch
negatives around a tiny random BERT (float64 by default), and batches with padding."""

from __future__ import annotations

import numpy as np
import torch

from pretrain_helpers import CLS, PAD, SEP, VOCAB, special_ids, tiny_config

CASES = ("simlm", "simlm-eq3", "infonce", "triplet", "distill-simlm", "distill-infonce", "contrastive")
B, N = 6, 3  # queries (or passages) per process, group size


def build(case: str, dropout: float = 0.0, dtype: torch.dtype = torch.float64):
    """The model of ``case`` around a tiny random float64 BERT (a wide init: [CLS] vectors far from
    parallel, so the losses are far from saturated)."""
    from transformers import BertModel

    from dense_pt.finetune.models import BiEncoder
    from dense_pt.objectives import MethodOptions, build_objective, resolve_options

    torch.manual_seed(0)
    encoder = BertModel(tiny_config(dropout, layers=2, initializer_range=0.3), add_pooling_layer=False)
    if case == "contrastive":
        opts = resolve_options("contrastive", MethodOptions(decoder_layers=1, condenser_layer=1))
        model = build_objective("contrastive", encoder, special_ids(), opts)
    else:
        model = BiEncoder(encoder, "cls", case.removeprefix("distill-"))
    return model.to(dtype).train()


def _ids(rng, rows: int, length: int, labelled: int = 0):
    """Token ids with [CLS] .. [SEP] and padding, and (``labelled`` > 0) MLM labels at exactly
    ``labelled`` positions per row (so every process holds as many MLM targets)."""
    ids = np.full((rows, length), PAD, np.int64)
    mask = np.zeros((rows, length), np.int64)
    labels = np.full((rows, length), -100, np.int64)
    for r in range(rows):
        n = int(rng.integers(max(3, labelled + 1), length - 1))
        ids[r, 0], ids[r, 1 : n + 1], ids[r, n + 1] = CLS, rng.integers(5, VOCAB, n), SEP
        mask[r, : n + 2] = 1
        at = 1 + rng.choice(n, labelled, replace=False)
        labels[r, at] = ids[r, at]
    return ids, mask, labels


def global_batch(case: str, world: int = 1, seed: int = 0) -> dict[str, torch.Tensor]:
    rng = np.random.default_rng(seed)
    if case == "contrastive":
        ids, mask, labels = _ids(rng, world * B, 14, labelled=3)
        ctx, ctx_mask, _ = _ids(rng, world * B, 8)
        batch = {"input_ids": ids, "attention_mask": mask, "labels": labels,
                 "ctx_input_ids": ctx, "ctx_attention_mask": ctx_mask}  # fmt: skip
    else:
        q, qm, _ = _ids(rng, world * B, 7)
        p, pm, _ = _ids(rng, world * B * N, 12)
        batch = {"q_ids": q, "q_mask": qm, "p_ids": p, "p_mask": pm}
        if case.startswith("distill-"):
            batch["teacher"] = rng.normal(size=(world * B, N)) * 3
    return {k: torch.as_tensor(v) for k, v in batch.items()}


def local_part(batch: dict[str, torch.Tensor], rank: int, world: int) -> dict[str, torch.Tensor]:
    return {k: v.chunk(world)[rank] for k, v in batch.items()}


def gradient(model) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])


def rel(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).norm() / want.norm())
