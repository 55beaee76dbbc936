"""``contrastive``: coCondenser-style pre-training. Encoder MLM + Condenser-head MLM (a 2-layer head
reading the final [CLS] and an early layer's token states) + an in-batch contrastive loss between a
passage's [CLS] and its context's [CLS]. The context is a random span of the passage (the native
collator's ``span_input_ids``) or one of its LLM queries (``QueryTokens.context_batch``), both
given to the objective as ``ctx_input_ids`` / ``ctx_attention_mask``. Under data parallelism the
passages and contexts of every rank are gathered (``dense_pt.objectives.gather``: exact gradients),
so the other contexts of the global batch are the negatives; hence gradient accumulation is refused.
L = L_mlm + L_head + L_con, L_con = cross-entropy over dot-product scores / temperature.

With ``cache_chunk`` (``dense_pt.training.cache``) the passages and contexts are encoded a chunk at
a time: L_con is computed once over every [CLS] vector of the batch, and each passage chunk's MLM
terms are back-propagated with it, as coCondenser's GradCache trainer does. Each chunk's MLM terms
are its token losses summed over the *batch's* count of target tokens, so the chunks add up to the
batch's mean and the gradient is the uncached one (coCondenser adds each chunk's own mean, which
weighs the MLM term by the number of chunks)."""

from __future__ import annotations

import torch

from dense_pt.models.decoders import LayerStack, bidirectional_keep
from dense_pt.models.heads import mlm_loss
from dense_pt.objectives.base import Objective
from dense_pt.objectives.retrieval import infonce_loss
from dense_pt.training.cache import CachedLoss


class Contrastive(CachedLoss, Objective):
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
        # InfoNCE over the global batch (passage i's positive is context i), exact under DDP; in
        # float32 with autocast off (fp32_scores)
        return infonce_loss(p, c, self.temperature)

    # --- CachedLoss: L_con reads the [CLS] vectors only; the MLM terms are per row ------------

    def cache_parts(self, batch):
        return {
            "passages": {
                "ids": batch["input_ids"],
                "mask": batch["attention_mask"],
                "labels": batch["labels"],
            },
            "contexts": {"ids": batch["ctx_input_ids"], "mask": batch["ctx_attention_mask"]},
        }

    def represent(self, part, rows, batch, terms):
        am = rows["mask"]
        if part == "contexts":
            return {"rep": self.bottleneck_vector(self.encode(rows["ids"], am).last_hidden_state, am)}
        out = self.encode(rows["ids"], am, output_hidden_states=terms)
        cls = self.bottleneck_vector(out.last_hidden_state, am)
        if not terms:  # everything below draws its dropout after the vector: skipping it is safe
            return {"rep": cls}
        early = out.hidden_states[self.early]
        head_in = torch.cat([cls[:, None].to(early.dtype), early[:, 1:]], dim=1)
        head = self.head(head_in, bidirectional_keep(am))
        # token means over the whole batch's targets: the chunks' terms add up to the batch's
        labels = rows["labels"]
        l_mlm, l_head = (
            mlm_loss(self.lm_head, out.last_hidden_state, labels),
            mlm_loss(self.lm_head, head, labels),
        )
        here, whole = (labels != -100).sum(), (batch["labels"] != -100).sum().clamp(min=1)
        share = here.to(l_mlm.dtype) / whole.to(l_mlm.dtype)
        return {"rep": cls, "loss_enc": l_mlm * share, "loss_dec": l_head * share}

    def coupled_loss(self, reps, batch):
        l_con = self.contrastive_loss(reps["passages"], reps["contexts"])
        return {"loss": l_con, "loss_con": l_con.detach()}
