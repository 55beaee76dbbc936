"""``contrastive``: coCondenser-style pre-training. Encoder MLM + Condenser-head MLM (a 2-layer head
reading the final [CLS] and an early layer's token states) + an in-batch contrastive loss between a
passage's [CLS] and its context's [CLS]. The context is a random span of the passage (the native
collator's ``span_input_ids``) or one of its LLM queries (``QueryTokens.context_batch``), both
given to the objective as ``ctx_input_ids`` / ``ctx_attention_mask``. Under data parallelism the
passages and contexts of every rank are gathered (``dense_pt.objectives.gather``: exact gradients),
so the other contexts of the global batch are the negatives; hence gradient accumulation is refused.
L = L_mlm + L_head + L_con, L_con = cross-entropy over dot-product scores / temperature."""

from __future__ import annotations

import torch

from dense_pt.models.decoders import LayerStack, bidirectional_keep
from dense_pt.models.heads import mlm_loss
from dense_pt.objectives.base import Objective
from dense_pt.objectives.retrieval import infonce_loss


class Contrastive(Objective):
    method = "contrastive"
    accumulation_safe = False

    def __init__(self, encoder, special, opts, temperature: float = 1.0):
        super().__init__(encoder, special, opts)
        n = encoder.config.num_hidden_layers
        self.early = int(opts.condenser_layer) if opts.condenser_layer is not None else max(1, n // 2)
        if not 1 <= self.early < n:
            raise ValueError(f"condenser_layer must lie in [1, {n - 1}] for a {n}-layer encoder")
        self.head = LayerStack(encoder, opts.decoder_layers, init="random")
        self.temperature = temperature

    def contrastive_loss(self, p: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        # InfoNCE over the global batch (passage i's positive is context i), exact under DDP
        return infonce_loss(p.float(), c.float(), self.temperature)

    def forward(self, batch):
        am = batch["attention_mask"]
        out = self.encode(batch["input_ids"], am, output_hidden_states=True)
        seq, early = out.last_hidden_state, out.hidden_states[self.early]
        cls = self.bottleneck_vector(seq, am)
        head_in = torch.cat([cls[:, None].to(early.dtype), early[:, 1:]], dim=1)
        head = self.head(head_in, bidirectional_keep(am))
        l_mlm = mlm_loss(self.lm_head, seq, batch["labels"])
        l_head = mlm_loss(self.lm_head, head, batch["labels"])
        ctx_am = batch["ctx_attention_mask"]
        ctx = self.bottleneck_vector(self.encode(batch["ctx_input_ids"], ctx_am).last_hidden_state, ctx_am)
        l_con = self.contrastive_loss(cls, ctx)
        return {
            "loss": l_mlm + l_head + l_con,
            "loss_enc": l_mlm.detach(),
            "loss_dec": l_head.detach(),
            "loss_con": l_con.detach(),
        }
