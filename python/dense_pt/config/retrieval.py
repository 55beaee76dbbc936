"""First-stage retrieval settings: ``dense-pt negatives mine`` (and the pipeline's ``[mine]``),
``dense-pt encode`` and ``dense-pt search``, with the Python functions behind them
(``dense_pt.retrieval.negatives.mine_negatives``, ``retrieval.encode.encode``,
``retrieval.search.search``) validated by the same models."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from dense_pt.config.base import Model
from dense_pt.config.choices import POOLS, RELATIVE_FORMS, SAMPLINGS, one_of
from dense_pt.config.defaults import finetune as FT
from dense_pt.config.shard import shard_field
from dense_pt.config.train import UNPAD_HELP, Unpad

Dtype = Literal["float16", "float32"]
Metric = Literal["ip", "cosine"]
Pooling = Literal["auto", "cls", "mean"]
ENCODE_BATCH_SIZE = 64  # sequences per forward pass
SHARD_SIZE = 100_000  # rows per embedding shard
K = 1000  # hits per query
# BM25's k1 and b: Anserini's defaults (Lin et al., the BEIR and MS MARCO baselines), not bm25s's 1.5 / 0.75
BM25_K1, BM25_B = 0.9, 0.4


class MineSettings(Model):
    """Hard negatives from a run (num 0 keeps every negative of the pool; training draws
    group_size - 1 of them per epoch)."""

    # The score filters: the pipeline applies them to dense runs only (a margin in cosine units
    # means nothing for BM25 scores).
    FILTERS: ClassVar[frozenset[str]] = frozenset(
        {"absolute_margin", "relative_margin", "relative_form", "max_score", "min_score"}
    )

    depth: int = Field(
        FT.NEGATIVES_DEPTH, ge=1, description="Candidates considered (SimLM: the top 200; see --pool)."
    )
    num: int = Field(0, ge=0, description="Negatives kept per query (0: all of the pool).")
    skip_top: int = Field(
        0, ge=0, description="Skip the first N candidates left (sentence-transformers' range_min)."
    )
    pool: str = Field(
        "rank",
        json_schema_extra=one_of(POOLS),
        description="rank: the run's top DEPTH hits, positives then dropped (SimLM's code) | rank+positives: the "
        "top DEPTH + P hits, at most DEPTH survivors (sentence-transformers' range_max) | filtered: the first "
        "DEPTH candidates that pass the filters.",
    )
    sampling: str = Field(
        "random", json_schema_extra=one_of(SAMPLINGS), description="random | top (with --num)."
    )
    absolute_margin: float | None = Field(
        None, description="Keep only if score + M <= the positive's score (lowest positive)."
    )
    relative_margin: float | None = Field(
        None, description="Keep only if score <= s+ - |s+| * R (see --relative-form)."
    )
    relative_form: str = Field(
        "magnitude",
        json_schema_extra=one_of(RELATIVE_FORMS),
        description="magnitude: s+ - |s+| R (sentence-transformers today) | signed: s+ (1 - R) (before its fix).",
    )
    max_score: float | None = Field(None, description="Drop candidates scoring above this.")
    min_score: float | None = Field(None, description="Drop candidates scoring below this.")

    @model_validator(mode="after")
    def check_choices(self) -> MineSettings:
        for key, allowed in (("pool", POOLS), ("relative_form", RELATIVE_FORMS), ("sampling", SAMPLINGS)):
            if getattr(self, key) not in allowed:
                raise ValueError(f"{key} must be one of {', '.join(allowed)}, got {getattr(self, key)!r}")
        if self.skip_top >= self.depth:
            raise ValueError(f"skip_top {self.skip_top} must be < depth {self.depth}: nothing would be left")
        return self

    def command(self, seed: int) -> MineCommand:
        """These settings with a seed: what the one miner (``retrieval.negatives.mine``) takes."""
        return MineCommand.load({**self.model_dump(include=set(MineSettings.model_fields)), "seed": seed})


class MineCommand(MineSettings):
    """``dense-pt negatives mine`` (the pipeline draws with its own seed)."""

    seed: int = Field(
        0,
        description="Seed of --sampling random (which negatives are kept); the same seed keeps the same ones.",
    )


class EncodeOptions(Model):
    """How a model turns passages or queries into embedding shards, but the length (``encode``
    takes one, ``dense-pt beir`` one per side)."""

    pooling: Pooling = Field(
        "auto", description="cls | mean | auto (from the model's sentence-transformers files)."
    )
    normalize: bool | None = Field(None, description="L2-normalise (default: as the model was trained).")
    batch_size: int = Field(
        ENCODE_BATCH_SIZE,
        ge=1,
        description="Sequences per forward pass (lower it if the GPU or CPU runs out of memory).",
    )
    shard_size: int = Field(SHARD_SIZE, ge=1, description="Rows per shard file.")
    dtype: Dtype = Field("float16", description="float16 | float32.")
    device: str | None = Field(None, description="cpu / cuda (default: cuda when available).")
    unpad: Unpad = Field("auto", description=UNPAD_HELP)


class EncodeSettings(EncodeOptions):
    """``dense-pt encode``: how a model turns passages or queries into embedding shards."""

    max_length: int | None = Field(
        None,
        ge=3,
        description="Tokens per sequence, [CLS] and [SEP] included (default: the lengths the retriever was "
        "trained with, from its retriever.json; else its sentence-transformers max_seq_length; else "
        f"{FT.QUERY_MAX_LENGTH} / {FT.PASSAGE_MAX_LENGTH}).",
    )


class BM25Settings(Model):
    """``dense-pt bm25`` and the pipeline's bm25 stage: bm25s's Lucene variant."""

    k: int = Field(K, ge=1, description="Hits per query.")
    k1: float = Field(
        BM25_K1,
        ge=0,
        description="Term-frequency saturation: 0 counts a term once, larger lets repeats count more.",
    )
    b: float = Field(
        BM25_B,
        ge=0,
        le=1,
        description="Length normalisation: 0 none, 1 full (scores scaled by passage length).",
    )
    stem: bool = Field(
        True, description="English Snowball stemming (PyStemmer; without it a warning, and no stemming)."
    )


class BM25Command(BM25Settings):
    """``dense-pt bm25`` (``dense_pt.retrieval.bm25.bm25``): the settings plus how this process
    searches; neither changes a score (the pipeline's bm25 stage leaves both at their defaults)."""

    threads: int | None = Field(None, ge=1, description="Search threads (default: all available cores).")
    query_shard: str | None = Field(
        None,
        description="Search only slice I/N of the queries (0-based, contiguous in file order): one job of an "
        "array; the shards' runs, concatenated in order, are the whole run.",
    )

    @field_validator("query_shard")
    @classmethod
    def check_shard(cls, v: str | None) -> str | None:
        return shard_field(v, "query shard")


class SearchSettings(Model):
    """``dense-pt search``: exact search over embedding shards."""

    k: int = Field(K, ge=1, description="Hits per query.")
    metric: Metric | None = Field(None, description="ip | cosine (default: cosine if normalised, else ip).")
    max_memory_gb: float | None = Field(
        None, gt=0, description="Search the passages in chunks of at most this many GB."
    )
