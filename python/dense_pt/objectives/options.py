"""The objectives' options and their validation, without torch: ``MethodOptions`` (every field
``None`` = "the method's default"), ``resolve_options`` (fills them from the method's declared
defaults in ``dense_pt.config.defaults.objectives`` and checks them), the special token ids, and the batch
keys each method reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args

from dense_pt.config.choices import PRETRAIN_METHODS as METHODS  # in the order the CLI lists them
from dense_pt.config.defaults.objectives import REQUIRED, profile
from dense_pt.config.options import BottleneckPooling, GeneratorFill, MethodOptions, SeedWindow
from dense_pt.errors import InvalidArgumentError

# The choices, as the model declares them (dense_pt.config.options).
SEED_WINDOWS: tuple[str, ...] = get_args(SeedWindow)
BOTTLENECK_POOLINGS: tuple[str, ...] = get_args(BottleneckPooling)
GENERATOR_FILLS: tuple[str, ...] = get_args(GeneratorFill)

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
    for name in MethodOptions.model_fields:
        if getattr(opts, name) is not None and name not in declared:
            if name == "generator":
                raise InvalidArgumentError(f"{method} uses no generator; drop --generator")
            raise InvalidArgumentError(
                f"{method} has no option {name} (its options: {', '.join(sorted(declared))})"
            )
    for name, d in declared.items():
        if getattr(opts, name) is None and d.value == REQUIRED:
            flag = "--" + name.replace("_", "-")
            raise InvalidArgumentError(f"{method} needs {flag}: {d.source}")
    filled = {k: d.value for k, d in declared.items() if getattr(opts, k) is None}
    opts = opts.replace(**filled)
    _validate(method, opts)
    return opts


def _validate(method: str, opts: MethodOptions) -> None:
    """What the model cannot check alone: how the options relate (ranges and choices are the
    model's, ``dense_pt.config.options``)."""
    if (opts.mask_prob or 0) + (opts.random_prob or 0) > 1:
        raise InvalidArgumentError("mask_prob + random_prob must be <= 1")
    if (
        opts.p_dec is not None
        and opts.p_enc is not None
        and method in ("simlm", "enc-dec-rtd", "enc-dec-mlm")
    ):
        if opts.p_enc > opts.p_dec:
            raise InvalidArgumentError(f"{method} nests the encoder mask in the decoder's: p_enc <= p_dec")
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
    return opts.replace(pooling=found)
