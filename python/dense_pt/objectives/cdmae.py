"""``cdmae``: contextual masked auto-encoding (CDMAE). The encoder does MLM on a random 30% mask
(80/10/10); the bottleneck h_b = W h_cls + b (``--no-projection``: h_cls) is position 0 of a
2-layer randomly initialised decoder whose input hides the 50% most important tokens (importance
plus N(0, sigma^2) noise, chosen by the collator); both predict through the shared LM head, each
loss averaged over its masked tokens: L = L_enc + L_dec."""

from __future__ import annotations

from dense_pt.models.decoders import LayerStack, bidirectional_keep, with_bottleneck
from dense_pt.models.heads import mlm_loss
from dense_pt.objectives.base import Objective


class CDMAE(Objective):
    method = "cdmae"
    decoder_init = "random"

    def __init__(self, encoder, special, opts):
        super().__init__(encoder, special, opts)
        self.decoder = LayerStack(encoder, opts.decoder_layers, init=self.decoder_init)

    def forward(self, batch):
        am = batch["attention_mask"]
        seq = self.encode(batch["input_ids"], am).last_hidden_state
        l_enc = mlm_loss(self.lm_head, seq, batch["labels"])
        h_b = self.bottleneck_vector(seq, am)
        dec_in = with_bottleneck(self.embed(batch["dec_input_ids"]), h_b)
        dec = self.decoder(dec_in, bidirectional_keep(am))
        l_dec = mlm_loss(self.lm_head, dec, batch["dec_labels"])
        return {"loss": l_enc + l_dec, "loss_enc": l_enc.detach(), "loss_dec": l_dec.detach()}
