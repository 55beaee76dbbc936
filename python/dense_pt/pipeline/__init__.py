"""The multi-stage fine-tuning pipeline (``dense-pt pipeline run``) and its demo."""

from dense_pt.pipeline.config import load_pipeline_config, validate_config
from dense_pt.pipeline.demo import demo_stage, finetune_demo_stage
from dense_pt.pipeline.run import STAGES, StopPipeline, dev_split, plan_pipeline, run_pipeline
from dense_pt.pipeline.study import load_study, run_study

__all__ = [
    "STAGES",
    "StopPipeline",
    "demo_stage",
    "dev_split",
    "finetune_demo_stage",
    "load_pipeline_config",
    "load_study",
    "plan_pipeline",
    "run_pipeline",
    "run_study",
    "validate_config",
]
