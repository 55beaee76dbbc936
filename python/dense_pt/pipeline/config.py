"""The pipeline's TOML configuration: validated, paths resolved against the file's folder.

Top-level keys: ``out``, ``seed``. Tables: ``[data]`` (corpus, queries, qrels, dev_fraction,
max_length, and optionally dev_qrels: a fixed dev split instead of drawing dev_fraction of qrels), ``[model]`` (init: a folder, a config.json, or ``pkg:PACKAGE/sub/path`` for a model
shipped inside an installed Python package; pooling), ``[pretrain]`` (optional: ``method``,
``max_length``, the ``options`` / ``train`` sub-tables of ``dense-pt pretrain``, and for cdmae a
``pmi`` sub-table: max_n, min_count, window, memory_gb for the importance column; the encoder it
writes replaces ``[model] init`` for every later stage), ``[eval]`` (k, measures, rel_level, tie_break:
see ``dense_pt.evaluation``), ``[encode]`` (batch_size, query_max_length,
passage_max_length), ``[r1]`` / ``[r2]`` / ``[distill]`` (loss, group_size, tau (None: the loss's own), alpha,
query_max_length, passage_max_length, and a ``train`` sub-table for the engine), ``[mine]``
(depth, num, skip_top, margin), ``[reranker]`` (group_size, max_length, depth, num, rerank_depth,
score_num, ``train``). Unknown keys are errors.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Any

from dense_pt.errors import FormatError, InvalidArgumentError

DEFAULTS: dict[str, dict[str, Any]] = {
    "data": {"corpus": None, "queries": None, "qrels": None, "dev_qrels": None, "dev_fraction": 0.1,
             "max_length": 256},
    "model": {"init": None, "pooling": "auto"},
    "eval": {"k": 100, "measures": ["nDCG@10", "R@100", "RR@10"], "rel_level": 1, "tie_break": "docno"},
    "encode": {"batch_size": 64, "query_max_length": 64, "passage_max_length": 256},
    "r1": {"loss": "simlm", "group_size": 8, "tau": None, "query_max_length": 64, "passage_max_length": 192, "train": {}},
    "mine": {"depth": 200, "num": 30, "skip_top": 0, "margin": None, "bm25_depth": 200},
    "r2": {"loss": "simlm", "group_size": 8, "tau": None, "query_max_length": 64, "passage_max_length": 192, "train": {}},
    "reranker": {"enabled": True, "group_size": 8, "query_max_length": 64, "max_length": 256, "depth": 100,
                 "num": 30, "rerank_depth": 100, "score_num": 15, "train": {}},
    "distill": {"enabled": True, "init": "r2", "loss": "simlm", "group_size": 8, "alpha": 0.2, "tau": None, "query_max_length": 64,
                "passage_max_length": 192, "train": {}},
    "pretrain": {},
}  # fmt: skip
TOP = {"out": None, "seed": 13}


def resolve_model(value: str, base: Path) -> Path:
    if value.startswith("pkg:"):
        pkg, _, sub = value[4:].partition("/")
        try:
            root = importlib.resources.files(pkg)
        except ModuleNotFoundError:
            raise InvalidArgumentError(f"model {value!r}: package {pkg!r} is not installed") from None
        return Path(str(root / sub))
    p = Path(value)
    return p if p.is_absolute() else (base / p)


def load_pipeline_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """Read and validate a pipeline TOML; ``overrides`` (``"table.key=VALUE"``) replace or add single
    values first (VALUE in TOML syntax, else taken as a string), so one file serves several runs."""
    from dense_pt.training import read_toml

    path = Path(path)
    raw = apply_overrides(read_toml(path), overrides)
    return validate_config(raw, path.parent.resolve(), str(path))


def apply_overrides(raw: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``raw`` with each ``dotted.key=VALUE`` set (tables created as needed); a copy, ``raw`` is kept."""
    import copy
    import tomllib

    out = copy.deepcopy(raw)
    for item in overrides:
        key, sep, text = item.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(p.strip() for p in parts):
            raise InvalidArgumentError(f"--set {item!r}: expected dotted.key=VALUE, e.g. r1.group_size=4")
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text  # a bare string: a path, a method name
        node = out
        for i, p in enumerate(parts[:-1]):
            node = node.setdefault(p.strip(), {})
            if not isinstance(node, dict):
                raise InvalidArgumentError(f"--set {item!r}: {'.'.join(parts[: i + 1])} is not a table")
        node[parts[-1].strip()] = value
    return out


def validate_config(raw: dict[str, Any], base: Path, where: str = "config") -> dict[str, Any]:
    cfg: dict[str, Any] = dict(TOP)
    for key, value in raw.items():
        if key in TOP:
            cfg[key] = value
        elif key in DEFAULTS:
            if not isinstance(value, dict):
                raise FormatError(f"[{key}] must be a table", where)
            if key == "pretrain":
                continue
            unknown = set(value) - set(DEFAULTS[key])
            if unknown:
                raise FormatError(f"[{key}] has unknown key(s) {sorted(unknown)}", where)
        else:
            raise FormatError(f"unknown key or table {key!r}", where)
    for table, defaults in DEFAULTS.items():
        cfg[table] = {**defaults, **raw.get(table, {})}
    for key in ("corpus", "queries", "qrels"):
        if cfg["data"][key] is None:
            raise FormatError(f"[data] {key} is required", where)
        p = Path(cfg["data"][key])
        cfg["data"][key] = p if p.is_absolute() else base / p
    if cfg["data"]["dev_qrels"] is not None:
        p = Path(cfg["data"]["dev_qrels"])
        cfg["data"]["dev_qrels"] = p if p.is_absolute() else base / p
    if cfg["model"]["init"] is None:
        raise FormatError("[model] init is required", where)
    cfg["model"]["init"] = resolve_model(str(cfg["model"]["init"]), base)
    if cfg["out"] is None:
        raise FormatError("'out' is required", where)
    out = Path(cfg["out"])
    cfg["out"] = out if out.is_absolute() else base / out
    if not 0 < cfg["data"]["dev_fraction"] < 1:
        raise FormatError("[data] dev_fraction must lie in (0, 1)", where)
    if cfg["distill"]["init"] not in ("r2", "model"):
        raise FormatError("[distill] init must be 'r2' or 'model'", where)
    cfg["pretrain"] = _pretrain_section(raw.get("pretrain") or {}, where, cfg["data"]["max_length"])
    _check_eval_and_losses(cfg, where)
    return cfg


def _check_eval_and_losses(cfg: dict[str, Any], where: str) -> None:
    """Measures, evaluation conventions, loss names and temperatures, checked before any stage runs."""
    from dense_pt.data.judgements import TIE_BREAKS
    from dense_pt.evaluation.metrics import parse_measures

    ev = cfg["eval"]
    try:
        parse_measures(ev["measures"], ev["rel_level"])
    except InvalidArgumentError as exc:
        raise FormatError(f"[eval] {exc}", where) from None
    if ev["tie_break"] not in TIE_BREAKS:
        raise FormatError(f"[eval] tie_break must be one of {TIE_BREAKS}, got {ev['tie_break']!r}", where)
    from dense_pt.objectives.retrieval import DISTILL_LOSSES, resolve_loss

    for table in ("r1", "r2", "distill"):
        try:
            resolve_loss(cfg[table]["loss"]).resolve_tau(cfg[table]["tau"])
        except InvalidArgumentError as exc:
            raise FormatError(f"[{table}] {exc}", where) from None
    if cfg["distill"]["loss"] not in DISTILL_LOSSES:
        raise FormatError(
            f"[distill] loss must be one of {DISTILL_LOSSES}, got {cfg['distill']['loss']!r}", where
        )


PRETRAIN_KEYS = ("method", "max_length", "options", "train", "pmi")
# How the pipeline builds the store's importance column for methods that mask by it (cdmae).
PMI_DEFAULTS: dict[str, Any] = {"max_n": 4, "min_count": 1, "window": 4, "memory_gb": 8.0}
IMPORTANCE_METHODS = frozenset({"cdmae"})


def _pretrain_section(sec: dict[str, Any], where: str, data_max_length: int) -> dict[str, Any] | None:
    """``[pretrain]`` checked key by key now, so a typo fails before any stage runs."""
    if not sec:
        return None
    from dense_pt.objectives import MethodOptions, check_method
    from dense_pt.training import TrainConfig, dataclass_from_mapping

    unknown = set(sec) - set(PRETRAIN_KEYS)
    if unknown:
        raise FormatError(
            f"[pretrain] has unknown key(s) {sorted(unknown)} (known: {', '.join(PRETRAIN_KEYS)})", where
        )
    method = sec.get("method", "simlm")
    try:
        check_method(method)
    except InvalidArgumentError as exc:
        raise FormatError(f"[pretrain] method: {exc}", where) from None
    max_length = sec.get("max_length", data_max_length + 2)  # the store's passages plus [CLS]/[SEP]
    if isinstance(max_length, bool) or not isinstance(max_length, int):
        raise FormatError(f"[pretrain] max_length must be an integer, got {max_length!r}", where)
    for name, cls in (("options", MethodOptions), ("train", TrainConfig)):
        if not isinstance(sec.get(name, {}), dict):
            raise FormatError(f"[pretrain.{name}] must be a table", where)
        dataclass_from_mapping(cls, sec.get(name, {}), where, f"pretrain.{name}")
    pmi = sec.get("pmi")
    if pmi is not None:
        if not isinstance(pmi, dict):
            raise FormatError("[pretrain.pmi] must be a table", where)
        unknown = set(pmi) - set(PMI_DEFAULTS)
        if unknown:
            raise FormatError(
                f"[pretrain.pmi] has unknown key(s) {sorted(unknown)} (known: {', '.join(PMI_DEFAULTS)})",
                where,
            )
        if method not in IMPORTANCE_METHODS:
            raise FormatError(
                f"[pretrain.pmi] is only used by {', '.join(sorted(IMPORTANCE_METHODS))}, not {method}", where
            )
    if method in IMPORTANCE_METHODS:
        pmi = {**PMI_DEFAULTS, **(pmi or {})}
        for key in ("max_n", "min_count", "window"):
            if isinstance(pmi[key], bool) or not isinstance(pmi[key], int) or pmi[key] < 1:
                raise FormatError(f"[pretrain.pmi] {key} must be a positive integer, got {pmi[key]!r}", where)
        if pmi["window"] > pmi["max_n"]:
            raise FormatError(
                f"[pretrain.pmi] window {pmi['window']} needs max_n >= window, got {pmi['max_n']}", where
            )
    return {"method": method, "max_length": max_length, "options": dict(sec.get("options", {})),
            "train": dict(sec.get("train", {})), "pmi": pmi}  # fmt: skip
