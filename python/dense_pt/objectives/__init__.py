"""Pre-training objectives, one module per method, and the registry that builds them.

``METHOD_DEFAULTS`` holds each paper's settings; ``resolve_options`` fills a ``MethodOptions``
with them, and ``build_objective`` assembles encoder + bottleneck + decoder/head + loss.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dense_pt.errors import InvalidArgumentError
from dense_pt.objectives.autoencoder import AutoEncoder
from dense_pt.objectives.base import MethodOptions, Objective, SpecialIds
from dense_pt.objectives.cdmae import CDMAE
from dense_pt.objectives.condenser import Condenser
from dense_pt.objectives.contrastive import Contrastive
from dense_pt.objectives.enc_dec_mlm import EncDecMLM
from dense_pt.objectives.enc_dec_rtd import EncDecRTD
from dense_pt.objectives.mlm import MLM
from dense_pt.objectives.querygen import QueryGen
from dense_pt.objectives.seed import SEED
from dense_pt.objectives.simlm import SimLM

METHODS: dict[str, type[Objective]] = {
    "simlm": SimLM,
    "cdmae": CDMAE,
    "seed": SEED,
    "mlm": MLM,
    "enc-dec-mlm": EncDecMLM,
    "enc-dec-rtd": EncDecRTD,
    "condenser": Condenser,
    "autoencoder": AutoEncoder,
    "querygen": QueryGen,
    "contrastive": Contrastive,
}

# Each paper's settings; p_dec None = the method has no separately masked decoder view.
METHOD_DEFAULTS: dict[str, dict[str, Any]] = {
    "simlm": dict(p_enc=0.3, p_dec=0.5, projection=False, decoder_layers=2, generator="joint"),
    "cdmae": dict(p_enc=0.3, p_dec=0.5, sigma=1.0, projection=True, decoder_layers=2),
    "seed": dict(p_enc=0.15, projection=False, decoder_layers=3, attention_span=2, seed_window="strict"),
    "mlm": dict(p_enc=0.3, projection=False),
    "enc-dec-mlm": dict(p_enc=0.3, p_dec=0.5, projection=False, decoder_layers=2),
    "enc-dec-rtd": dict(
        p_enc=0.3, p_dec=0.5, projection=False, decoder_layers=2, generator="joint", rtd_weight=50.0
    ),
    "condenser": dict(p_enc=0.15, projection=False, decoder_layers=2),
    "autoencoder": dict(p_enc=0.0, projection=False, decoder_layers=2),
    "querygen": dict(p_enc=0.3, projection=False, decoder_layers=1),
    "contrastive": dict(p_enc=0.15, projection=False, decoder_layers=2),
}

# Batch keys each method reads (the collator must provide them).
METHOD_KEYS: dict[str, tuple[str, ...]] = {
    "simlm": ("input_ids", "attention_mask", "enc_mask", "dec_mask"),
    "enc-dec-rtd": ("input_ids", "attention_mask", "enc_mask", "dec_mask"),
    "cdmae": ("input_ids", "attention_mask", "labels", "dec_input_ids", "dec_labels"),
    "enc-dec-mlm": ("input_ids", "attention_mask", "labels", "dec_input_ids", "dec_labels"),
    "seed": ("input_ids", "attention_mask", "labels", "dec_input_ids"),
    "mlm": ("input_ids", "attention_mask", "labels"),
    "condenser": ("input_ids", "attention_mask", "labels"),
    "autoencoder": ("input_ids", "attention_mask"),
    "querygen": (
        "input_ids",
        "attention_mask",
        "labels",
        "dec_input_ids",
        "dec_attention_mask",
        "dec_labels",
    ),
    "contrastive": ("input_ids", "attention_mask", "labels", "ctx_input_ids", "ctx_attention_mask"),
}


def check_method(method: str) -> str:
    if method not in METHODS:
        raise InvalidArgumentError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    return method


def resolve_options(method: str, opts: MethodOptions | None = None) -> MethodOptions:
    """Fill unset options with the method's defaults and validate the result."""
    check_method(method)
    opts = opts or MethodOptions()
    filled = {k: v for k, v in METHOD_DEFAULTS[method].items() if getattr(opts, k) is None}
    opts = dataclasses.replace(opts, **filled)
    for name in ("p_enc", "p_dec", "mask_prob", "random_prob"):
        v = getattr(opts, name)
        if v is not None and not 0 <= v <= 1:
            raise InvalidArgumentError(f"{name} must lie in [0, 1], got {v}")
    if opts.crop not in ("random", "head"):
        raise InvalidArgumentError(f"crop must be 'random' or 'head', got {opts.crop!r}")
    if opts.mask_prob + opts.random_prob > 1:
        raise InvalidArgumentError("mask_prob + random_prob must be <= 1")
    if opts.p_dec is not None and opts.p_enc is not None and method in ("simlm", "enc-dec-rtd"):
        if opts.p_enc > opts.p_dec:
            raise InvalidArgumentError(f"{method} nests the encoder mask in the decoder's: p_enc <= p_dec")
    if opts.sigma is not None and opts.sigma < 0:
        raise InvalidArgumentError(f"sigma must be >= 0, got {opts.sigma}")
    if opts.attention_span is not None and opts.attention_span < 1:
        raise InvalidArgumentError(f"attention_span must be >= 1, got {opts.attention_span}")
    if opts.seed_window is not None and opts.seed_window not in ("strict", "band"):
        raise InvalidArgumentError(f"seed_window must be 'strict' or 'band', got {opts.seed_window!r}")
    if opts.decoder_layers is not None and opts.decoder_layers < 1:
        raise InvalidArgumentError(f"decoder_layers must be >= 1, got {opts.decoder_layers}")
    if METHODS[method].uses_generator and not opts.generator:
        raise InvalidArgumentError(f"{method} needs --generator PATH or --generator joint")
    if not METHODS[method].uses_generator and opts.generator:
        raise InvalidArgumentError(f"{method} uses no generator; drop --generator")
    return opts


def build_objective(method: str, encoder, special: SpecialIds, opts: MethodOptions) -> Objective:
    """Assemble the objective around ``encoder`` (options already resolved)."""
    cls = METHODS[check_method(method)]
    if cls.uses_generator:
        from dense_pt.models.generator import Generator

        generator = Generator.load(opts.generator, encoder.config, special.vocab_size)
        return cls(encoder, special, opts, generator)
    return cls(encoder, special, opts)


__all__ = [
    "METHODS",
    "METHOD_DEFAULTS",
    "METHOD_KEYS",
    "MethodOptions",
    "Objective",
    "SpecialIds",
    "build_objective",
    "check_method",
    "resolve_options",
]
