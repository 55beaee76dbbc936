"""``simlm``: SimLM's replaced language modelling (eq. 1). From nested masks (enc a subset of dec,
30% / 50%) the generator is run TWICE: on the encoder's view (its masked positions filled, by
default all [MASK]) it samples x_enc's replacements, on the decoder's view x_dec's, as the
authors' ``rlm.py`` does (``_replace_tokens`` on ``enc_`` and on ``dec_`` inputs). So the two
inputs hold independent samples even where their masks overlap, and no [MASK] reaches either.
The encoder and the 2-layer decoder (copies of the encoder's last two layers, bidirectional,
[CLS] vector at position 0) both predict the original token at every non-special position.
L = L_enc + L_dec (+ w * L_gen for a joint generator, its MLM loss on the encoder's view only, as
in the authors' code; w = ``generator_weight``)."""

from __future__ import annotations

import torch

from dense_pt.models.decoders import LayerStack, bidirectional_keep, with_bottleneck
from dense_pt.models.generator import ElectraGenerator
from dense_pt.models.heads import mlm_loss
from dense_pt.objectives.base import Objective


class ReplacedViews(Objective):
    """The generator plumbing shared by ``simlm`` and ``enc-dec-rtd``."""

    uses_generator = True

    def __init__(self, encoder, special, opts, generator: ElectraGenerator):
        super().__init__(encoder, special, opts)
        self.generator = generator
        self.decoder = LayerStack(encoder, opts.decoder_layers, init="copy_last")

    def make_views(self, batch):
        """(original, x_enc, x_dec, generator loss). The collator gives ``original_ids``, the
        generator's two inputs (``input_ids``: the encoder's view, ``dec_input_ids``: the
        decoder's) and the masks ``enc_mask`` within ``dec_mask``."""
        original, am = batch["original_ids"], batch["attention_mask"]
        enc_mask, dec_mask = batch["enc_mask"].bool(), batch["dec_mask"].bool()
        args = (original, self.banned_ids, self.special.vocab_size)
        x_enc, l_gen = self.generator.sample(batch["input_ids"], am, enc_mask, *args, with_loss=True)
        x_dec, _ = self.generator.sample(batch["dec_input_ids"], am, dec_mask, *args)
        return original, x_enc, x_dec, l_gen

    def generator_loss(self, l_gen):
        if not self.generator.joint:
            return 0.0
        w = self.opts.generator_weight
        assert w is not None, "resolve_options fills generator_weight"
        return float(w) * l_gen

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
        dec = self.run_decoder(self.bottleneck_vector(seq, am), x_dec, am)
        l_dec = mlm_loss(self.lm_head, dec, targets)
        out = {
            "loss": l_enc + l_dec + self.generator_loss(l_gen),
            "loss_enc": l_enc.detach(),
            "loss_dec": l_dec.detach(),
        }
        if self.generator.joint:
            out["loss_gen"] = l_gen.detach()
        return out
