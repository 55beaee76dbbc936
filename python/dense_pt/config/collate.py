"""The pre-training collator's settings (``dense_pt.collate.Collator``): one field each, with its
default and its range. The masking fields are ``MaskOptions``' (``p_enc``, ``p_dec``, ``sigma``,
``mask_prob``, ``random_prob``, ``whole_word``, ``crop``, ``generator_fill``): the names and checks of
``MethodOptions``, which the native collator reads under the same names. ``None`` = the method's
paper (``config.defaults.objectives``, filled in by the collator); the core checks what depends on
the store (lengths, ids)."""

from __future__ import annotations

import operator
import warnings
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from dense_pt.config.options import MaskOptions

Fill = Literal["bert", "mask", "keep"]  # 80/10/10 (mask_prob/random_prob), all [MASK], the original ids

# The names these settings had before they took MethodOptions' (dense-pt 0.1's Collator(enc_p=...)):
# still accepted from callers, with a DeprecationWarning.
RENAMED = {"enc_p": "p_enc", "dec_p": "p_dec"}


class CollatorSettings(MaskOptions):
    """Everything a ``Collator`` is built from, besides its store and method."""

    max_length: int | None = Field(
        None, description="Tokens per row, [CLS] and [SEP] included (None: the paper's)."
    )
    seed: int = Field(0, ge=0, lt=2**64, description="Row r of epoch e draws from (seed, e, r) only.")
    paper: str | None = Field(None, description="Whose defaults (e.g. condenser with 'simlm').")
    pad_to: Literal["longest", "max_length"] = Field(
        "longest", description="Pad to the batch's longest row or max_length."
    )
    pad_to_multiple_of: int = Field(1, ge=1, description="Round the padded length up to a multiple.")
    enc_fill: Fill | None = Field(
        None, description="How the encoder's masked positions are filled (None: the method's)."
    )
    dec_fill: Fill | None = Field(
        None, description="How the decoder's masked positions are filled (None: the method's)."
    )
    importance_column: str = Field("importance", description="The store column the importance masker reads.")
    num_spans: int = Field(2, ge=1, description="Spans per passage (contrastive).")
    span_min_len: int = Field(16, ge=1, description="Shortest span, in tokens (contrastive).")
    span_max_len: int | None = Field(None, ge=1, description="Longest span (None: max_length - 2).")
    return_original: bool = Field(False, description="Also return the clean, cropped ids.")

    @model_validator(mode="before")
    @classmethod
    def renamed(cls, data: Any) -> Any:
        """The old spellings of ``p_enc`` / ``p_dec``, moved to their names with a warning."""
        if isinstance(data, dict) and any(old in data for old in RENAMED):
            data = dict(data)
            for old, new in RENAMED.items():
                if old in data:
                    warnings.warn(f"{old} is now {new}", DeprecationWarning, stacklevel=2)
                    if new in data:
                        raise ValueError(f"{old} and {new} are one setting: give {new} alone")
                    data[new] = data.pop(old)
        return data

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
