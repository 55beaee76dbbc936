"""The fine-tuning jobs' models: ``dense-pt train retriever | reranker | distill`` and ``dense-pt
score``, their TOML files (the stage's keys at the top, ``[train]`` for the engine) and the
``dense_pt.finetune.stages`` functions, which take them whole.

``RetrieverSettings`` / ``RerankerSettings`` / ``DistillSettings`` hold what a stage and the
pipeline's ``[r1]`` / ``[r2]`` / ``[reranker]`` / ``[distill]`` tables share (the tables add their
own epochs default and ``train``); the ``*Command`` models add what only the command sets. The
``*Inputs`` models say what a job reads and where it writes. The defaults are SimLM's Table 13,
read from ``dense_pt.config.defaults.finetune``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field, Strict, model_validator

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
# A path given as a string or a Path (the models are strict elsewhere: a number is not a string)
PathArg = Annotated[Path, Strict(False)]


def _id_list(value: Any) -> Any:
    """Query ids given as any collection (a tuple, a set, a pyarrow or numpy array) as a list: a
    before-validator, as pydantic < 2.7 refuses ``Strict(False)`` on a list type."""
    if isinstance(value, str | bytes | list) or not hasattr(value, "__iter__"):
        return value
    return list(value)


# Query ids as any sequence (a list, a tuple, a set)
Ids = Annotated[list[str], BeforeValidator(_id_list)]

_EPOCHS = "Passes over the training queries (sets train.max_steps; unset: max_steps decides)."
_QUERY_LENGTH = "Tokens per query, [CLS] and [SEP] included."
_PASSAGE_LENGTH = "Tokens per passage, [CLS] and [SEP] included."
_POOLING = "cls | mean | auto (from the init's sentence-transformers files)."


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
    margin: float = Field(
        FT.TRIPLET_MARGIN,
        gt=0,
        description="triplet: the margin of SEED's hinge loss (the other losses: unused).",
    )
    refresh_every: int | None = Field(
        None,
        ge=1,
        description="ANCE negatives: every N steps re-encode the corpus with the model being trained, search "
        "the training queries and mine fresh negatives (the mining settings: [mine]); unset: the negatives "
        "file throughout.",
    )
    epochs: Number | None = Field(None, gt=0, description=_EPOCHS)

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
    epochs: Number | None = Field(None, gt=0, description=_EPOCHS)

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
    epochs: Number | None = Field(None, gt=0, description=_EPOCHS)

    @model_validator(mode="after")
    def check_loss(self) -> DistillSettings:
        loss_checks(self)
        if self.loss not in DISTILL_LOSSES:
            raise ValueError(
                f"loss must be one of {DISTILL_LOSSES} (distillation's contrastive term), got {self.loss!r}"
            )
        return self


class RefreshSettings(Model):
    """How ANCE negatives are refreshed (every ``RetrieverSettings.refresh_every`` steps): the
    retriever being trained encodes the corpus and its training queries (``batch_size`` sequences
    per pass, shards of at most ``shard_size`` rows) and its negatives are mined again with ``mine``."""

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

    pooling: Pooling = Field("auto", description=_POOLING)
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
        """How a refresh runs, None without ``refresh_every`` (where mining settings are refused)."""
        given = self.mine.model_dump(exclude_none=True)
        if self.refresh_every is None:
            if given:
                raise InvalidArgumentError(
                    f"mining settings ({', '.join(sorted(given))}) are for --refresh-every (ANCE negatives): "
                    "set it too"
                )
            return None
        return RefreshSettings(mine=self.refresh_mine(), batch_size=self.encode_batch_size)


class RerankerCommand(RerankerSettings):
    """``dense-pt train reranker`` and its TOML file."""

    train: TrainTable = Field(default_factory=TrainTable)


class DistillCommand(DistillSettings):
    """``dense-pt train distill`` and its TOML file."""

    train: TrainTable = Field(default_factory=TrainTable)


class TrainingInputs(Model):
    """What a training job reads and where it writes (``out``: resumable, the model in
    ``out/model``); ``restrict_to``: train on these query ids only (default: every judged query)."""

    model: PathArg = Field(description="The initial checkpoint: a local HF folder or a config.json.")
    corpus: PathArg = Field(description="Corpus store folder.")
    queries: PathArg = Field(description="Queries file (BEIR jsonl or qid<TAB>text).")
    qrels: PathArg = Field(description="Training judgements.")
    out: PathArg = Field(description="Output folder.")
    restrict_to: Ids | None = Field(None, description="The training queries (default: all judged).")

    # Not files: the manifest records the others with their hashes.
    NOT_FILES: ClassVar[frozenset[str]] = frozenset({"out", "restrict_to", "pooling"})

    def files(self) -> dict[str, Path | None]:
        """The files read, as the manifest records them (name: path)."""
        return {k: v for k, v in self if k not in self.NOT_FILES}


class RetrieverInputs(TrainingInputs):
    """``train_retriever``'s inputs: a negatives file (.dpneg; none: in-batch negatives only) and
    how the model pools (as sentence-transformers' ``Pooling``, Tevatron's model arguments)."""

    negatives: PathArg | None = Field(None, description="Negatives file (.dpneg) from negatives mine.")
    pooling: Pooling = Field("auto", description=_POOLING)


class DistillInputs(TrainingInputs):
    """``train_distill``'s inputs: the re-ranker's scores (``dense-pt score``) are the teacher and
    give each query's group."""

    scores: PathArg = Field(description="Re-ranker scores from `dense-pt score`.")
    pooling: Pooling = Field("auto", description=_POOLING)


class RerankerInputs(TrainingInputs):
    """``train_reranker``'s inputs: the negatives mined from the previous retriever's top-k."""

    negatives: PathArg = Field(description="Negatives mined from the previous retriever's top-k.")


class ScoreInputs(Model):
    """``score``'s inputs: the re-ranker's logits for (query, positives + ``negatives``) of the
    judged queries (``restrict_to``: these only) go to ``out`` (manifest beside it)."""

    reranker: PathArg = Field(description="Re-ranker model folder (train reranker's OUT/model).")
    corpus: PathArg = Field(description="Corpus store folder.")
    queries: PathArg = Field(description="Queries file (BEIR jsonl or qid<TAB>text).")
    qrels: PathArg = Field(description="Judgements (positives come first).")
    negatives: PathArg = Field(description="Negatives file whose pairs to score.")
    out: PathArg = Field(description="Scores file (.dpneg layout).")
    restrict_to: Ids | None = Field(None, description="Score these query ids only.")
