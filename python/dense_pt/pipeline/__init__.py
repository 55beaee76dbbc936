"""The multi-stage fine-tuning pipeline (``dense-pt pipeline run``) and its demo."""

from dense_pt.pipeline.config import load_pipeline_config, validate_config
from dense_pt.pipeline.demo import demo_stage
from dense_pt.pipeline.run import STAGES, StopPipeline, dev_split, run_pipeline

__all__ = [
    "STAGES",
    "StopPipeline",
    "demo_stage",
    "dev_split",
    "load_pipeline_config",
    "run_pipeline",
    "validate_config",
]
