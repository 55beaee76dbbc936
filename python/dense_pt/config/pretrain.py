"""``PretrainSettings``: one pre-training run, as a pre-training TOML file, ``dense-pt pretrain``'s
options and a Python caller give it, and, once ``dense_pt.pretrain.resolve`` has filled in what the
method's paper decides, as the run uses it: one model from the command line to the job.

Unset means "the method's paper" (``dense_pt.config.defaults.objectives``): ``paper`` and
``max_length`` are ``None``, an option is ``None``, a ``train`` key is one the caller did not set
(``train.model_fields_set``); ``resolve`` fills each from the paper, once."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dense_pt.config.base import Model
from dense_pt.config.choices import PRETRAIN_METHODS, one_of
from dense_pt.config.options import MethodOptions
from dense_pt.config.train import TrainConfig, Warmup
from dense_pt.errors import InvalidArgumentError

StageOptimizer = Literal["reset", "keep"]
MAX_QUERY_TOKENS = 32  # tokens kept per LLM query (querygen / contrastive)
MIN_LENGTH = 8  # the least max_length of any stage: [CLS], [SEP] and a few tokens
# What only querygen / contrastive read (the LLM queries, the curriculum): kept out of the run
# record of the other methods, as before these settings existed.
CONTEXT_KEYS = (
    "queries",
    "curriculum",
    "stage_schedules",
    "max_query_tokens",
    "stage_optimizer",
    "stage_warmup",
)
REQUIRED = ("method", "model", "corpus", "out")


class PretrainSettings(Model):
    """The top level of a pre-training TOML file; ``[options]`` and ``[train]`` are its tables."""

    method: str = Field(
        json_schema_extra=one_of(PRETRAIN_METHODS),
        description="Pre-training method: simlm, cdmae, seed, mlm, enc-dec-mlm, enc-dec-rtd, condenser, "
        "autoencoder, querygen or contrastive.",
    )
    paper: str | None = Field(
        None,
        description="Take the defaults from this paper where a method has several (condenser: 'condenser' "
        "or 'simlm', SimLM's Table 7 row).",
    )
    model: str = Field(description="A local HF checkpoint folder, or a config.json (random init).")
    corpus: str = Field(description="Corpus store folder.")
    out: str = Field(description="Output folder (encoder/, decoder/, log.jsonl, checkpoints/).")
    max_length: int | None = Field(
        None, ge=MIN_LENGTH, description="Tokens per passage, [CLS] and [SEP] included."
    )
    pad_to_multiple_of: int | None = Field(
        None,
        ge=1,
        description="Round each batch's padded length up to a multiple, e.g. 16: at most max_length / 16 "
        "shapes for torch_compile (None: the collator's 1, the longest row).",
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
    max_query_tokens: int = Field(MAX_QUERY_TOKENS, ge=1, description="Tokens kept per LLM query.")
    options: MethodOptions = Field(default_factory=MethodOptions)
    # the keys set are the caller's; resolve() takes the others from the method's paper
    train: TrainConfig = Field(default_factory=TrainConfig)

    def length(self) -> int:
        """``max_length`` once ``resolve`` has filled it (an unset one: the method's paper)."""
        if self.max_length is None:
            raise InvalidArgumentError(
                "max_length is unset: resolve() the settings first (build_config does)"
            )
        return self.max_length
