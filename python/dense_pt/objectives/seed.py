"""``seed``: SEED-Encoder. The encoder does MLM at 15%; a 3-layer autoregressive decoder predicts
each token x_t from h_cls and only the previous k tokens (``--attention-span``, default 2).
L = L_MLM + L_dec, the decoder loss averaged over every predicted token (content tokens and the
closing [SEP]).

Two ways to restrict the decoder (``seed_window``):

- ``strict`` (default): P(x_t | h_cls, x_{t-k..t-1}) exactly, as the paper's equation states. Each
  target gets its own short sequence [h_cls, x_{t-k}, ..., x_{t-1}] (true position embeddings),
  run under an explicit causal attention mask; no information from outside the window can reach
  the prediction through any number of layers.
- ``band``: one pass over the whole sequence with an explicit band attention mask in every layer
  (position i holds x_i, sees position 0 and i-k+1..i, predicts x_{i+1}). Cheaper, but stacking n
  layers widens what a prediction can see to n(k-1)+1 tokens.
- ``released``: the architecture of the authors' code (microsoft/SEED-Encoder,
  ``TransformerDecoder`` with ``buffered_future_mask(x, local_attn_mask=k)``): the decoder reads the
  clean passage ([CLS] at position 0, the authors' first decoder token), self-attention under the
  same per-layer band mask (every position also sees position 0), and h_cls reaches every layer
  through cross-attention instead of sitting at position 0. The receptive field grows with depth
  as in ``band``: n(k-1)+1 tokens.
"""

from __future__ import annotations

import torch

from dense_pt.models.decoders import LayerStack, band_keep, padding_keep, with_bottleneck
from dense_pt.models.heads import mlm_loss
from dense_pt.objectives.base import Objective


class SEED(Objective):
    method = "seed"

    def __init__(self, encoder, special, opts):
        super().__init__(encoder, special, opts)
        self.window = opts.seed_window or "strict"
        if self.window not in ("strict", "band", "released"):
            raise ValueError(f"seed_window must be 'strict', 'band' or 'released', got {self.window!r}")
        self.decoder = LayerStack(
            encoder, opts.decoder_layers, init="random", cross_attention=self.window == "released"
        )
        self.span = int(opts.attention_span)

    def decode(self, h: torch.Tensor, original: torch.Tensor, am: torch.Tensor) -> torch.Tensor:
        """Decoder states [B, L, H]; state i is the prediction of token i+1 (the last is unused)."""
        if self.window == "strict":
            return self._decode_strict(h, original)
        keep = band_keep(original.shape[1], self.span, original.device) & padding_keep(am)
        if self.window == "band":
            return self.decoder(with_bottleneck(self.embed(original), h), keep)
        return self.decoder(self.embed(original), keep, memory=h[:, None, :])

    def _decode_strict(self, h: torch.Tensor, original: torch.Tensor) -> torch.Tensor:
        b, length = original.shape
        k, dev = self.span, original.device
        emb = self.embed(original)  # [B, L, H], true positions
        width = emb.shape[-1]
        targets = torch.arange(1, length, device=dev)  # token t is predicted from t-k .. t-1
        idx = targets[:, None] - k + torch.arange(k, device=dev)[None, :]  # [L-1, k]
        valid = idx >= 1  # position 0 ([CLS]) is represented by h_cls itself
        window = emb[:, idx.clamp(min=0)]  # [B, L-1, k, H]
        seq = torch.cat([h[:, None, None, :].to(emb.dtype).expand(b, length - 1, 1, width), window], dim=2)
        tokens_ok = torch.cat([torch.ones_like(valid[:, :1]), valid], dim=1)  # [L-1, k+1]
        causal = torch.ones(k + 1, k + 1, dtype=torch.bool, device=dev).tril()
        keep = causal[None] & tokens_ok[:, None, :]  # [L-1, k+1, k+1]
        keep = keep | torch.eye(k + 1, dtype=torch.bool, device=dev)[None]  # no empty rows
        keep = keep[None].expand(b, -1, -1, -1).reshape(b * (length - 1), 1, k + 1, k + 1)
        out = self.decoder(seq.reshape(b * (length - 1), k + 1, width), keep)[:, -1]
        out = out.reshape(b, length - 1, width)
        return torch.cat([out, torch.zeros_like(out[:, :1])], dim=1)

    def next_token_labels(self, original: torch.Tensor, am: torch.Tensor) -> torch.Tensor:
        nxt = original[:, 1:].masked_fill(~am[:, 1:].bool(), -100)
        return torch.cat([nxt, torch.full_like(original[:, :1], -100)], dim=1)

    def forward(self, batch):
        am = batch["attention_mask"]
        seq = self.encode(batch["input_ids"], am).last_hidden_state
        l_mlm = mlm_loss(self.lm_head, seq, batch["labels"])
        original = batch["dec_input_ids"]  # the collator's clean view of the passage
        dec = self.decode(self.bottleneck_vector(seq, am), original, am)
        l_dec = mlm_loss(self.lm_head, dec, self.next_token_labels(original, am))
        return {"loss": l_mlm + l_dec, "loss_enc": l_mlm.detach(), "loss_dec": l_dec.detach()}
