"""``PretrainSettings``: what a pre-training TOML file (and ``dense-pt pretrain``'s options) may
set. Every field is optional: an unset one comes from the method's paper
(``dense_pt.config.defaults.objectives``) when ``dense_pt.pretrain.build_config`` resolves the settings
into a ``PretrainConfig``; method, model, corpus and out are required by then."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dense_pt.config.base import Model
from dense_pt.config.options import MethodOptions
from dense_pt.config.train import TrainTable, Warmup

StageOptimizer = Literal["reset", "keep"]
MAX_QUERY_TOKENS = 32  # tokens kept per LLM query (querygen / contrastive)
MIN_LENGTH = 8  # the least max_length of any stage: [CLS], [SEP] and a few tokens


class PretrainSettings(Model):
    """The top level of a pre-training TOML file; ``[options]`` and ``[train]`` are its tables."""

    method: str | None = Field(
        None,
        description="Pre-training method: simlm, cdmae, seed, mlm, enc-dec-mlm, enc-dec-rtd, condenser, "
        "autoencoder, querygen or contrastive.",
    )
    paper: str | None = Field(
        None,
        description="Take the defaults from this paper where a method has several (condenser: 'condenser' "
        "or 'simlm', SimLM's Table 7 row).",
    )
    model: str | None = Field(
        None, description="A local HF checkpoint folder, or a config.json (random init)."
    )
    corpus: str | None = Field(None, description="Corpus store folder.")
    out: str | None = Field(None, description="Output folder (encoder/, decoder/, log.jsonl, checkpoints/).")
    max_length: int | None = Field(
        None, ge=MIN_LENGTH, description="Tokens per passage, [CLS] and [SEP] included."
    )
    queries: str | None = Field(
        None, description="querygen / contrastive: the queries folder written by `dense-pt expand`."
    )
    curriculum: str | None = Field(
        None,
        description='querygen / contrastive: context stages, e.g. "passage:0.75,queries:0.25" (querygen) or '
        '"spans:0.75,queries:0.25" (contrastive) (default: queries:1 with --queries, else spans:1).',
    )
    stage_schedules: str | None = Field(
        None, description='Learning-rate schedule per curriculum stage (default "cosine,constant,...").'
    )
    stage_optimizer: StageOptimizer | None = Field(
        None,
        description="Curriculum: at a stage switch 'reset' the AdamW moments (a new run from the checkpoint, "
        "the paper's) or 'keep' them.",
    )
    stage_warmup: Warmup | None = Field(
        None,
        description="Curriculum: warm-up of each later stage from 0 to the peak rate, steps (>= 1) or a fraction "
        "(< 1) of the stage (default 0: the paper's constant rate from the switch's first step).",
    )
    max_query_tokens: int | None = Field(
        None, ge=1, description=f"Tokens kept per LLM query (default {MAX_QUERY_TOKENS})."
    )
    options: MethodOptions = Field(default_factory=MethodOptions)
    train: TrainTable = Field(default_factory=TrainTable)
