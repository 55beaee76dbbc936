"""The multi-stage fine-tuning pipeline (``dense-pt pipeline run``)."""

from dense_pt.pipeline.config import ResolvedPipeline, load_pipeline_config, validate_config
from dense_pt.pipeline.run import STAGES, StopPipeline, dev_split, plan_pipeline, run_pipeline
from dense_pt.pipeline.study import load_study, run_study

__all__ = [
    "STAGES",
    "ResolvedPipeline",
    "StopPipeline",
    "dev_split",
    "load_pipeline_config",
    "load_study",
    "plan_pipeline",
    "run_pipeline",
    "run_study",
    "validate_config",
]
