"""Configuration of a training run: the ``TrainConfig`` model (``dense_pt.config.train``, where
its defaults and checks live), TOML reading and CLI overrides."""

from __future__ import annotations

from typing import Any

from dense_pt.config.toml import read_toml
from dense_pt.config.train import TrainConfig

__all__ = ["TrainConfig", "merge_overrides", "read_toml"]


def merge_overrides(base: TrainConfig, overrides: dict[str, Any], where: str = "command line") -> TrainConfig:
    """A copy of ``base`` with the non-None ``overrides`` applied and checked (CLI beats TOML)."""
    changes = {k: v for k, v in overrides.items() if v is not None}
    return TrainConfig.load({**base.model_dump(), **changes}, where, "train")
