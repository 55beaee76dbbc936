"""``querygen``: pre-training with LLM-generated queries (query generation). Encoder MLM plus a
1-layer Transformer decoder that generates the passage's LLM queries with a causal LM loss,
conditioned only on the encoder's [CLS]: the decoder's input is ``[h_cls, q_1 .. q_N, SEP]``
(``dense_pt.expansion.query_data.QueryTokens.decoder_batch``: position 0 is a slot replaced by h_cls,
queries separated by [SEP]) under a causal attention mask; it never sees a passage token, so the
passage reaches it only through h_cls. Shared (tied) LM head; L = L_enc + L_dec."""

from __future__ import annotations

import torch

from dense_pt.models.decoders import LayerStack, with_bottleneck
from dense_pt.models.heads import mlm_loss
from dense_pt.objectives.base import Objective


def causal_keep(attention_mask: torch.Tensor) -> torch.Tensor:
    """bool [B, 1, T, T]: position i attends to positions j <= i that are not padding."""
    t = attention_mask.shape[1]
    tri = torch.ones(t, t, dtype=torch.bool, device=attention_mask.device).tril()
    return tri[None, None] & attention_mask.bool()[:, None, None, :]


class QueryGen(Objective):
    method = "querygen"

    def __init__(self, encoder, special, opts):
        super().__init__(encoder, special, opts)
        self.decoder = LayerStack(encoder, opts.decoder_layers, init="random")

    def decoder_loss(self, h_cls: torch.Tensor, batch) -> torch.Tensor:
        dec_in = with_bottleneck(self.embed(batch["dec_input_ids"]), h_cls)
        hidden = self.decoder(dec_in, causal_keep(batch["dec_attention_mask"]))
        return mlm_loss(self.lm_head, hidden, batch["dec_labels"])

    def forward(self, batch):
        seq = self.encode(batch["input_ids"], batch["attention_mask"]).last_hidden_state
        l_enc = mlm_loss(self.lm_head, seq, batch["labels"])
        l_dec = self.decoder_loss(self.bottleneck_vector(seq, batch["attention_mask"]), batch)
        return {"loss": l_enc + l_dec, "loss_enc": l_enc.detach(), "loss_dec": l_dec.detach()}
