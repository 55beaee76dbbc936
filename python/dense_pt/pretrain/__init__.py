"""Bottleneck pre-training (``dense-pt pretrain``): configuration, data path, run and export."""

from dense_pt.pretrain.config import PretrainConfig, build_config, load_config
from dense_pt.pretrain.export import export_model, load_objective
from dense_pt.pretrain.run import run_pretrain

__all__ = [
    "PretrainConfig",
    "build_config",
    "export_model",
    "load_config",
    "load_objective",
    "run_pretrain",
]
