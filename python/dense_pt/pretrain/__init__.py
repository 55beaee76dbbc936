"""Bottleneck pre-training (``dense-pt pretrain``): its settings (one ``PretrainSettings``, merged by
``load_settings``, filled from the method's paper by ``resolve``), data path, run and export."""

from typing import Any

from dense_pt.config.pretrain import PretrainSettings
from dense_pt.pretrain.config import build_config, load_settings, resolve, run_record
from dense_pt.pretrain.export import export_model, load_objective
from dense_pt.pretrain.run import run_pretrain

__all__ = [
    "PretrainSettings",
    "build_config",
    "export_model",
    "load_objective",
    "load_settings",
    "resolve",
    "run_pretrain",
    "run_record",
]


def __getattr__(name: str) -> Any:
    """``PretrainConfig``: the old name of the resolved settings (deprecated; one model now)."""
    from dense_pt.pretrain import config

    return getattr(config, name)
