"""Shallow decoders that read the encoder's bottleneck: a stack of the encoder's own layer class
driven by an explicit attention mask, fed token embeddings whose position 0 is the bottleneck
vector. Variants:

- ``from_encoder_layers``: copies of the encoder's last n layers (SimLM's decoder);
- ``random``: n freshly initialised layers (CDMAE, SEED, the Condenser head);
- ``cross_attention=True``: the layers are built as decoder layers that also attend to a
  ``memory`` (the bottleneck) through cross-attention in every layer (SEED-Encoder's released
  decoder);
- band attention (SEED): position i sees position 0 and the k positions i-k+1..i.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from dense_pt.models.encoder import layer_mask, padding_keep


def init_like_bert(module: nn.Module, std: float) -> None:
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


class LayerStack(nn.Module):
    """n Transformer layers of the encoder's class, run with an explicit [B|1, 1, L, L] keep mask."""

    def __init__(
        self, encoder: nn.Module, num_layers: int, init: str = "random", cross_attention: bool = False
    ):
        super().__init__()
        if num_layers < 1:
            raise ValueError("a decoder needs at least one layer")
        enc_layers = encoder.encoder.layer
        if cross_attention and init != "random":
            raise ValueError("cross-attention layers start random")
        if cross_attention:
            layers = cross_attention_layers(encoder, num_layers)
        elif init == "copy_last":
            if num_layers > len(enc_layers):
                raise ValueError(f"cannot copy {num_layers} layers from a {len(enc_layers)}-layer encoder")
            layers = [copy.deepcopy(layer) for layer in enc_layers[len(enc_layers) - num_layers :]]
        elif init == "random":
            layers = [copy.deepcopy(enc_layers[-1]) for _ in range(num_layers)]
            for layer in layers:
                init_like_bert(layer, encoder.config.initializer_range)
        else:
            raise ValueError(f"unknown decoder init {init!r}")
        self.layers = nn.ModuleList(layers)
        self.config = copy.deepcopy(encoder.config)
        self.config.num_hidden_layers = num_layers
        self.init = init
        self.cross_attention = cross_attention

    def attn_implementation(self) -> str:
        """What the layers actually run (each deep-copied layer holds its own config)."""
        for m in self.layers[0].modules():
            cfg = getattr(m, "config", None)
            if cfg is not None and hasattr(cfg, "_attn_implementation"):
                return cfg._attn_implementation or "sdpa"
        return self.config._attn_implementation or "sdpa"

    def forward(
        self, hidden: torch.Tensor, keep: torch.Tensor, memory: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``keep`` [B|1, 1, L, L] bool: who attends to whom; ``memory`` [B, M, H]: what the
        cross-attention reads (layers built with ``cross_attention=True`` only)."""
        if (memory is not None) != self.cross_attention:
            raise ValueError("memory is given exactly to cross-attention layers")
        mask = layer_mask(keep, hidden, self.attn_implementation())
        extra = {} if memory is None else {"encoder_hidden_states": memory.to(hidden.dtype)}
        for layer in self.layers:
            out = layer(hidden, mask, **extra)
            hidden = out[0] if isinstance(out, tuple) else out
        return hidden

    def describe(self) -> dict[str, Any]:
        return {
            "num_layers": len(self.layers),
            "init": self.init,
            "cross_attention": self.cross_attention,
            "layer_config": self.config.to_dict(),
        }


def cross_attention_layers(encoder: nn.Module, num_layers: int) -> list[nn.Module]:
    """``num_layers`` random layers of the encoder's class built as decoder layers with
    cross-attention (Hugging Face's ``is_decoder`` + ``add_cross_attention``). Their self-attention
    follows only the explicit mask the stack passes (no implicit causal mask)."""
    cfg = copy.deepcopy(encoder.config)
    cfg.is_decoder, cfg.add_cross_attention = True, True
    layer_cls = type(encoder.encoder.layer[-1])
    layers = [layer_cls(cfg) for _ in range(num_layers)]
    for layer in layers:
        if not hasattr(layer, "crossattention"):
            raise ValueError(
                f"{layer_cls.__name__} has no cross-attention; the released SEED decoder needs it"
            )
        for m in layer.modules():
            if hasattr(m, "is_causal"):
                m.is_causal = False
        init_like_bert(layer, encoder.config.initializer_range)
    return layers


def band_keep(length: int, span: int, device: torch.device | None = None) -> torch.Tensor:
    """SEED's attention pattern as bool [1, 1, L, L]: row i keeps column 0 (the bottleneck) and the
    columns max(1, i-span+1) .. i, i.e. the previous ``span`` tokens including the current input."""
    i = torch.arange(length, device=device)[:, None]
    j = torch.arange(length, device=device)[None, :]
    keep = ((j <= i) & (j > i - span) & (j >= 1)) | (j == 0)
    return keep[None, None]


def with_bottleneck(embeddings: torch.Tensor, bottleneck: torch.Tensor) -> torch.Tensor:
    """Replace position 0 of the decoder's input embeddings by the bottleneck vector (no in-place
    write, so autograd sees both paths)."""
    return torch.cat([bottleneck[:, None, :].to(embeddings.dtype), embeddings[:, 1:]], dim=1)


def bidirectional_keep(attention_mask: torch.Tensor) -> torch.Tensor:
    return padding_keep(attention_mask)
