"""What every pre-training objective shares: the encoder, the bottleneck, the LM head tied to the
input embeddings, the special-token ids, and how the pieces beside the encoder are saved."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

from dense_pt.models.heads import MLMHead
from dense_pt.models.unpad import Unpadded, encode_tokens
from dense_pt.objectives.options import MethodOptions, SpecialIds

__all__ = ["MethodOptions", "Objective", "SpecialIds"]


class Objective(Unpadded, nn.Module):
    """Base class: ``forward(batch) -> {"loss", "loss_enc", ...}`` on a dict of device tensors."""

    method: ClassVar[str] = "?"
    uses_generator: ClassVar[bool] = False
    accumulation_safe: ClassVar[bool] = True

    def __init__(self, encoder: nn.Module, special: SpecialIds, opts: MethodOptions):
        super().__init__()
        cfg = encoder.config
        if opts.pooling == "auto":  # built around an encoder in memory: the folder it was loaded from
            from dense_pt.objectives.options import resolve_pooling

            opts = resolve_pooling(opts, getattr(cfg, "_name_or_path", None))
        self.encoder = encoder
        self.special = special
        self.opts = opts
        self.hidden = int(cfg.hidden_size)
        self.lm_head = MLMHead(
            self.hidden,
            encoder.get_input_embeddings(),
            act=getattr(cfg, "hidden_act", "gelu"),
            eps=getattr(cfg, "layer_norm_eps", 1e-12),
        )
        self.bottleneck = nn.Linear(self.hidden, self.hidden) if opts.projection else nn.Identity()
        self.register_buffer("banned_ids", torch.tensor(special.all(), dtype=torch.long), persistent=False)

    # --- shared pieces -------------------------------------------------------------------------

    def unpad_models(self) -> list[nn.Module]:
        return [self.encoder]

    def encode(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, output_hidden_states: bool = False
    ):
        """The encoder's output (``last_hidden_state`` [B, L, H]), padded or packed (``unpad``)."""
        return encode_tokens(
            self.encoder,
            input_ids,
            attention_mask,
            unpad=self.unpad,
            output_hidden_states=output_hidden_states,
        )

    def pooled(self, seq: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The last layer pooled as the checkpoint pools (``pooling``: [CLS] as in the papers, or the
        attention-masked mean of a sentence model): the vector encoding will produce."""
        if self.opts.pooling == "mean":
            m = attention_mask.unsqueeze(-1).to(seq.dtype)
            return (seq * m).sum(1) / m.sum(1).clamp(min=1)
        if self.opts.pooling in (None, "cls"):
            return seq[:, 0]
        raise ValueError(f"unresolved bottleneck pooling {self.opts.pooling!r}")  # "auto" unresolved

    def bottleneck_vector(self, seq: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """What the decoder (or head, or contrastive loss) reads: the pooled vector, projected."""
        return self.bottleneck(self.pooled(seq, attention_mask))

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The encoder's own input embeddings (word + position + type, normalised): decoders share them."""
        return self.encoder.embeddings(input_ids=input_ids)

    def special_mask(self, batch: dict[str, torch.Tensor], ids: torch.Tensor) -> torch.Tensor:
        if "special_tokens_mask" in batch:
            return batch["special_tokens_mask"].bool()
        return torch.isin(ids, self.banned_ids)

    def every_token_labels(self, batch: dict[str, torch.Tensor], original: torch.Tensor) -> torch.Tensor:
        """Original ids at every non-special, non-pad position, -100 elsewhere."""
        keep = batch["attention_mask"].bool() & ~self.special_mask(batch, original)
        return original.masked_fill(~keep, -100)

    # --- saving --------------------------------------------------------------------------------

    def sidecar_state(self) -> dict[str, torch.Tensor]:
        """Everything trained besides the encoder (and a joint generator, saved as its own model)."""
        return {
            k: v.detach().contiguous()
            for k, v in self.state_dict().items()
            if not k.startswith("encoder.") and not k.startswith("generator.")
        }

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "options": self.opts.to_dict(), "hidden_size": self.hidden}
