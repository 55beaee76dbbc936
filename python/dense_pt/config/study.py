"""A study file (``dense-pt study run``): the grid of objectives x seeds, the budget every objective
gets and the pipeline file every cell shares. Each cell is then an ordinary pipeline file, checked by
``PipelineFile`` (``pipeline.study.build_study``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from dense_pt.config.base import Model
from dense_pt.config.choices import PRETRAIN_METHODS
from dense_pt.config.names import plain_name
from dense_pt.config.pmi import PmiSettings
from dense_pt.config.pretrain import MIN_LENGTH
from dense_pt.config.train import TrainTable

NO_PRETRAINING = "none"  # the objective "no pre-training": fine-tune the initial checkpoint as it is


class StudyBudget(Model):
    """``[pretrain]`` of a study: the budget every objective gets (its method and options come from
    the objective)."""

    max_length: int | None = Field(None, ge=MIN_LENGTH)
    train: TrainTable = Field(default_factory=TrainTable)
    pmi: PmiSettings | None = None


def _distinct(name: str, values: list[Any]) -> list[Any]:
    if not values:
        raise ValueError(f"{name} must be a non-empty list")
    if len(set(values)) != len(values):
        raise ValueError(f"{name} must not repeat")
    return values


class StudyFile(Model):
    out: str = Field(description="The study's folder (cells in OUT/cells/<objective>-seed<seed>).")
    pipeline: str = Field(description="The pipeline file every cell shares (no [pretrain] table).")
    set: list[str] = Field(
        default_factory=list, description="Overrides of the pipeline file, as `pipeline run --set`."
    )
    objectives: list[str] = Field(
        description="Methods or labels of [options.<label>], 'none' for no pre-training."
    )
    seeds: list[int] = Field(description="One cell per objective and seed.")
    split_seed: int | None = Field(
        None, description="The dev split every cell shares (None: the pipeline's seed)."
    )
    until: str | None = Field(None, description="Stop every cell after this pipeline stage.")
    share_pretraining: bool = Field(
        False,
        description="Pre-train each objective once (in its first seed's cell, with that seed); the other "
        "seeds fine-tune that encoder, so seeds vary the fine-tuning alone.",
    )
    pretrain: StudyBudget = Field(default_factory=StudyBudget)
    options: dict[str, dict[str, Any]] = Field(default_factory=dict, description="Per-objective options.")

    @field_validator("objectives")
    @classmethod
    def objectives_distinct(cls, v: list[str]) -> list[str]:
        for label in v:  # a cell's folder is OUT/cells/<label>-seed<seed>: never a path
            plain_name(label, "an objective")
        return _distinct("objectives", v)

    @field_validator("seeds")
    @classmethod
    def seeds_distinct(cls, v: list[int]) -> list[int]:
        return _distinct("seeds", v)

    @model_validator(mode="after")
    def known_objectives(self) -> StudyFile:
        stray = set(self.options) - set(self.objectives)
        if stray:
            raise ValueError(f"[options] names objectives the study does not run: {sorted(stray)}")
        for label in self.objectives:
            method = self.method(label)
            if label != NO_PRETRAINING and method not in PRETRAIN_METHODS:
                raise ValueError(
                    f"objectives: unknown method {method!r}; choose one of {', '.join(PRETRAIN_METHODS)} "
                    f"(or '{NO_PRETRAINING}')"
                )
        return self

    def method(self, label: str) -> str:
        """The pre-training method of an objective: its ``[options.<label>] method``, else the label."""
        return str(self.options.get(label, {}).get("method", label))
