"""``simlm``: SimLM's replaced language modelling. From nested masks (enc a subset of dec, 30% / 50%)
a generator samples one replacement per decoder-masked position; x_enc takes the samples at the
encoder positions, x_dec at all decoder positions, so no [MASK] appears in either input. The
encoder and the 2-layer decoder (copies of the encoder's last two layers, bidirectional, [CLS]
vector at position 0) both predict the original token at every non-special position.
L = L_enc + L_dec (+ the joint generator's MLM loss)."""

from __future__ import annotations

import torch

from dense_pt.models.decoders import LayerStack, bidirectional_keep, with_bottleneck
from dense_pt.models.generator import Generator
from dense_pt.models.heads import mlm_loss
from dense_pt.objectives.base import Objective


class ReplacedViews(Objective):
    """The generator plumbing shared by ``simlm`` and ``enc-dec-rtd``."""

    uses_generator = True

    def __init__(self, encoder, special, opts, generator: Generator):
        super().__init__(encoder, special, opts)
        self.generator = generator
        self.decoder = LayerStack(encoder, opts.decoder_layers, init="copy_last")

    def make_views(self, batch):
        """(original, x_enc, x_dec, generator loss). Inputs: ORIGINAL ``input_ids`` and the
        collator's ``enc_mask`` / ``dec_mask``."""
        original = batch["input_ids"]
        enc_mask, dec_mask = batch["enc_mask"].bool(), batch["dec_mask"].bool()
        # The invariant holds by construction: encoder positions are decoder positions.
        dec_mask = dec_mask | enc_mask
        sampled, l_gen = self.generator.sample(
            original,
            batch["attention_mask"],
            dec_mask,
            self.special.mask,
            self.banned_ids,
            self.special.vocab_size,
        )
        x_enc = torch.where(enc_mask, sampled, original)
        return original, x_enc, sampled, l_gen

    def run_decoder(self, h: torch.Tensor, x_dec: torch.Tensor, am: torch.Tensor) -> torch.Tensor:
        return self.decoder(with_bottleneck(self.embed(x_dec), h), bidirectional_keep(am))

    def describe(self):
        d = super().describe()
        d["generator"] = "joint" if self.generator.joint else self.opts.generator
        return d


class SimLM(ReplacedViews):
    method = "simlm"

    def forward(self, batch):
        am = batch["attention_mask"]
        original, x_enc, x_dec, l_gen = self.make_views(batch)
        targets = self.every_token_labels(batch, original)
        seq = self.encode(x_enc, am).last_hidden_state
        l_enc = mlm_loss(self.lm_head, seq, targets)
        dec = self.run_decoder(self.bottleneck(seq[:, 0]), x_dec, am)
        l_dec = mlm_loss(self.lm_head, dec, targets)
        out = {"loss": l_enc + l_dec + l_gen, "loss_enc": l_enc.detach(), "loss_dec": l_dec.detach()}
        if self.generator.joint:
            out["loss_gen"] = l_gen.detach()
        return out
