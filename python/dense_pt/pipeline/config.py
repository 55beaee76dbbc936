"""The pipeline's TOML configuration: validated, paths resolved against the file's folder.

Top-level keys: ``out``, ``seed``. Tables: ``[data]`` (corpus, queries, qrels, dev_fraction,
max_length), ``[model]`` (init: a folder, a config.json, or ``pkg:PACKAGE/sub/path`` for a model
shipped inside an installed Python package; pooling), ``[pretrain]`` (optional: the keys of
``dense-pt pretrain``), ``[eval]`` (k, measures), ``[encode]`` (batch_size, query_max_length,
passage_max_length), ``[r1]`` / ``[r2]`` / ``[distill]`` (loss, group_size, tau, alpha,
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
    "data": {"corpus": None, "queries": None, "qrels": None, "dev_fraction": 0.1, "max_length": 256},
    "model": {"init": None, "pooling": "auto"},
    "eval": {"k": 100, "measures": ["nDCG@10", "R@100", "RR@10"]},
    "encode": {"batch_size": 64, "query_max_length": 64, "passage_max_length": 256},
    "r1": {"loss": "simlm", "group_size": 8, "tau": 0.02, "query_max_length": 64, "passage_max_length": 192, "train": {}},
    "mine": {"depth": 200, "num": 30, "skip_top": 0, "margin": None, "bm25_depth": 200},
    "r2": {"loss": "simlm", "group_size": 8, "tau": 0.02, "query_max_length": 64, "passage_max_length": 192, "train": {}},
    "reranker": {"enabled": True, "group_size": 8, "query_max_length": 64, "max_length": 256, "depth": 100,
                 "num": 30, "rerank_depth": 100, "score_num": 15, "train": {}},
    "distill": {"enabled": True, "init": "r2", "group_size": 8, "alpha": 0.2, "tau": 0.02, "query_max_length": 64,
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


def load_pipeline_config(path: str | Path) -> dict[str, Any]:
    from dense_pt.training import read_toml

    path = Path(path)
    raw = read_toml(path)
    return validate_config(raw, path.parent.resolve(), str(path))


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
    cfg["pretrain"] = raw.get("pretrain") or None
    return cfg
