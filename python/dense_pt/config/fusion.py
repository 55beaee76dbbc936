"""Fusing a lexical run with a dense one: ``dense-pt fuse`` and the pipeline's ``[fusion]`` table
share ``FusionMethod`` (the method and RRF's k); the weight differs in kind (the command takes a
number or tunes it on given qrels, the pipeline's table says ``"tune"`` or a number)."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from dense_pt.config.base import Model
from dense_pt.config.choices import FUSION_METHODS, RRF_K, one_of
from dense_pt.config.retrieval import K

TUNE_MEASURE = "nDCG@10"  # what a tuned interpolation weight maximises


class FusionMethod(Model):
    method: str = Field(
        "interpolation",
        json_schema_extra=one_of(FUSION_METHODS),
        description="'interpolation' (min-max normalised, weighted sum) or 'rrf' (k / --rrf-k).",
    )
    rrf_k: int = Field(
        RRF_K, ge=0, description="rrf: the constant k of 1 / (k + rank) (Cormack et al. 2009: 60)."
    )

    @field_validator("method")
    @classmethod
    def known_method(cls, v: str) -> str:
        if v not in FUSION_METHODS:
            raise ValueError(f"must be one of {', '.join(FUSION_METHODS)}, got {v!r}")
        return v


class FuseSettings(FusionMethod):
    """``dense-pt fuse`` (``retrieval.fusion.fuse_files``): the interpolation weight given, or tuned
    on qrels the caller passes (not part of the settings: a file)."""

    weight: float | None = Field(
        None,
        ge=0,
        le=1,
        description="interpolation: the dense run's weight in [0, 1]; omit it to choose it with --tune-qrels.",
    )
    tune_measure: str = Field(TUNE_MEASURE, description="The measure the weight maximises on --tune-qrels.")
    k: int = Field(K, ge=1, description="Passages kept per query in the fused run.")

    @model_validator(mode="after")
    def weight_for_interpolation(self) -> FuseSettings:
        if self.method == "rrf" and self.weight is not None:
            raise ValueError("weight is for method interpolation, not rrf")
        return self
