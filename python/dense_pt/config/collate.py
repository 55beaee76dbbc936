"""The pre-training collator's settings (``dense_pt.collate.Collator``): one field each, with its
default and its range. ``None`` = the method's paper (``config.defaults.objectives``, through
``collate.paper_settings``); the core checks what depends on the store (lengths, ids)."""

from __future__ import annotations

import operator
from typing import Any, Literal

from pydantic import Field, field_validator

from dense_pt.config.base import Model

Fill = Literal["bert", "mask", "keep"]  # 80/10/10 (mask_prob/random_prob), all [MASK], the original ids


class CollatorSettings(Model):
    """Everything a ``Collator`` is built from, besides its store and method."""

    max_length: int | None = Field(
        None, description="Tokens per row, [CLS] and [SEP] included (None: the paper's)."
    )
    seed: int = Field(0, ge=0, lt=2**64, description="Row r of epoch e draws from (seed, e, r) only.")
    paper: str | None = Field(None, description="Whose defaults (e.g. condenser with 'simlm').")
    crop: Literal["random", "head"] | None = Field(None, description="Which window of a long passage.")
    pad_to: Literal["longest", "max_length"] = Field(
        "longest", description="Pad to the batch's longest row or max_length."
    )
    pad_to_multiple_of: int = Field(1, ge=1, description="Round the padded length up to a multiple.")
    whole_word: bool | None = Field(None, description="Mask whole words (the store's word_ids).")
    enc_p: float | None = Field(None, ge=0, le=1, description="The encoder view's mask rate.")
    dec_p: float | None = Field(None, ge=0, le=1, description="The decoder view's mask rate.")
    sigma: float | None = Field(None, ge=0, description="Std of the noise added to the importance (CDMAE).")
    enc_fill: Fill | None = Field(None, description="How the encoder's masked positions are filled.")
    dec_fill: Fill | None = Field(None, description="How the decoder's masked positions are filled.")
    mask_prob: float | None = Field(None, ge=0, le=1, description="The 80 of 'bert' fill.")
    random_prob: float | None = Field(None, ge=0, le=1, description="The 10 of 'bert' fill.")
    importance_column: str = Field("importance", description="The store column the importance masker reads.")
    num_spans: int = Field(2, ge=1, description="Spans per passage (contrastive).")
    span_min_len: int = Field(16, ge=1, description="Shortest span, in tokens (contrastive).")
    span_max_len: int | None = Field(None, ge=1, description="Longest span (None: max_length - 2).")
    return_original: bool = Field(False, description="Also return the clean, cropped ids.")

    @field_validator("seed", mode="before")
    @classmethod
    def integer_seed(cls, value: Any) -> Any:
        """A numpy integer is a seed too (the maskers take one); a bool is not."""
        if isinstance(value, bool) or isinstance(value, int):
            return value
        try:
            return operator.index(value)
        except TypeError:
            return value
