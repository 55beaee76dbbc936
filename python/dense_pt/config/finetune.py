"""The fine-tuning stages' settings: ``dense-pt train retriever | reranker | distill``, their TOML
files (the stage's keys at the top, ``[train]`` for the engine) and the ``train_*`` functions.

``RetrieverSettings`` / ``RerankerSettings`` / ``DistillSettings`` hold what a stage and the
pipeline's ``[r1]`` / ``[r2]`` / ``[reranker]`` / ``[distill]`` tables share (the tables add their
own epochs default and ``train``); the ``*Command`` models add what only the command sets. The
defaults are SimLM's Table 13, read from ``dense_pt.config.defaults.finetune``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from dense_pt.config.base import Model
from dense_pt.config.choices import (
    DEFAULT_RERANKER_LOSS,
    DISTILL_LOSSES,
    LOSS_TAU,
    RERANKER_FORWARD_FACTOR,
    one_of,
    resolve_forward_factor,
    resolve_tau,
)
from dense_pt.config.defaults import finetune as FT
from dense_pt.config.pretrain import MIN_LENGTH
from dense_pt.config.retrieval import ENCODE_BATCH_SIZE, SHARD_SIZE, MineSettings
from dense_pt.config.train import TrainTable, partial
from dense_pt.errors import InvalidArgumentError

Number = int | float  # kept as written (a manifest and a stage's fingerprint keep 3, not 3.0)
Pooling = Literal["auto", "cls", "mean"]

_EPOCHS = "Passes over the training queries (sets train.max_steps; unset: max_steps decides)."
_QUERY_LENGTH = "Tokens per query, [CLS] and [SEP] included."
_PASSAGE_LENGTH = "Tokens per passage, [CLS] and [SEP] included."


def loss_checks(table: Any) -> None:
    """The loss is known, its temperature fits it, and the triplet loss has a negative to compare."""
    try:
        resolve_tau(table.loss, table.tau)
    except InvalidArgumentError as exc:
        raise ValueError(str(exc)) from None
    if table.loss == "triplet" and table.group_size < 2:
        raise ValueError(
            f"group_size must be >= 2 for the triplet loss (it compares the positive with the query's "
            f"own negatives), got {table.group_size}"
        )


class RetrieverSettings(Model):
    """A bi-encoder stage. A group is 1 positive + group_size - 1 negatives (a retriever may train on
    in-batch negatives alone: 1); tau None: the loss's own."""

    loss: str = Field(
        "simlm",
        json_schema_extra=one_of(LOSS_TAU),
        description="simlm (SimLM, the authors' code) | simlm-eq3 (SimLM eq. 3 as printed) | "
        "infonce (CDMAE eq. 10, dot product) | triplet (SEED).",
    )
    group_size: int = Field(
        FT.RETRIEVER_GROUP_SIZE, ge=1, description="1 positive + n-1 negatives per query."
    )
    tau: float | None = Field(
        None,
        gt=0,
        description=f"Temperature: default {FT.TAU} for simlm / simlm-eq3, 1 for infonce; triplet has none.",
    )
    query_max_length: int = Field(FT.QUERY_MAX_LENGTH, ge=MIN_LENGTH, description=_QUERY_LENGTH)
    passage_max_length: int = Field(FT.PASSAGE_MAX_LENGTH, ge=MIN_LENGTH, description=_PASSAGE_LENGTH)
    refresh_every: int | None = Field(
        None,
        ge=1,
        description="ANCE negatives: every N steps re-encode the corpus with the model being trained, search "
        "the training queries and mine fresh negatives (the mining settings: [mine]); unset: the negatives "
        "file throughout.",
    )

    @model_validator(mode="after")
    def check_loss(self) -> RetrieverSettings:
        loss_checks(self)
        return self


class RerankerSettings(Model):
    """The cross-encoder (its listwise loss over a group of one is constant zero: group_size >= 2,
    and the passages it trains on, group_size // forward_factor, must be 2 or more too)."""

    group_size: int = Field(
        FT.RERANKER_GROUP_SIZE, ge=2, description="1 positive + n-1 mined negatives per query."
    )
    loss: str = Field(
        DEFAULT_RERANKER_LOSS,
        json_schema_extra=one_of(RERANKER_FORWARD_FACTOR),
        description="simlm (the authors' code: score the group without gradients, train on the positive + "
        "the top negatives, 1 / forward_factor of it, with R-Drop) | listwise (SimLM eq. 4 as printed, "
        "the whole group).",
    )
    forward_factor: int | None = Field(
        None,
        ge=1,
        description=f"simlm: train on group_size // forward_factor passages (default {FT.RERANKER_FORWARD_FACTOR}; "
        "listwise: 1).",
    )
    query_max_length: int = Field(FT.QUERY_MAX_LENGTH, ge=MIN_LENGTH, description=_QUERY_LENGTH)
    max_length: int = Field(
        FT.RERANKER_MAX_LENGTH, ge=MIN_LENGTH, description="The whole pair, [CLS] q [SEP] p [SEP]."
    )

    @model_validator(mode="after")
    def check_loss(self) -> RerankerSettings:
        try:
            factor = resolve_forward_factor(self.loss, self.forward_factor)
        except InvalidArgumentError as exc:
            raise ValueError(str(exc)) from None
        if self.group_size // factor < 2:
            raise ValueError(
                f"group_size {self.group_size} // forward_factor {factor} keeps {self.group_size // factor} "
                "passage per query: the loss needs the positive and a negative (raise group_size, lower "
                'forward_factor, or loss = "listwise")'
            )
        return self


class DistillSettings(Model):
    """The retriever trained on the re-ranker's scores (KL over a group of one is constant zero:
    group_size >= 2)."""

    loss: str = Field(
        "simlm",
        json_schema_extra=one_of(DISTILL_LOSSES),
        description="The contrastive term and the similarity of the student's scores: simlm (SimLM eq. 5, "
        "cosine / tau) | simlm-eq3 | infonce (CDMAE eq. 11, dot product).",
    )
    group_size: int = Field(
        FT.DISTILL_GROUP_SIZE, ge=2, description="1 positive + n-1 scored negatives per query."
    )
    alpha: float = Field(
        FT.ALPHA, ge=0, le=1, description="Weight of the contrastive term (SimLM eq. 5, CDMAE eq. 11)."
    )
    tau: float | None = Field(
        None, gt=0, description=f"Temperature: default {FT.TAU} for simlm*, 1 for infonce."
    )
    query_max_length: int = Field(FT.QUERY_MAX_LENGTH, ge=MIN_LENGTH, description=_QUERY_LENGTH)
    passage_max_length: int = Field(FT.PASSAGE_MAX_LENGTH, ge=MIN_LENGTH, description=_PASSAGE_LENGTH)

    @model_validator(mode="after")
    def check_loss(self) -> DistillSettings:
        loss_checks(self)
        if self.loss not in DISTILL_LOSSES:
            raise ValueError(
                f"loss must be one of {DISTILL_LOSSES} (distillation's contrastive term), got {self.loss!r}"
            )
        return self


class RefreshSettings(Model):
    """ANCE negatives: every ``every`` steps the retriever being trained encodes the corpus and its
    training queries (``batch_size`` sequences per pass, shards of at most ``shard_size`` rows) and
    its negatives are mined again with ``mine``."""

    every: int = Field(..., ge=1, description="Steps between refreshes.")
    mine: MineSettings = Field(default_factory=MineSettings)
    batch_size: int = Field(ENCODE_BATCH_SIZE, ge=1, description="Sequences per forward pass when encoding.")
    shard_size: int = Field(
        SHARD_SIZE, ge=1, description="Rows per embedding shard, the unit processes split."
    )


if TYPE_CHECKING:
    MineTable = MineSettings
else:
    MineTable = partial(MineSettings, "MineTable")  # the keys a [mine] table sets


class RetrieverCommand(RetrieverSettings):
    """``dense-pt train retriever`` and its TOML file (``[mine]``: how a refresh mines, with
    ``refresh_every`` only)."""

    pooling: Pooling = Field(
        "auto", description="cls | mean | auto (from the init's sentence-transformers files)."
    )
    epochs: Number | None = Field(None, gt=0, description=_EPOCHS)
    encode_batch_size: int = Field(
        ENCODE_BATCH_SIZE, ge=1, description="With --refresh-every: sequences per forward pass when encoding."
    )
    mine: MineTable = Field(default_factory=MineTable)
    train: TrainTable = Field(default_factory=TrainTable)

    @model_validator(mode="after")
    def check_mine(self) -> RetrieverCommand:
        if self.refresh_every is not None:
            try:
                self.refresh_mine()  # the checks across keys (skip_top < depth, the choices)
            except InvalidArgumentError as exc:
                raise ValueError(f"mine: {exc}") from None
        return self

    def refresh_mine(self) -> MineSettings:
        """The mining settings of a refresh: those given over ``dense-pt negatives mine``' defaults."""
        return MineSettings(**self.mine.model_dump(exclude_none=True))

    def refresh(self) -> RefreshSettings | None:
        """The refresh settings, None without ``refresh_every`` (where mining settings are refused)."""
        given = self.mine.model_dump(exclude_none=True)
        if self.refresh_every is None:
            if given:
                raise InvalidArgumentError(
                    f"mining settings ({', '.join(sorted(given))}) are for --refresh-every (ANCE negatives): "
                    "set it too"
                )
            return None
        return RefreshSettings(
            every=self.refresh_every, mine=self.refresh_mine(), batch_size=self.encode_batch_size
        )


class RerankerCommand(RerankerSettings):
    """``dense-pt train reranker`` and its TOML file."""

    epochs: Number | None = Field(None, gt=0, description=_EPOCHS)
    train: TrainTable = Field(default_factory=TrainTable)


class DistillCommand(DistillSettings):
    """``dense-pt train distill`` and its TOML file."""

    epochs: Number | None = Field(None, gt=0, description=_EPOCHS)
    train: TrainTable = Field(default_factory=TrainTable)
