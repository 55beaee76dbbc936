"""``MethodOptions``: the knobs of the pre-training objectives and their masks (``MaskOptions``, the
fields the collator reads under the same names). Every field is
``None`` by default, meaning "the method's default": its paper's value, declared once in
``dense_pt.config.defaults.objectives`` and filled in by ``dense_pt.objectives.resolve_options`` (which
also refuses an option the method does not have). Ranges and choices are checked here."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dense_pt.config.base import Model

SeedWindow = Literal["strict", "band", "released"]
# What the bottleneck reads: "auto" = the checkpoint's own pooling, resolved to one of the others by
# ``resolve_pooling`` before the objective is built.
BottleneckPooling = Literal["auto", "cls", "mean"]
GeneratorFill = Literal["mask", "bert"]
Crop = Literal["random", "head"]


class MaskOptions(Model):
    """The masking settings the objectives' options and the collator share: each written once,
    under the one name it has from the command line (``--p-dec``) to the Rust masker (``p_dec``).
    ``None`` = the method's paper default."""

    p_enc: float | None = Field(None, ge=0, le=1, description="Encoder mask rate.")
    p_dec: float | None = Field(None, ge=0, le=1, description="Decoder mask rate.")
    sigma: float | None = Field(None, ge=0, description="cdmae: std of the noise added to importance.")
    mask_prob: float | None = Field(None, ge=0, le=1, description="Share of masked tokens shown as [MASK].")
    random_prob: float | None = Field(None, ge=0, le=1, description="Share shown as a random token.")
    whole_word: bool | None = Field(None, description="Mask whole words (the store's word_ids).")
    crop: Crop | None = Field(None, description="Long passages: a 'random' window each epoch, or the 'head'.")
    generator_fill: GeneratorFill | None = Field(
        None,
        description="simlm / enc-dec-rtd: the generator's input at masked positions: 'mask' or 'bert' (80/10/10).",
    )


class MethodOptions(MaskOptions):
    """Options of the objectives; ``None`` = the method's paper default (or: not its option)."""

    projection: bool | None = Field(
        None, description="Linear projection of [CLS] into the bottleneck (cdmae default)."
    )
    decoder_layers: int | None = Field(None, ge=1, description="Layers of the decoder / head.")
    attention_span: int | None = Field(
        None, ge=1, description="seed: tokens the decoder sees before each target."
    )
    seed_window: SeedWindow | None = Field(
        None,
        description="seed: 'strict' (eq. 9: exactly k tokens), 'band' (per-layer band mask) or 'released' "
        "(the authors' code: band mask + cross-attention to [CLS] in every layer).",
    )
    generator: str | None = Field(
        None,
        description="simlm / enc-dec-rtd (required): a frozen masked LM, as a folder or a hub name in the "
        "local Hugging Face cache (the paper: google/electra-base-generator), or 'joint' (a small "
        "BERT trained alongside).",
    )
    generator_weight: float | None = Field(
        None,
        ge=0,
        description="simlm / enc-dec-rtd with --generator joint: weight of the generator's MLM loss.",
    )
    condenser_layer: int | None = Field(None, description="condenser: the early layer the head reads.")
    rtd_weight: float | None = Field(None, ge=0, description="enc-dec-rtd: weight of the detection losses.")
    pooling: BottleneckPooling | None = Field(
        None,
        description="What the bottleneck reads: 'cls' (the papers), 'mean', or 'auto' (the checkpoint's own "
        "sentence-transformers pooling, else [CLS]). Recorded in OUT/encoder, so fine-tuning and "
        "encoding pool the same way.",
    )
