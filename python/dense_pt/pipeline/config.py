"""The pipeline's TOML configuration: validated, paths resolved against the file's folder.

Top-level keys: ``out``, ``seed``, ``profile`` (``"paper"``: SimLM Table 13, the default; ``"cpu"``:
smaller groups, depths, batches and epochs for a small machine, see ``PROFILES``). Tables:
``[data]`` (corpus, queries, qrels, dev_fraction, max_length, and optionally dev_qrels: a fixed dev
split instead of drawing dev_fraction of qrels), ``[model]`` (init: a folder, a config.json,
``pkg:PACKAGE/sub/path`` for a model shipped inside an installed Python package, or a hub name
already in the local cache; pooling), ``[pretrain]`` (optional: ``method`` (required in the
table), ``paper`` (whose defaults, as ``dense-pt pretrain --paper``), ``max_length`` (default: the
method's declared length, capped at ``[data] max_length``), the ``options`` / ``train`` sub-tables of
``dense-pt pretrain``, and for cdmae a ``pmi`` sub-table: max_n, min_count, window, memory_gb for
the importance column; the encoder it writes replaces ``[model] init`` for every later stage), ``[eval]`` (k, measures, rel_level, tie_break: see
``dense_pt.evaluation``), ``[encode]`` (batch_size; the
lengths are each retriever stage's own), ``[r1]`` / ``[r2]`` / ``[distill]`` (loss, group_size,
tau (None: the loss's own), alpha, query_max_length, passage_max_length, epochs, and a ``train`` sub-table for the
engine; distill also init), ``[mine]`` (depth, num, skip_top, pool, sampling, absolute_margin,
relative_margin, relative_form, max_score, min_score, bm25_depth), ``[reranker]`` (init,
group_size, query_max_length, max_length, depth, num, rerank_depth, score_num, epochs, ``train``),
``[fusion]`` (enabled, dense, method, weight, rrf_k: BM25 + a dense run, ``dense_pt.retrieval.fusion``).
``[data] split_seed`` fixes the dev split independently of ``seed`` (a study's cells share it).
Unknown keys are errors, and so are values out of range (checked before any stage runs).

The tables, their defaults and their checks are the models of ``dense_pt.config.pipeline``; this
module reads the file, applies the profile and ``--set`` overrides, validates, resolves the paths
and hands the stages a ``ResolvedPipeline``: the validated tables, absolute paths, and ``[pretrain]``
checked against the method's registry (``ResolvedPretrain``). A stage's fingerprint reads a table
through ``settings``, which gives the same JSON as the dicts the stages read before.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from dense_pt.config.base import ConfigError, Model
from dense_pt.config.options import MethodOptions
from dense_pt.config.pipeline import (
    PROFILES,
    STAGE_TABLES,
    STAGE_TRAIN,
    TRAIN_LEGACY_VALUES,
    DistillTable,
    EncodeTable,
    EvalTable,
    FusionTable,
    MineTable,
    PipelineFile,
    PmiTable,
    PretrainTable,
    R2Table,
    RerankerTable,
    RetrieverTable,
)
from dense_pt.config.toml import apply_overrides, read_toml
from dense_pt.config.train import TrainConfig, TrainTable
from dense_pt.errors import InvalidArgumentError

if TYPE_CHECKING:
    from dense_pt.config.defaults.objectives import Profile

__all__ = ["PROFILES", "ResolvedPipeline", "ResolvedPretrain", "apply_overrides", "load_pipeline_config",
           "pretrain_length_note", "settings", "validate_config"]  # fmt: skip

# Methods whose pre-training masks by the store's importance column: the pipeline builds it (pmi).
IMPORTANCE_METHODS = frozenset({"cdmae"})


def settings(table: BaseModel) -> dict[str, Any]:
    """A table as a stage's fingerprint and manifest record it: every key, and a ``train`` sub-table
    with only the keys set (by the file, its profile or the stage's defaults), not every engine key.
    Byte for byte the dicts the stages read before the config was typed: finished stages stay done.
    Keys added since that hold the value that computes what older code did are left out
    (``LEGACY_VALUES`` of the table, ``TRAIN_LEGACY_VALUES``)."""
    legacy = getattr(type(table), "LEGACY_VALUES", {})
    out = {k: v for k, v in table.model_dump().items() if k not in legacy or v != legacy[k]}
    train = getattr(table, "train", None)
    if isinstance(train, BaseModel):
        out["train"] = {k: v for k, v in train.model_dump(exclude_none=True).items()
                        if k not in TRAIN_LEGACY_VALUES or v != TRAIN_LEGACY_VALUES[k]}  # fmt: skip
    return out


class ResolvedData(Model):
    """``[data]`` with its paths made absolute (the defaults live on ``DataTable``)."""

    corpus: Path
    queries: Path
    qrels: Path
    dev_qrels: Path | None
    dev_fraction: float
    split_seed: int | None
    max_length: int


class ResolvedModel(Model):
    """``[model]`` with ``init`` resolved (a folder or a config.json)."""

    init: Path
    pooling: str


class ResolvedPretrain(Model):
    """``[pretrain]`` checked against the method's registry: ``paper`` and ``max_length`` filled in,
    ``pmi`` present exactly when the method masks by the importance column."""

    method: str
    paper: str
    max_length: int
    options: MethodOptions
    train: TrainTable
    pmi: PmiTable | None

    def settings(self) -> dict[str, Any]:
        """As the pre-training stage's fingerprint reads it (options and train: the keys set)."""
        return {"method": self.method, "paper": self.paper, "max_length": self.max_length,
                "options": self.options.model_dump(exclude_none=True),
                "train": self.train.model_dump(exclude_none=True),
                "pmi": None if self.pmi is None else self.pmi.model_dump()}  # fmt: skip


class ResolvedPipeline(Model):
    """What every pipeline stage reads: the validated file (after its profile and ``--set``), paths
    absolute. Built by ``validate_config``; the tables are ``dense_pt.config.pipeline``'s models."""

    out: Path
    seed: int
    profile: str
    data: ResolvedData
    model: ResolvedModel
    eval: EvalTable
    encode: EncodeTable
    r1: RetrieverTable
    mine: MineTable
    r2: R2Table
    reranker: RerankerTable
    distill: DistillTable
    pretrain: ResolvedPretrain | None
    fusion: FusionTable


def resolve_model(value: str, base: Path) -> Path:
    from dense_pt.finetune.checkpoints import resolve_checkpoint

    return resolve_checkpoint(value, base, "[model] init", must_exist=False)


def load_pipeline_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> ResolvedPipeline:
    """Read and validate a pipeline TOML; ``overrides`` (``"table.key=VALUE"``) replace or add single
    values first (VALUE in TOML syntax, else taken as a string), so one file serves several runs."""
    path = Path(path)
    raw = apply_overrides(read_toml(path), overrides)
    return validate_config(raw, path.parent.resolve(), str(path))


def with_profile(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """``raw`` over its profile's overlay, table by table (``train`` sub-tables key by key). The
    file's own ``train.max_steps`` replaces the epochs (the profile's or the model's); a file
    giving both is ambiguous. An empty ``[pretrain]`` is no pre-training."""
    name = raw.get("profile", "paper")
    overlay = PROFILES.get(name, {}) if isinstance(name, str) else {}
    out = {k: v for k, v in raw.items() if not (k == "pretrain" and v == {})}
    for table, over in overlay.items():
        mine = raw.get(table, {})
        if isinstance(mine, dict):
            out[table] = {**over, **mine}
            if isinstance(mine.get("train"), dict):
                out[table]["train"] = {**over.get("train", {}), **mine["train"]}
    for table in STAGE_TABLES:
        mine = raw.get(table, {})
        if isinstance(out.get(table, {}), dict) and isinstance(out.get(table, {}).get("train"), dict):
            out[table] = {**out[table], "train": {**STAGE_TRAIN[table], **out[table]["train"]}}
        if isinstance(mine, dict) and isinstance(mine.get("train"), dict) and "max_steps" in mine["train"]:
            if mine.get("epochs") is not None:
                raise ConfigError(f"{table}: gives both epochs and train.max_steps: keep one", where)
            out[table] = {**out.get(table, {}), "epochs": None}
    return out


def validate_config(raw: dict[str, Any], base: Path, where: str = "config") -> ResolvedPipeline:
    """The file (after its profile) checked by ``PipelineFile``, then the checks that need the
    pre-training registry and the disk; paths resolved against ``base``."""
    model = PipelineFile.load(with_profile(raw, where), where)
    _check_measures(model.eval.measures, model.eval.rel_level, where)
    for table in STAGE_TABLES:  # the train tables as set (profile and file), not every engine key
        values = getattr(model, table).train.model_dump(exclude_none=True)
        TrainConfig.load({"seed": model.seed, **values}, where, f"{table}.train")
    d = model.data
    data = ResolvedData(
        corpus=_resolve(d.corpus, base), queries=_resolve(d.queries, base), qrels=_resolve(d.qrels, base),
        dev_qrels=None if d.dev_qrels is None else _resolve(d.dev_qrels, base), dev_fraction=d.dev_fraction,
        split_seed=d.split_seed, max_length=d.max_length,
    )  # fmt: skip
    pretrain = None if model.pretrain is None else _pretrain(model.pretrain, model.data.max_length, where)
    return ResolvedPipeline(
        out=_resolve(model.out, base), seed=model.seed, profile=model.profile, data=data,
        model=ResolvedModel(init=resolve_model(model.model.init, base), pooling=model.model.pooling),
        eval=model.eval, encode=model.encode, r1=model.r1, mine=model.mine, r2=model.r2, reranker=model.reranker,
        distill=model.distill, pretrain=pretrain, fusion=model.fusion,
    )  # fmt: skip


def _check_measures(measures: list[str], rel_level: int, where: str) -> None:
    """``[eval] measures`` are ir-measures' names: parsed by the evaluation, as a run will be."""
    from dense_pt.evaluation.metrics import parse_measures

    try:
        parse_measures(measures, rel_level)
    except InvalidArgumentError as exc:
        raise ConfigError(f"eval: {exc}", where) from None


def _resolve(value: str, base: Path) -> Path:
    p = Path(value)
    return p if p.is_absolute() else base / p


def _pretrain(sec: PretrainTable, data_max_length: int, where: str) -> ResolvedPretrain:
    """``[pretrain]`` checked against the method's registry now (method, paper, length, options,
    optimiser, warm-up), so a bad value fails before any stage runs."""
    from dense_pt.objectives import check_method, profile

    try:
        check_method(sec.method)
        prof = profile(sec.method, sec.paper)  # paper: whose defaults, e.g. condenser with SimLM's
        if sec.method == "querygen":
            raise InvalidArgumentError(
                "method querygen reads the LLM queries of `dense-pt expand`, which the pipeline does not run: "
                "pre-train with `dense-pt pretrain --method querygen --queries ...` and set [model] init to "
                "its encoder (examples/llm-expansion-pretrain.toml)"
            )
        max_length = _pretrain_max_length(sec.max_length, int(prof.top["max_length"].value), data_max_length)
        pmi = _pmi(sec)
        _check_pretrain_options(sec, prof.paper)
        _check_pretrain_train(sec, prof, where)
    except InvalidArgumentError as exc:
        if isinstance(exc, ConfigError):
            raise
        msg = str(exc)  # "key: reason" names a key of [pretrain]: one dotted path
        raise ConfigError(
            ("pretrain." if re.match(r"[a-z_.]+: ", msg) else "pretrain: ") + msg, where
        ) from None
    return ResolvedPretrain(method=sec.method, paper=prof.paper, max_length=max_length, options=sec.options,
                            train=sec.train, pmi=pmi)  # fmt: skip


def _pmi(sec: PretrainTable) -> PmiTable | None:
    if sec.pmi is not None and sec.method not in IMPORTANCE_METHODS:
        raise InvalidArgumentError(
            f"pmi is only used by {', '.join(sorted(IMPORTANCE_METHODS))}, not {sec.method}"
        )
    if sec.method not in IMPORTANCE_METHODS:
        return None
    return sec.pmi or PmiTable()


def _pretrain_max_length(given: int | None, declared: int, data_max_length: int) -> int:
    """The method's declared length, capped by the store: it keeps ``[data] max_length`` tokens of a
    passage, [CLS]/[SEP] counted, as pre-training's ``max_length`` counts them."""
    if given is None:
        return min(declared, data_max_length)
    if given > data_max_length:
        raise InvalidArgumentError(
            f"max_length: {given} exceeds data.max_length {data_max_length}, the length the corpus store keeps: "
            "raise data.max_length"
        )
    return given


def pretrain_length_note(pre: ResolvedPretrain, data_max_length: int) -> str:
    """Where ``[pretrain]``'s max_length came from, for the stage's log and manifest."""
    from dense_pt.objectives import profile

    declared = profile(pre.method, pre.paper).top["max_length"]
    n = pre.max_length
    if n == declared.value:
        return f"max_length {n}: {pre.method}'s declared default ({declared.source})"
    if n == data_max_length and n < declared.value:
        return (f"max_length {n} = [data] max_length, what the store keeps ({pre.method}'s declared "
                f"default is {declared.value})")  # fmt: skip
    return f"max_length {n}: set in [pretrain] ({pre.method}'s declared default is {declared.value})"


def _check_pretrain_options(sec: PretrainTable, paper: str) -> None:
    from dense_pt.config.defaults.objectives import REQUIRED, profile
    from dense_pt.objectives import resolve_options

    for name, d in profile(sec.method, paper).options.items():
        if d.value == REQUIRED and getattr(sec.options, name) is None:
            raise InvalidArgumentError(f"options.{name}: is required for {sec.method} ({d.source})")
    opts = resolve_options(sec.method, sec.options, paper)  # a missing generator, p_enc > p_dec ...
    if opts.generator is not None:
        from dense_pt.errors import FormatError
        from dense_pt.models.generator import resolve_generator

        try:
            resolve_generator(opts.generator)
        except (FileNotFoundError, FormatError) as exc:
            raise InvalidArgumentError(f"options.generator: {exc}") from None


def _check_pretrain_train(sec: PretrainTable, prof: Profile, where: str) -> None:
    """The engine's settings over the profile's, as ``build_config`` merges them; a warm-up longer
    than the run never reaches the peak rate."""
    values = sec.train.model_dump(exclude_none=True)
    train = TrainConfig.load({**prof.values("train"), **values}, where, "pretrain.train")
    # contrastive in the pipeline reads spans only: one curriculum stage, the whole run
    if train.warmup_steps() > train.max_steps:
        declared = prof.train.get("warmup")
        came = f" ({sec.method}'s default: {declared.source})" if "warmup" not in values and declared else ""
        raise InvalidArgumentError(
            f"train: a warm-up of {train.warmup_steps()} steps{came} is longer than the run "
            f"({train.max_steps} steps): set warmup (steps, or a fraction < 1)"
        )
