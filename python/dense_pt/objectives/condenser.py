"""``condenser``: Condenser. MLM on the encoder's output, plus MLM through a 2-layer randomly
initialised head whose input is the final [CLS] state followed by the token states of an early
layer (``condenser_layer``, default the middle one), so late-layer information must flow through
[CLS]. Both through the shared LM head; L = L_mlm + L_head."""

from __future__ import annotations

import torch

from dense_pt.models.decoders import LayerStack, bidirectional_keep
from dense_pt.models.heads import mlm_loss
from dense_pt.objectives.base import Objective


class Condenser(Objective):
    method = "condenser"

    def __init__(self, encoder, special, opts):
        super().__init__(encoder, special, opts)
        n = encoder.config.num_hidden_layers
        self.early = int(opts.condenser_layer) if opts.condenser_layer is not None else max(1, n // 2)
        if not 1 <= self.early < n:
            raise ValueError(f"condenser_layer must lie in [1, {n - 1}] for a {n}-layer encoder")
        self.head = LayerStack(encoder, opts.decoder_layers, init="random")

    def forward(self, batch):
        am = batch["attention_mask"]
        out = self.encode(batch["input_ids"], am, output_hidden_states=True)
        seq = out.last_hidden_state
        early = out.hidden_states[self.early]  # hidden_states[0] is the embedding output
        head_in = torch.cat([self.bottleneck_vector(seq, am)[:, None].to(early.dtype), early[:, 1:]], dim=1)
        head = self.head(head_in, bidirectional_keep(am))
        l_mlm = mlm_loss(self.lm_head, seq, batch["labels"])
        l_head = mlm_loss(self.lm_head, head, batch["labels"])
        return {"loss": l_mlm + l_head, "loss_enc": l_mlm.detach(), "loss_dec": l_head.detach()}
