"""The objectives' options and their validation, without torch: ``MethodOptions`` (every field
``None`` = "the method's default"), ``resolve_options`` (fills them from the method's declared
defaults in ``dense_pt.objectives.defaults`` and checks them), the special token ids, and the batch
keys each method reads."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from typing import Any

from dense_pt.errors import InvalidArgumentError
from dense_pt.objectives.defaults import REQUIRED, profile

# The methods, in the order the CLI lists them.
METHODS: tuple[str, ...] = (
    "simlm",
    "cdmae",
    "seed",
    "mlm",
    "enc-dec-mlm",
    "enc-dec-rtd",
    "condenser",
    "autoencoder",
    "querygen",
    "contrastive",
)

SEED_WINDOWS = ("strict", "band", "released")
# What the bottleneck reads: "auto" = the checkpoint's own pooling, resolved to one of the others by
# ``resolve_pooling`` before the objective is built.
BOTTLENECK_POOLINGS = ("auto", "cls", "mean")
GENERATOR_FILLS = ("mask", "bert")

# Batch keys each method reads (the collator must provide them).
METHOD_KEYS: dict[str, tuple[str, ...]] = {
    # the generator's inputs: input_ids (encoder view) and dec_input_ids (decoder view)
    "simlm": ("input_ids", "dec_input_ids", "original_ids", "attention_mask", "enc_mask", "dec_mask"),
    "enc-dec-rtd": ("input_ids", "dec_input_ids", "original_ids", "attention_mask", "enc_mask", "dec_mask"),
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


@dataclass(frozen=True)
class SpecialIds:
    cls: int
    sep: int
    pad: int
    mask: int
    unk: int
    vocab_size: int

    @classmethod
    def from_store(cls, store) -> SpecialIds:
        s = store.special_tokens
        # A vocabulary without an unknown token: the pad id stands in (it is banned anyway).
        return cls(s["cls"], s["sep"], s["pad"], s["mask"], s.get("unk", s["pad"]), int(store.vocab_size))

    def all(self) -> list[int]:
        return [self.cls, self.sep, self.pad, self.mask, self.unk]


@dataclass
class MethodOptions:
    """Knobs of the objectives and their masks. ``None`` means "the method's default" (its
    declared paper value, ``dense_pt.objectives.defaults``); after ``resolve_options`` an option
    the method does not have stays ``None``."""

    p_enc: float | None = None
    p_dec: float | None = None
    sigma: float | None = None
    mask_prob: float | None = None
    random_prob: float | None = None
    projection: bool | None = None
    decoder_layers: int | None = None
    attention_span: int | None = None
    seed_window: str | None = None
    generator: str | None = None
    generator_fill: str | None = None
    generator_weight: float | None = None
    condenser_layer: int | None = None
    rtd_weight: float | None = None
    whole_word: bool | None = None
    crop: str | None = None
    pooling: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_method(method: str) -> str:
    if method not in METHODS:
        raise InvalidArgumentError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    return method


def uses_generator(method: str, paper: str | None = None) -> bool:
    return "generator" in profile(method, paper).options


def resolve_options(
    method: str, opts: MethodOptions | None = None, paper: str | None = None
) -> MethodOptions:
    """Fill unset options with the method's defaults (from ``paper``'s profile, default the
    method's own) and validate the result. Setting an option the method does not have is an error."""
    check_method(method)
    declared = profile(method, paper).options
    opts = opts or MethodOptions()
    for f in dataclasses.fields(MethodOptions):
        if getattr(opts, f.name) is not None and f.name not in declared:
            if f.name == "generator":
                raise InvalidArgumentError(f"{method} uses no generator; drop --generator")
            raise InvalidArgumentError(
                f"{method} has no option {f.name} (its options: {', '.join(sorted(declared))})"
            )
    for name, d in declared.items():
        if getattr(opts, name) is None and d.value == REQUIRED:
            flag = "--" + name.replace("_", "-")
            raise InvalidArgumentError(f"{method} needs {flag}: {d.source}")
    filled = {k: d.value for k, d in declared.items() if getattr(opts, k) is None}
    opts = dataclasses.replace(opts, **filled)
    _validate(method, opts)
    return opts


def _validate(method: str, opts: MethodOptions) -> None:
    for name in ("p_enc", "p_dec", "mask_prob", "random_prob"):
        v = getattr(opts, name)
        if v is not None and not 0 <= v <= 1:
            raise InvalidArgumentError(f"{name} must lie in [0, 1], got {v}")
    if opts.pooling is not None and opts.pooling not in BOTTLENECK_POOLINGS:
        raise InvalidArgumentError(
            f"pooling must be one of {', '.join(BOTTLENECK_POOLINGS)}, got {opts.pooling!r}"
        )
    if opts.crop is not None and opts.crop not in ("random", "head"):
        raise InvalidArgumentError(f"crop must be 'random' or 'head', got {opts.crop!r}")
    if (opts.mask_prob or 0) + (opts.random_prob or 0) > 1:
        raise InvalidArgumentError("mask_prob + random_prob must be <= 1")
    if (
        opts.p_dec is not None
        and opts.p_enc is not None
        and method in ("simlm", "enc-dec-rtd", "enc-dec-mlm")
    ):
        if opts.p_enc > opts.p_dec:
            raise InvalidArgumentError(f"{method} nests the encoder mask in the decoder's: p_enc <= p_dec")
    if opts.sigma is not None and opts.sigma < 0:
        raise InvalidArgumentError(f"sigma must be >= 0, got {opts.sigma}")
    if opts.attention_span is not None and opts.attention_span < 1:
        raise InvalidArgumentError(f"attention_span must be >= 1, got {opts.attention_span}")
    if opts.seed_window is not None and opts.seed_window not in SEED_WINDOWS:
        raise InvalidArgumentError(
            f"seed_window must be one of {', '.join(SEED_WINDOWS)}, got {opts.seed_window!r}"
        )
    if opts.decoder_layers is not None and opts.decoder_layers < 1:
        raise InvalidArgumentError(f"decoder_layers must be >= 1, got {opts.decoder_layers}")
    if opts.generator_fill is not None and opts.generator_fill not in GENERATOR_FILLS:
        raise InvalidArgumentError(
            f"generator_fill must be one of {', '.join(GENERATOR_FILLS)}, got {opts.generator_fill!r}"
        )
    for name in ("generator_weight", "rtd_weight"):
        v = getattr(opts, name)
        if v is not None and not v >= 0:
            raise InvalidArgumentError(f"{name} must be >= 0, got {v}")
    if opts.generator is not None and not str(opts.generator).strip():
        raise InvalidArgumentError("generator must name a folder, a hub model, or 'joint'")


def resolve_pooling(opts: MethodOptions, model: Any) -> MethodOptions:
    """``opts`` with ``pooling="auto"`` replaced by the pooling of the checkpoint ``model`` (a folder
    with sentence-transformers module files says mean or cls; anything else, a config.json or a
    plain Hugging Face checkpoint, is read through [CLS] as in the papers)."""
    if opts.pooling != "auto":
        return opts
    from pathlib import Path

    from dense_pt.retrieval.encoder import detect_spec

    path = Path(str(model)) if model else None
    found = detect_spec(path).pooling if path is not None and path.is_dir() else "cls"
    return dataclasses.replace(opts, pooling=found)
