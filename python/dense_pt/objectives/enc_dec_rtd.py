"""``enc-dec-rtd``: SimLM's architecture trained with ELECTRA's replaced-token detection on both
sides: the generator's samples make x_enc and x_dec as in ``simlm``, and the encoder and the decoder
each classify every non-special token as replaced or original (binary cross-entropy, averaged over
those tokens). L = w (L_enc + L_dec) + w_gen L_gen, w = ``rtd_weight`` (ELECTRA's 50), w_gen =
``generator_weight`` (a joint generator only)."""

from __future__ import annotations

import torch.nn.functional as F

from dense_pt.models.heads import RTDHead
from dense_pt.objectives.simlm import ReplacedViews


class EncDecRTD(ReplacedViews):
    method = "enc-dec-rtd"

    def __init__(self, encoder, special, opts, generator):
        super().__init__(encoder, special, opts, generator)
        act = getattr(encoder.config, "hidden_act", "gelu")
        self.rtd_enc = RTDHead(self.hidden, act)
        self.rtd_dec = RTDHead(self.hidden, act)

    def forward(self, batch):
        am = batch["attention_mask"]
        original, x_enc, x_dec, l_gen = self.make_views(batch)
        where = am.bool() & ~self.special_mask(batch, original)
        seq = self.encode(x_enc, am).last_hidden_state
        dec = self.run_decoder(self.bottleneck_vector(seq, am), x_dec, am)
        l_enc = F.binary_cross_entropy_with_logits(
            self.rtd_enc(seq[where]).float(), (x_enc != original)[where].float()
        )
        l_dec = F.binary_cross_entropy_with_logits(
            self.rtd_dec(dec[where]).float(), (x_dec != original)[where].float()
        )
        assert self.opts.rtd_weight is not None, "resolve_options fills rtd_weight"
        w = float(self.opts.rtd_weight)
        out = {
            "loss": w * (l_enc + l_dec) + self.generator_loss(l_gen),
            "loss_enc": l_enc.detach(),
            "loss_dec": l_dec.detach(),
        }
        if self.generator.joint:
            out["loss_gen"] = l_gen.detach()
        return out
