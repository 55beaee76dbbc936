"""The pipeline file: one model per table, the file itself (``PipelineFile``), and the profiles.

The models hold the defaults: the ``paper`` profile is SimLM's Table 13, read from
``dense_pt.config.defaults.finetune`` (where each number is written, with its source). A profile is an
overlay applied to the file's tables before validation: ``cpu`` shrinks groups, depths, batches and
epochs for a small machine. Checks that need another module's registry (loss names, measures,
pools, the pre-training methods) read the plain lists of ``dense_pt.config.choices``; the measure
names (ir-measures') and the pre-training registry are checked by ``dense_pt.pipeline.config``."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from dense_pt.config.base import Model
from dense_pt.config.choices import PRETRAIN_METHODS
from dense_pt.config.defaults import finetune as FT
from dense_pt.config.evaluation import PIPELINE_MEASURES, EvalMeasures
from dense_pt.config.finetune import DistillSettings, Number, RerankerSettings, RetrieverSettings
from dense_pt.config.fusion import FusionMethod
from dense_pt.config.options import MethodOptions
from dense_pt.config.pmi import PmiSettings as PmiTable
from dense_pt.config.pretrain import MIN_LENGTH
from dense_pt.config.retrieval import ENCODE_BATCH_SIZE, MineSettings
from dense_pt.config.train import TrainTable


def _train(values: dict[str, Any]) -> Any:
    return Field(default_factory=lambda: TrainTable(**values))


class DataTable(Model):
    corpus: str
    queries: str
    qrels: str
    dev_qrels: str | None = None  # a fixed dev split instead of drawing dev_fraction of qrels
    dev_fraction: float = Field(0.1, gt=0, lt=1)
    split_seed: int | None = None  # None: the run's seed (a study's cells share one)
    max_length: int = Field(256, ge=MIN_LENGTH)  # tokens the corpus store keeps per passage


class ModelTable(Model):
    init: str  # a folder, a config.json, pkg:PACKAGE/sub/path, or a hub name in the local cache
    pooling: str = "auto"


class EvalTable(EvalMeasures):
    """``[eval]``: ``dense-pt evaluate``'s measures, level and tie-break, the report's own default
    measures, and the depth of each evaluated run."""

    k: int = Field(100, ge=1)
    measures: list[str] = Field(default_factory=lambda: list(PIPELINE_MEASURES))


def _refuse_moved(data: Any, moved: dict[str, str]) -> Any:
    """A key that moved is refused, naming where it went."""
    for key in sorted(set(data) & set(moved) if isinstance(data, dict) else ()):
        raise ValueError(f"{key}: {moved[key]}")
    return data


_LENGTHS_MOVED = ("encoding uses each retriever stage's own lengths: set {0} in [r1] / [r2] / [distill] "
                  "(zero-shot encodes with [r1]'s)")  # fmt: skip


class EncodeTable(Model):
    batch_size: int = Field(ENCODE_BATCH_SIZE, ge=1)  # dense-pt encode's default

    @model_validator(mode="before")
    @classmethod
    def moved_keys(cls, data: Any) -> Any:
        return _refuse_moved(
            data, {k: _LENGTHS_MOVED.format(k) for k in ("query_max_length", "passage_max_length")}
        )


# A stage's fingerprint hashes its table (``dense_pt.pipeline.config.settings``). A key added to a
# table after pipeline folders were finished, holding the value with which the stage computes what
# the older code computed, is left out of the fingerprint, so those folders stay up to date; any
# other value changes the fingerprint and the stage reruns. Per table, and for the ``train`` tables
# (whose ``weight_decay`` the ``cpu`` profile now sets to the engine's 0.01 that older runs used).
TRAIN_LEGACY_VALUES: dict[str, Any] = {"weight_decay": 0.01}


class RetrieverTable(RetrieverSettings):
    """``[r1]`` / ``[r2]``: a bi-encoder stage (``dense-pt train retriever``'s settings);
    refresh_every: ANCE negatives, mined with ``[mine]``'s settings."""

    LEGACY_VALUES: ClassVar[dict[str, Any]] = {"refresh_every": None, "margin": FT.TRIPLET_MARGIN}

    epochs: Number | None = Field(FT.RETRIEVER_EPOCHS, gt=0)  # None: train.max_steps decides
    train: TrainTable = _train(FT.RETRIEVER_TRAIN)


class R2Table(RetrieverTable):
    """``[r2]``: init "model" (SimLM Figure 2: from the pipeline's model again) or "r1" (ANCE: the
    training continues from the BM25-negative retriever, its warm-up)."""

    LEGACY_VALUES: ClassVar[dict[str, Any]] = {**RetrieverTable.LEGACY_VALUES, "init": "model"}

    init: Literal["model", "r1"] = "model"


class MineTable(MineSettings):
    """``[mine]``: hard negatives from the previous retriever (``dense-pt negatives mine``'s
    settings; the first round mines BM25's top bm25_depth)."""

    bm25_depth: int = Field(FT.NEGATIVES_DEPTH, ge=1)
    relative_margin: float | None = Field(None, ge=0, lt=1)  # the pipeline keeps R in [0, 1)

    @model_validator(mode="before")
    @classmethod
    def moved_keys(cls, data: Any) -> Any:
        return _refuse_moved(
            data, {"margin": "renamed absolute_margin (sentence-transformers' name; same meaning)"}
        )

    @model_validator(mode="after")
    def check_scores(self) -> MineTable:
        if self.max_score is not None and self.min_score is not None and self.min_score > self.max_score:
            raise ValueError(
                f"min_score {self.min_score} exceeds max_score {self.max_score}: nothing would be kept"
            )
        return self


class RerankerTable(RerankerSettings):
    """``[reranker]``: the cross-encoder (``dense-pt train reranker``'s settings) and the mining and
    scoring around it; score_num 0: score every mined negative."""

    LEGACY_VALUES: ClassVar[dict[str, Any]] = {"loss": "listwise", "forward_factor": None}

    enabled: bool = True
    init: str = FT.RERANKER_INIT  # 'model' (the pipeline's model), a path or a hub name
    depth: int = Field(FT.NEGATIVES_DEPTH, ge=1)
    num: int = Field(0, ge=0)
    rerank_depth: int = Field(FT.RERANK_DEPTH, ge=1)
    score_num: int = Field(0, ge=0)
    epochs: Number | None = Field(FT.RERANKER_EPOCHS, gt=0)
    train: TrainTable = _train(FT.RERANKER_TRAIN)


class DistillTable(DistillSettings):
    """``[distill]``: ``dense-pt train distill``'s settings. init "model": the pipeline's
    pre-trained model (SimLM Figure 2)."""

    enabled: bool = True
    init: Literal["model", "r2"] = "model"
    epochs: Number | None = Field(FT.DISTILL_EPOCHS, gt=0)
    train: TrainTable = _train(FT.DISTILL_TRAIN)


class FusionTable(FusionMethod):
    """``[fusion]``: BM25 + a dense run after the last dense stage (off by default: not part of the
    papers' pipeline). dense "auto": distill when it runs, else r2; weight "tune": chosen on the
    training queries (dev stays unseen). ``method`` and ``rrf_k`` are ``dense-pt fuse``'s."""

    enabled: bool = False
    dense: Literal["auto", "r1", "r2", "distill"] = "auto"
    weight: Literal["tune"] | float = Field("tune", union_mode="left_to_right")

    @model_validator(mode="after")
    def check_weight(self) -> FusionTable:
        if self.weight != "tune" and not 0 <= float(self.weight) <= 1:
            raise ValueError(f"weight must be 'tune' or a number in [0, 1], got {self.weight!r}")
        return self


class PretrainTable(Model):
    """``[pretrain]``: as ``dense-pt pretrain`` (method required: each method needs its own
    settings); max_length default: the method's declared length, capped at ``[data] max_length``."""

    method: str
    paper: str | None = None
    max_length: int | None = Field(None, ge=MIN_LENGTH)
    options: MethodOptions = Field(default_factory=MethodOptions)
    train: TrainTable = Field(default_factory=TrainTable)
    pmi: PmiTable | None = None

    @model_validator(mode="before")
    @classmethod
    def method_first(cls, data: Any) -> Any:
        if isinstance(data, dict) and "method" not in data:  # each method needs its own settings
            raise ValueError(f"method is required: one of {', '.join(PRETRAIN_METHODS)}")
        return data


class PipelineFile(Model):
    """The whole file after the profile's overlay. Checks across tables run here."""

    out: str
    seed: int = Field(13, ge=0)
    profile: Literal["paper", "cpu"] = "paper"
    data: DataTable
    model: ModelTable
    eval: EvalTable = Field(default_factory=EvalTable)
    encode: EncodeTable = Field(default_factory=EncodeTable)
    r1: RetrieverTable = Field(default_factory=RetrieverTable)
    mine: MineTable = Field(default_factory=MineTable)
    r2: R2Table = Field(default_factory=R2Table)
    reranker: RerankerTable = Field(default_factory=RerankerTable)
    distill: DistillTable = Field(default_factory=DistillTable)
    pretrain: PretrainTable | None = None
    fusion: FusionTable = Field(default_factory=FusionTable)

    @model_validator(mode="after")
    def check_across_tables(self) -> PipelineFile:
        if (
            self.fusion.enabled
            and self.fusion.dense == "distill"
            and not (self.distill.enabled and self.reranker.enabled)
        ):
            raise ValueError("fusion.dense = 'distill' needs the re-ranker and distillation stages")
        _check_lengths(self)
        return self


def _check_lengths(cfg: PipelineFile) -> None:
    """The store keeps ``[data] max_length`` tokens of a passage ([CLS]/[SEP] counted): a stage
    reading more would silently see passages cut shorter than it was told."""
    store = cfg.data.max_length
    rr = cfg.reranker
    distill_on = rr.enabled and cfg.distill.enabled  # distillation needs the re-ranker
    for name in ("r1", "r2", "distill") if distill_on else ("r1", "r2"):
        n = getattr(cfg, name).passage_max_length
        if n > store:
            raise ValueError(f"{name}.passage_max_length {n} exceeds data.max_length {store}, the length the "
                             "corpus store keeps: raise data.max_length")  # fmt: skip
    if rr.enabled and rr.max_length < rr.query_max_length + 4:
        raise ValueError(
            f"reranker.max_length {rr.max_length} leaves a query of query_max_length {rr.query_max_length} "
            f"tokens no room for the passage ([CLS] query [SEP] passage [SEP]): need at least "
            f"{rr.query_max_length + 4}"
        )
    # the re-ranker's passage gets max_length - 3 - (query tokens >= 1); the store gives max_length - 2
    if rr.enabled and rr.max_length - 2 > store:
        raise ValueError(
            f"reranker.max_length {rr.max_length} leaves passages room for more tokens than data.max_length "
            f"{store} keeps: raise data.max_length to at least {rr.max_length - 2}"
        )


# What each profile changes in the models' defaults (tables merged key by key, ``train`` too).
# "cpu" is sized for a 2-core machine, a small encoder and a BEIR-sized training set (SciFact: 809
# judged queries): smaller groups, shallower mining, smaller batches, fewer epochs and a warm-up
# fraction instead of 1,000 steps. Lengths, temperatures, alpha and learning rates stay the paper's.
# Weight decay stays the engine's 0.01 and the re-ranker plain listwise (a quarter of a group of 8 is
# the positive and one negative): the settings BENCHMARKS.md's SciFact numbers were measured with.
_CPU_TRAIN = {"batch_size": 16, "warmup": 0.1, "weight_decay": 0.01}
PROFILES: dict[str, dict[str, dict[str, Any]]] = {
    "paper": {},
    "cpu": {
        "r1": {"group_size": 4, "epochs": 1, "train": _CPU_TRAIN},
        "r2": {"group_size": 4, "epochs": 1, "train": _CPU_TRAIN},
        "mine": {"depth": 100, "bm25_depth": 100, "num": 30},
        "reranker": {"group_size": 8, "loss": "listwise", "depth": 50, "num": 30, "rerank_depth": 50,
                     "score_num": 7, "epochs": 1, "train": {"batch_size": 8, "warmup": 0.1, "weight_decay": 0.01}},
        "distill": {"group_size": 6, "epochs": 2, "train": _CPU_TRAIN},
    },
}  # fmt: skip
STAGE_TABLES = ("r1", "r2", "reranker", "distill")
# Each stage's engine settings: a file's (or profile's) train table is merged over these key by key.
STAGE_TRAIN = {"r1": FT.RETRIEVER_TRAIN, "r2": FT.RETRIEVER_TRAIN, "reranker": FT.RERANKER_TRAIN,
               "distill": FT.DISTILL_TRAIN}  # fmt: skip


def table_defaults(table: str) -> dict[str, Any]:
    """The ``paper`` profile's values of one table with defaults for every key (r1, r2, mine,
    reranker, distill, eval, encode, fusion): what ``dense-pt pipeline`` uses when a file is silent."""
    value = PipelineFile.model_fields[table].get_default(call_default_factory=True)
    out = value.model_dump()
    if table in STAGE_TABLES:
        out["train"] = value.train.model_dump(exclude_none=True)
    return out
