"""``dense-pt pmi build`` / ``score`` and the pipeline's ``[pretrain.pmi]``: the n-gram counts and
the AMI window, each default written here once (the functions of ``dense_pt.pmi`` read them)."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from dense_pt.config.base import Model
from dense_pt.config.shard import shard_field

MAX_N = 4  # highest n-gram order counted
MIN_COUNT = 1  # n-grams of order >= 2 seen fewer times are dropped
WINDOW = 4  # the AMI window L (orders 2..L)
MEMORY_GB = 8.0  # peak memory of the counting, corpus map included


class PmiCounts(Model):
    """What ``dense-pt pmi build`` (``dense_pt.pmi.build``) counts, within which memory."""

    max_n: int = Field(
        MAX_N, ge=1, le=64, description="Highest n-gram order (AMI window L needs L <= max-n)."
    )
    min_count: int = Field(MIN_COUNT, ge=1, description="Drop n-grams of order >= 2 seen fewer times.")
    memory_gb: float = Field(
        MEMORY_GB,
        gt=0,
        description="Peak memory budget, corpus map included; a budget too small for the corpus is refused "
        "with the least that works.",
    )


class PmiBuild(PmiCounts):
    """``dense-pt pmi build`` (``dense_pt.pmi.build``): the counts plus how this process counts
    (the threads change no count; a shard counts a slice, pruned only when the parts are merged)."""

    threads: int | None = Field(None, ge=1, description="Worker threads (default: all available cores).")
    shard: str | None = Field(None, description="Count shard I/N only (0-based; merge the parts later).")

    @field_validator("shard")
    @classmethod
    def check_shard(cls, v: str | None) -> str | None:
        return shard_field(v)


class PmiSettings(PmiCounts):
    """``[pretrain.pmi]``: how the pipeline builds the store's importance column (cdmae masks by it)."""

    window: int = Field(WINDOW, ge=1, description="AMI window L (uses orders 2..L).")

    @model_validator(mode="after")
    def check_window(self) -> PmiSettings:
        if self.window > self.max_n:
            raise ValueError(f"window {self.window} needs max_n >= window, got {self.max_n}")
        return self
