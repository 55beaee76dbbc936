"""``autoencoder``: SimLM's auto-encoding ablation. The encoder reads the unmasked passage; the
decoder (SimLM's: 2 layers copied from the encoder's last two) reads [MASK] at every non-special
position and the [CLS] vector at position 0, and must reconstruct every token from the bottleneck
alone. L = L_dec."""

from __future__ import annotations

from dense_pt.models.decoders import LayerStack, bidirectional_keep, with_bottleneck
from dense_pt.models.heads import mlm_loss
from dense_pt.objectives.base import Objective


class AutoEncoder(Objective):
    method = "autoencoder"

    def __init__(self, encoder, special, opts):
        super().__init__(encoder, special, opts)
        self.decoder = LayerStack(encoder, opts.decoder_layers, init="copy_last")

    def forward(self, batch):
        am = batch["attention_mask"]
        original = batch["input_ids"]
        targets = self.every_token_labels(batch, original)
        seq = self.encode(original, am).last_hidden_state
        dec_ids = original.masked_fill(targets != -100, self.special.mask)
        dec_in = with_bottleneck(self.embed(dec_ids), self.bottleneck_vector(seq, am))
        dec = self.decoder(dec_in, bidirectional_keep(am))
        l_dec = mlm_loss(self.lm_head, dec, targets)
        return {"loss": l_dec, "loss_dec": l_dec.detach()}
