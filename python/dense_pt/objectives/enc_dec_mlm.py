"""``enc-dec-mlm``: SimLM's architecture without the generator (SimLM's ablation): the encoder does
MLM on a 30% mask, the decoder (2 layers copied from the encoder's last two, [CLS] vector at
position 0) does MLM on a 50% mask; losses over masked tokens, L = L_enc + L_dec."""

from __future__ import annotations

from dense_pt.objectives.cdmae import CDMAE


class EncDecMLM(CDMAE):
    method = "enc-dec-mlm"
    decoder_init = "copy_last"
