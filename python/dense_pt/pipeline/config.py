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
and hands the stages a plain dict (``model_dump``: the stages' fingerprints read it as before).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from dense_pt.config.base import ConfigError
from dense_pt.config.pipeline import PROFILES, STAGE_TABLES, STAGE_TRAIN, PipelineFile, PretrainTable
from dense_pt.config.toml import apply_overrides, read_toml
from dense_pt.config.train import TrainConfig
from dense_pt.errors import InvalidArgumentError

__all__ = ["PROFILES", "apply_overrides", "load_pipeline_config", "pretrain_length_note", "validate_config"]

# Methods whose pre-training masks by the store's importance column: the pipeline builds it (pmi).
IMPORTANCE_METHODS = frozenset({"cdmae"})


def resolve_model(value: str, base: Path) -> Path:
    from dense_pt.finetune.checkpoints import resolve_checkpoint

    return resolve_checkpoint(value, base, "[model] init", must_exist=False)


def load_pipeline_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
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


def validate_config(raw: dict[str, Any], base: Path, where: str = "config") -> dict[str, Any]:
    """The file (after its profile) checked by ``PipelineFile``, then the checks that need the
    pre-training registry and the disk; paths resolved against ``base``."""
    model = PipelineFile.load(with_profile(raw, where), where)
    _check_measures(model.eval.measures, model.eval.rel_level, where)
    cfg = model.model_dump(exclude={"pretrain"})
    for table in STAGE_TABLES:  # the train tables as set (profile and file), not every engine key
        cfg[table]["train"] = getattr(model, table).train.model_dump(exclude_none=True)
        TrainConfig.load({"seed": model.seed, **cfg[table]["train"]}, where, f"{table}.train")
    for key in ("corpus", "queries", "qrels", "dev_qrels"):
        if cfg["data"][key] is not None:
            cfg["data"][key] = _resolve(cfg["data"][key], base)
    cfg["model"]["init"] = resolve_model(model.model.init, base)
    cfg["out"] = _resolve(model.out, base)
    cfg["pretrain"] = (
        None if model.pretrain is None else _pretrain(model.pretrain, model.data.max_length, where)
    )
    return cfg


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


def _pretrain(sec: PretrainTable, data_max_length: int, where: str) -> dict[str, Any]:
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
    return {"method": sec.method, "paper": prof.paper, "max_length": max_length,
            "options": sec.options.model_dump(exclude_none=True),
            "train": sec.train.model_dump(exclude_none=True), "pmi": pmi}  # fmt: skip


def _pmi(sec: PretrainTable) -> dict[str, Any] | None:
    from dense_pt.config.pipeline import PmiTable

    if sec.pmi is not None and sec.method not in IMPORTANCE_METHODS:
        raise InvalidArgumentError(
            f"pmi is only used by {', '.join(sorted(IMPORTANCE_METHODS))}, not {sec.method}"
        )
    if sec.method not in IMPORTANCE_METHODS:
        return None
    return (sec.pmi or PmiTable()).model_dump()


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


def pretrain_length_note(pcfg: dict[str, Any], data_max_length: int) -> str:
    """Where ``[pretrain]``'s max_length came from, for the stage's log and manifest."""
    from dense_pt.objectives import profile

    declared = profile(pcfg["method"], pcfg["paper"]).top["max_length"]
    n = pcfg["max_length"]
    if n == declared.value:
        return f"max_length {n}: {pcfg['method']}'s declared default ({declared.source})"
    if n == data_max_length and n < declared.value:
        return (f"max_length {n} = [data] max_length, what the store keeps ({pcfg['method']}'s declared "
                f"default is {declared.value})")  # fmt: skip
    return f"max_length {n}: set in [pretrain] ({pcfg['method']}'s declared default is {declared.value})"


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


def _check_pretrain_train(sec: PretrainTable, prof: Any, where: str) -> None:
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
