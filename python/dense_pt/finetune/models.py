"""The trainable modules of the fine-tuning stages, following the engine's contract
``model(batch) -> {"loss": scalar, ...}``. Both couple the examples of a batch (in-batch negatives,
listwise groups), so ``accumulation_safe = False`` (but for the triplet loss, which reads each
query's own group only). The bi-encoder's loss reads the batch only through the query and passage
vectors, so it declares them (``CachedLoss``) and ``cache_chunk`` computes its exact gradient a
chunk of sequences at a time."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dense_pt.config.choices import DEFAULT_RERANKER_LOSS, resolve_forward_factor
from dense_pt.config.defaults import finetune as FT
from dense_pt.models.unpad import Unpadded, encode_tokens, sequence_logits
from dense_pt.objectives.retrieval import (
    DEFAULT_LOSS,
    LOSSES,
    distill_loss,
    listwise_rerank_loss,
    rdrop_listwise_loss,
    resolve_loss,
    select_top_group,
    triplet_loss,
)
from dense_pt.retrieval.encoder import pool
from dense_pt.training.cache import CachedLoss

RETRIEVER_LOSSES = tuple(LOSSES)


class BiEncoder(CachedLoss, Unpadded, nn.Module):
    """One encoder shared by queries and passages, [CLS] or mean pooling. ``loss`` names a
    retriever loss (``dense_pt.objectives.retrieval.LOSSES``); with teacher scores in the batch it
    is distillation's contrastive term. ``tau=None`` takes the loss's own temperature."""

    def __init__(
        self, backbone: nn.Module, pooling: str = "cls", loss: str = DEFAULT_LOSS, tau: float | None = None,
        margin: float = 1.0, alpha: float = FT.ALPHA,
    ):  # fmt: skip
        super().__init__()
        self.spec = resolve_loss(loss)
        self.backbone, self.pooling, self.loss_name = backbone, pooling, loss
        self.tau = self.spec.resolve_tau(tau)
        self.margin, self.alpha = margin, alpha

    @property
    def accumulation_safe(self) -> bool:
        """Micro-batches average to the batch's loss only when no term reads another query's rows."""
        return self.loss_name == "triplet"

    @property
    def normalize(self) -> bool:
        """Cosine-trained models are exported with a Normalize module (scores = cosine): it follows
        the similarity the loss trains, for distillation too."""
        return self.spec.similarity == "cosine"

    def unpad_models(self) -> list[nn.Module]:
        return [self.backbone]

    def encode(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        hidden = encode_tokens(self.backbone, ids, mask, unpad=self.unpad).last_hidden_state
        return pool(hidden, mask, self.pooling, normalize=False)

    # --- CachedLoss: the loss reads the query and passage vectors only -------------------------

    def cache_parts(self, batch: dict[str, Any]) -> dict[str, dict[str, torch.Tensor]]:
        return {
            "q": {"ids": batch["q_ids"], "mask": batch["q_mask"]},
            "p": {"ids": batch["p_ids"], "mask": batch["p_mask"]},
        }

    def represent(self, part: str, rows: dict[str, torch.Tensor], batch: dict[str, Any], terms: bool):
        return {"rep": self.encode(rows["ids"], rows["mask"])}

    def coupled_loss(self, reps: dict[str, torch.Tensor], batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        q, p = reps["q"], reps["p"]  # each loss computes in float32 (fp32_scores)
        if "teacher" in batch:
            loss = distill_loss(q, p, batch["teacher"], self.alpha, self.tau, self.loss_name)
        elif self.loss_name == "triplet":
            loss = triplet_loss(q, p, self.margin)
        else:
            loss = self.spec.fn(q, p, self.tau)
        return {"loss": loss}


class CrossEncoder(Unpadded, nn.Module):
    """A sequence-classification model with one logit over [CLS] query [SEP] passage [SEP].

    ``loss="listwise"``: SimLM eq. 4 over every passage of the group. ``loss="simlm"`` (the
    authors' code): the group is scored once without gradients and with dropout off, the positive
    and the highest-scoring negatives, ``group_size // forward_factor`` in all, are kept, and the
    kept pairs go through the model twice (one batch, independent dropout) for the R-Drop loss."""

    accumulation_safe = False

    def __init__(
        self, model: nn.Module, group_size: int, loss: str = DEFAULT_RERANKER_LOSS, forward_factor: int | None = None
    ):  # fmt: skip
        super().__init__()
        self.model, self.group_size, self.loss = model, group_size, loss
        self.forward_factor = resolve_forward_factor(loss, forward_factor)
        self.keep = group_size // self.forward_factor

    def unpad_models(self) -> list[nn.Module]:
        return [self.model]

    def logits(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        return sequence_logits(self.model, ids, mask, types, unpad=self.unpad)[:, 0]

    def select(self, x: tuple[torch.Tensor, ...]) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        """The rows of the pairs the step trains on (the positive and the top-scoring negatives of
        each group), and their indices [B, keep] within the groups."""
        n = self.group_size
        was = self.model.training
        self.model.eval()
        with torch.no_grad():
            scores = self.logits(*x).float().view(-1, n)
        self.model.train(was)
        picked = select_top_group(scores, self.keep)
        rows = (picked + n * torch.arange(picked.shape[0], device=picked.device)[:, None]).reshape(-1)
        return tuple(t.index_select(0, rows) for t in x), picked

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        x = (batch["x_ids"], batch["x_mask"], batch["x_types"])
        if self.loss == "listwise":
            logits = self.logits(*x).float()
            return {"loss": listwise_rerank_loss(logits.view(-1, self.group_size))}
        if self.keep < self.group_size:
            x, _ = self.select(x)
        twice = self.logits(*(torch.cat([t, t]) for t in x)).float().view(2, -1, self.keep)
        return {"loss": rdrop_listwise_loss(twice[0], twice[1])}


def load_cross_encoder(init: str, num_labels: int = 1) -> nn.Module:
    """A local checkpoint folder (its classifier head is new unless it has one) or a config.json."""
    from pathlib import Path

    from transformers import AutoConfig, AutoModelForSequenceClassification

    path = Path(init)
    if path.is_file():
        cfg = AutoConfig.from_pretrained(str(path), num_labels=num_labels)
        return AutoModelForSequenceClassification.from_config(cfg)
    return AutoModelForSequenceClassification.from_pretrained(
        str(path), num_labels=num_labels, local_files_only=True
    )


__all__ = ["RETRIEVER_LOSSES", "BiEncoder", "CrossEncoder", "load_cross_encoder"]
