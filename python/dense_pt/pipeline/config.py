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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dense_pt.errors import FormatError, InvalidArgumentError
from dense_pt.finetune import defaults as FT

# The "paper" profile: SimLM Table 13 (dense_pt.finetune.defaults says where each number comes from).
# tau None: the loss's own temperature (SimLM's FT.TAU for simlm / simlm-eq3, 1 for infonce).
_RETRIEVER = {"loss": "simlm", "group_size": FT.RETRIEVER_GROUP_SIZE, "tau": None,
              "query_max_length": FT.QUERY_MAX_LENGTH, "passage_max_length": FT.PASSAGE_MAX_LENGTH,
              "epochs": FT.RETRIEVER_EPOCHS, "train": FT.RETRIEVER_TRAIN}  # fmt: skip
DEFAULTS: dict[str, dict[str, Any]] = {
    "data": {"corpus": None, "queries": None, "qrels": None, "dev_qrels": None, "dev_fraction": 0.1,
             "split_seed": None, "max_length": 256},  # split_seed None: the run's seed
    "model": {"init": None, "pooling": "auto"},
    "eval": {"k": 100, "measures": ["nDCG@10", "R@100", "RR@10"], "rel_level": 1, "tie_break": "docno"},
    "encode": {"batch_size": 64},
    "r1": _RETRIEVER,
    # num 0 keeps every negative of the pool; training draws group_size - 1 of them per epoch.
    "mine": {"depth": FT.NEGATIVES_DEPTH, "num": 0, "skip_top": 0, "pool": "rank", "sampling": "random",
             "absolute_margin": None, "relative_margin": None, "relative_form": "magnitude",
             "max_score": None, "min_score": None, "bm25_depth": FT.NEGATIVES_DEPTH},
    "r2": _RETRIEVER,
    "reranker": {"enabled": True, "init": FT.RERANKER_INIT, "group_size": FT.RERANKER_GROUP_SIZE,
                 "query_max_length": FT.QUERY_MAX_LENGTH, "max_length": FT.RERANKER_MAX_LENGTH,
                 "depth": FT.NEGATIVES_DEPTH, "num": 0, "rerank_depth": FT.RERANK_DEPTH, "score_num": 0,
                 "epochs": FT.RERANKER_EPOCHS, "train": FT.RERANKER_TRAIN},
    "distill": {"enabled": True, "init": "model", "loss": "simlm", "group_size": FT.DISTILL_GROUP_SIZE,
                "alpha": FT.ALPHA, "tau": None, "query_max_length": FT.QUERY_MAX_LENGTH,
                "passage_max_length": FT.PASSAGE_MAX_LENGTH, "epochs": FT.DISTILL_EPOCHS,
                "train": FT.DISTILL_TRAIN},
    "pretrain": {},
    # Hybrid retrieval after the last dense stage (off by default: not part of the papers' pipeline).
    # dense: the stage whose run is fused ("auto": distill when it runs, else r2); weight: the dense
    # run's interpolation weight, or "tune" to choose it on the training queries (dev stays unseen).
    "fusion": {"enabled": False, "dense": "auto", "method": "interpolation", "weight": "tune", "rrf_k": 60},
}  # fmt: skip
# What each profile changes in DEFAULTS (tables are merged key by key, ``train`` too). "cpu" is
# sized for a 2-core machine, a small encoder and a BEIR-sized training set (SciFact: 809 judged
# queries): smaller groups, shallower mining, smaller batches, fewer epochs and a warm-up fraction
# instead of 1,000 steps. Lengths, temperatures, alpha and learning rates stay the paper's.
_CPU_TRAIN = {"batch_size": 16, "warmup": 0.1}
PROFILES: dict[str, dict[str, dict[str, Any]]] = {
    "paper": {},
    "cpu": {
        "r1": {"group_size": 4, "epochs": 1, "train": _CPU_TRAIN},
        "r2": {"group_size": 4, "epochs": 1, "train": _CPU_TRAIN},
        "mine": {"depth": 100, "bm25_depth": 100, "num": 30},
        "reranker": {"group_size": 8, "depth": 50, "num": 30, "rerank_depth": 50, "score_num": 7, "epochs": 1,
                     "train": {"batch_size": 8, "warmup": 0.1}},
        "distill": {"group_size": 6, "epochs": 2, "train": _CPU_TRAIN},
    },
}  # fmt: skip
TOP = {"out": None, "seed": 13, "profile": "paper"}
# Keys that moved: the error says where to.
MOVED = {
    ("encode", "query_max_length"): "encoding uses each retriever stage's own lengths: set query_max_length "
    "in [r1] / [r2] / [distill] (zero-shot encodes with [r1]'s)",
    ("encode", "passage_max_length"): "encoding uses each retriever stage's own lengths: set "
    "passage_max_length in [r1] / [r2] / [distill] (zero-shot encodes with [r1]'s)",
    ("mine", "margin"): "renamed absolute_margin (sentence-transformers' name; same meaning)",
}
STAGE_TABLES = ("r1", "r2", "reranker", "distill")


def resolve_model(value: str, base: Path) -> Path:
    from dense_pt.finetune.checkpoints import resolve_checkpoint

    return resolve_checkpoint(value, base, "[model] init", must_exist=False)


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
            for k in sorted(value):
                if (key, k) in MOVED:
                    raise FormatError(f"[{key}] {k}: {MOVED[key, k]}", where)
            unknown = set(value) - set(DEFAULTS[key])
            if unknown:
                raise FormatError(f"[{key}] has unknown key(s) {sorted(unknown)}", where)
        else:
            raise FormatError(f"unknown key or table {key!r}", where)
    if cfg["profile"] not in PROFILES:
        raise FormatError(f"profile must be one of {', '.join(PROFILES)}, got {cfg['profile']!r}", where)
    profile = PROFILES[cfg["profile"]]
    for table, defaults in DEFAULTS.items():
        cfg[table] = _merge(defaults, profile.get(table, {}), raw.get(table, {}))
    for table in STAGE_TABLES:
        _check_epochs(cfg, raw, table, where)
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
    if cfg["distill"]["init"] not in DISTILL_INITS:
        raise FormatError(f"[distill] init must be one of {', '.join(DISTILL_INITS)}", where)
    if not isinstance(cfg["reranker"]["init"], str):
        raise FormatError("[reranker] init must be 'model', a path or a hub name", where)
    _check_mining(cfg["mine"], where)
    _check_fusion(cfg, where)
    _check_numbers(cfg, where)
    _check_lengths(cfg, where)
    cfg["pretrain"] = _pretrain_section(raw.get("pretrain") or {}, where, cfg["data"]["max_length"])
    _check_eval_and_losses(cfg, where)
    return cfg


# The least each integer setting may be (checked before any stage runs: a bad value would fail, or
# quietly train nothing, only when its stage is reached). Groups are 1 positive + n - 1 negatives:
# a retriever may train on in-batch negatives alone (1; triplet needs 2, checked with the losses),
# but the re-ranker's listwise loss and distillation's KL over a group of one are constant zero.
_MIN_LENGTH = 8
INT_MINIMA: dict[str, dict[str, int]] = {
    "data": {"max_length": _MIN_LENGTH},
    "eval": {"k": 1},
    "encode": {"batch_size": 1},
    "r1": {"group_size": 1, "query_max_length": _MIN_LENGTH, "passage_max_length": _MIN_LENGTH},
    "r2": {"group_size": 1, "query_max_length": _MIN_LENGTH, "passage_max_length": _MIN_LENGTH},
    # num / score_num 0: keep (score) every mined negative
    "mine": {"depth": 1, "bm25_depth": 1, "num": 0, "skip_top": 0},
    "reranker": {"group_size": 2, "query_max_length": _MIN_LENGTH, "max_length": _MIN_LENGTH, "depth": 1,
                 "num": 0, "rerank_depth": 1, "score_num": 0},
    "distill": {"group_size": 2, "query_max_length": _MIN_LENGTH, "passage_max_length": _MIN_LENGTH},
}  # fmt: skip


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _check_numbers(cfg: dict[str, Any], where: str) -> None:
    """Every numeric setting of every table, and each stage's ``train`` table, named on failure."""
    if not _is_int(cfg["seed"]) or cfg["seed"] < 0:
        raise FormatError(f"seed must be an integer >= 0, got {cfg['seed']!r}", where)
    for table, minima in INT_MINIMA.items():
        for key, least in minima.items():
            v = cfg[table][key]
            if not _is_int(v) or v < least:
                raise FormatError(f"[{table}] {key} must be an integer >= {least}, got {v!r}", where)
    fraction = cfg["data"]["dev_fraction"]
    if not _is_number(fraction) or not 0 < fraction < 1:
        raise FormatError(f"[data] dev_fraction must lie in (0, 1), got {fraction!r}", where)
    for table in ("reranker", "distill"):
        if not isinstance(cfg[table]["enabled"], bool):
            raise FormatError(
                f"[{table}] enabled must be true or false, got {cfg[table]['enabled']!r}", where
            )
    for table in ("r1", "r2", "distill"):
        tau = cfg[table]["tau"]
        if tau is not None and not _is_number(tau):
            raise FormatError(
                f"[{table}] tau must be a number (or unset: the loss's own), got {tau!r}", where
            )
    alpha = cfg["distill"]["alpha"]
    if not _is_number(alpha) or not 0 <= alpha <= 1:
        raise FormatError(f"[distill] alpha must lie in [0, 1], got {alpha!r}", where)
    _check_mining_numbers(cfg["mine"], where)
    for table in STAGE_TABLES:
        _check_train(cfg[table].get("train", {}), cfg["seed"], f"{table}.train", where)


def _check_mining_numbers(sec: dict[str, Any], where: str) -> None:
    for key in ("absolute_margin", "max_score", "min_score"):
        if sec[key] is not None and not _is_number(sec[key]):
            raise FormatError(f"[mine] {key} must be a number (or unset), got {sec[key]!r}", where)
    rel = sec["relative_margin"]
    if rel is not None and (not _is_number(rel) or not 0 <= rel < 1):
        raise FormatError(f"[mine] relative_margin must lie in [0, 1) (or unset), got {rel!r}", where)
    if sec["max_score"] is not None and sec["min_score"] is not None and sec["min_score"] > sec["max_score"]:
        raise FormatError(
            f"[mine] min_score {sec['min_score']} exceeds max_score {sec['max_score']}: nothing would be kept",
            where,
        )


def _check_train(values: dict[str, Any], seed: int, section: str, where: str):
    """A stage's ``train`` table as the engine will read it: known keys, types and ranges."""
    from dense_pt.training import TrainConfig, dataclass_from_mapping

    if not isinstance(values, dict):
        raise FormatError(f"[{section}] must be a table", where)
    train = dataclass_from_mapping(TrainConfig, {"seed": seed, **values}, where, section)
    try:
        return train.validate(f"[{section}]")
    except InvalidArgumentError as exc:
        raise FormatError(str(exc), where) from None


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
        if cfg[table]["loss"] == "triplet" and cfg[table]["group_size"] < 2:
            raise FormatError(
                f"[{table}] group_size must be >= 2 for the triplet loss (it compares the positive with "
                f"the query's own negatives), got {cfg[table]['group_size']}",
                where,
            )
    if cfg["distill"]["loss"] not in DISTILL_LOSSES:
        raise FormatError(
            f"[distill] loss must be one of {DISTILL_LOSSES}, got {cfg['distill']['loss']!r}", where
        )


FUSION_DENSE = ("auto", "r1", "r2", "distill")


def _check_fusion(cfg: dict[str, Any], where: str) -> None:
    from dense_pt.retrieval.fusion import METHODS

    sec = cfg["fusion"]
    if sec["dense"] not in FUSION_DENSE:
        raise FormatError(
            f"[fusion] dense must be one of {', '.join(FUSION_DENSE)}, got {sec['dense']!r}", where
        )
    if sec["method"] not in METHODS:
        raise FormatError(
            f"[fusion] method must be one of {', '.join(METHODS)}, got {sec['method']!r}", where
        )
    w = sec["weight"]
    if w != "tune" and (isinstance(w, bool) or not isinstance(w, int | float) or not 0 <= w <= 1):
        raise FormatError(f"[fusion] weight must be 'tune' or a number in [0, 1], got {w!r}", where)
    if isinstance(sec["rrf_k"], bool) or not isinstance(sec["rrf_k"], int) or sec["rrf_k"] < 0:
        raise FormatError(f"[fusion] rrf_k must be an integer >= 0, got {sec['rrf_k']!r}", where)
    if (
        sec["enabled"]
        and sec["dense"] == "distill"
        and not (cfg["distill"]["enabled"] and cfg["reranker"]["enabled"])
    ):
        raise FormatError("[fusion] dense = 'distill' needs the re-ranker and distillation stages", where)


# "model": the pipeline's pre-trained model (SimLM Figure 2, the default); "r2": continue from R2.
DISTILL_INITS = ("model", "r2")


def _merge(*tables: dict[str, Any]) -> dict[str, Any]:
    """Later tables win key by key; a ``train`` sub-table is merged the same way."""
    out: dict[str, Any] = {}
    for t in tables:
        for k, v in t.items():
            out[k] = {**out.get(k, {}), **v} if k == "train" and isinstance(v, dict) else v
    return out


def _check_epochs(cfg: dict[str, Any], raw: dict[str, Any], table: str, where: str) -> None:
    """``epochs`` (the profile's, or the file's) sets the number of steps unless the file's ``train``
    table gives ``max_steps``; the file giving both is ambiguous."""
    mine = raw.get(table, {})
    sets_steps = isinstance(mine.get("train"), dict) and "max_steps" in mine["train"]
    if sets_steps and mine.get("epochs") is not None:
        raise FormatError(f"[{table}] gives both epochs and train.max_steps: keep one", where)
    if sets_steps:
        cfg[table]["epochs"] = None
    e = cfg[table]["epochs"]
    if e is not None and (isinstance(e, bool) or not isinstance(e, int | float) or e <= 0):
        raise FormatError(f"[{table}] epochs must be a positive number, got {e!r}", where)


def _check_mining(sec: dict[str, Any], where: str) -> None:
    from dense_pt.retrieval.negatives import POOLS, RELATIVE_FORMS, SAMPLINGS

    for key, allowed in (("pool", POOLS), ("relative_form", RELATIVE_FORMS), ("sampling", SAMPLINGS)):
        if sec[key] not in allowed:
            raise FormatError(f"[mine] {key} must be one of {', '.join(allowed)}, got {sec[key]!r}", where)


def _check_lengths(cfg: dict[str, Any], where: str) -> None:
    """The store keeps ``[data] max_length`` tokens of a passage ([CLS]/[SEP] counted): a stage
    reading more would silently see passages cut shorter than it was told."""
    store = cfg["data"]["max_length"]
    reranker_on = cfg["reranker"]["enabled"] is True
    distill_on = reranker_on and cfg["distill"]["enabled"] is True  # distillation needs the re-ranker
    for table in ("r1", "r2", "distill") if distill_on else ("r1", "r2"):
        if cfg[table]["passage_max_length"] > store:
            raise FormatError(
                f"[{table}] passage_max_length {cfg[table]['passage_max_length']} exceeds [data] max_length "
                f"{store}, the length the corpus store keeps: raise [data] max_length",
                where,
            )
    rr = cfg["reranker"]
    if reranker_on and rr["max_length"] < rr["query_max_length"] + 4:
        raise FormatError(
            f"[reranker] max_length {rr['max_length']} leaves a query of query_max_length {rr['query_max_length']} "
            f"tokens no room for the passage ([CLS] query [SEP] passage [SEP]): need at least "
            f"{rr['query_max_length'] + 4}",
            where,
        )
    # the re-ranker's passage gets max_length - 3 - (query tokens >= 1); the store gives max_length - 2
    if reranker_on and cfg["reranker"]["max_length"] - 2 > store:
        raise FormatError(
            f"[reranker] max_length {cfg['reranker']['max_length']} leaves passages room for more tokens than "
            f"[data] max_length {store} keeps: raise [data] max_length to at least {cfg['reranker']['max_length'] - 2}",
            where,
        )


PRETRAIN_KEYS = ("method", "paper", "max_length", "options", "train", "pmi")
# How the pipeline builds the store's importance column for methods that mask by it (cdmae).
PMI_DEFAULTS: dict[str, Any] = {"max_n": 4, "min_count": 1, "window": 4, "memory_gb": 8.0}
IMPORTANCE_METHODS = frozenset({"cdmae"})


def _pretrain_section(sec: dict[str, Any], where: str, data_max_length: int) -> dict[str, Any] | None:
    """``[pretrain]`` checked key by key now (method, profile, length, options, optimiser, warm-up),
    so a typo or a bad value fails before any stage runs."""
    if not sec:
        return None
    from dense_pt.objectives import METHODS, check_method, profile

    unknown = set(sec) - set(PRETRAIN_KEYS)
    if unknown:
        raise FormatError(
            f"[pretrain] has unknown key(s) {sorted(unknown)} (known: {', '.join(PRETRAIN_KEYS)})", where
        )
    if "method" not in sec:  # no default: each method needs its own settings (simlm a generator)
        raise FormatError(f"[pretrain] method is required: one of {', '.join(METHODS)}", where)
    method, paper = sec["method"], sec.get("paper")
    if not isinstance(method, str) or not (paper is None or isinstance(paper, str)):
        raise FormatError("[pretrain] method and paper must be strings", where)
    try:
        check_method(method)
        prof = profile(method, paper)  # --paper: whose defaults, e.g. condenser with SimLM's settings
    except InvalidArgumentError as exc:
        raise FormatError(f"[pretrain] {exc}", where) from None
    _check_context_method(method, where)
    max_length = _pretrain_max_length(sec.get("max_length"), int(prof.top["max_length"].value), data_max_length,
                                      where)  # fmt: skip
    pmi = _pmi_section(method, sec.get("pmi"), where)
    _check_pretrain_options(method, prof.paper, sec.get("options", {}), where)
    _check_pretrain_train(method, prof, sec.get("train", {}), where)
    return {"method": method, "paper": prof.paper, "max_length": max_length,
            "options": dict(sec.get("options", {})), "train": dict(sec.get("train", {})), "pmi": pmi}  # fmt: skip


def _check_context_method(method: str, where: str) -> None:
    if method == "querygen":
        raise FormatError(
            "[pretrain] method querygen reads the LLM queries of `dense-pt expand`, which the pipeline does not "
            "run: pre-train with `dense-pt pretrain --method querygen --queries ...` and set [model] init to "
            "its encoder (examples/llm-expansion-pretrain.toml)",
            where,
        )


def _pretrain_max_length(given: Any, declared: int, data_max_length: int, where: str) -> int:
    """The method's declared length, capped by the store: it keeps ``[data] max_length`` tokens of a
    passage, [CLS]/[SEP] counted, as pre-training's ``max_length`` counts them."""
    if given is None:
        return min(declared, data_max_length)
    if not _is_int(given) or given < _MIN_LENGTH:
        raise FormatError(f"[pretrain] max_length must be an integer >= {_MIN_LENGTH}, got {given!r}", where)
    if given > data_max_length:
        raise FormatError(
            f"[pretrain] max_length {given} exceeds [data] max_length {data_max_length}, the length the corpus "
            "store keeps: raise [data] max_length",
            where,
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


def _check_pretrain_options(method: str, paper: str, options: Any, where: str) -> None:
    from dense_pt.objectives import MethodOptions, resolve_options
    from dense_pt.training import dataclass_from_mapping

    if not isinstance(options, dict):
        raise FormatError("[pretrain.options] must be a table", where)
    opts = dataclass_from_mapping(MethodOptions, options, where, "pretrain.options")
    from dense_pt.objectives.defaults import REQUIRED, profile

    for name, d in profile(method, paper).options.items():
        if d.value == REQUIRED and getattr(opts, name) is None:
            raise FormatError(f"[pretrain.options] {name} is required for {method} ({d.source})", where)
    try:
        opts = resolve_options(method, opts, paper)  # a missing generator, a rate outside [0, 1] ...
    except InvalidArgumentError as exc:
        raise FormatError(f"[pretrain.options] {exc}", where) from None
    if opts.generator is not None:
        from dense_pt.models.generator import resolve_generator

        try:
            resolve_generator(opts.generator)
        except (FileNotFoundError, FormatError) as exc:
            raise FormatError(f"[pretrain.options] generator: {exc}", where) from None


def _check_pretrain_train(method: str, prof: Any, values: Any, where: str) -> None:
    """The engine's settings over the profile's, as ``build_config`` merges them; a warm-up longer
    than the run never reaches the peak rate."""
    if not isinstance(values, dict):
        raise FormatError("[pretrain.train] must be a table", where)
    from dense_pt.training import TrainConfig, dataclass_from_mapping

    dataclass_from_mapping(TrainConfig, values, where, "pretrain.train")  # names the file's own keys
    train = _check_train({**prof.values("train"), **values}, 0, "pretrain.train", where)
    # contrastive in the pipeline reads spans only: one curriculum stage, the whole run
    if train.warmup_steps() > train.max_steps:
        declared = prof.train.get("warmup")
        came = f" ({method}'s default: {declared.source})" if "warmup" not in values and declared else ""
        raise FormatError(
            f"[pretrain.train] warm-up of {train.warmup_steps()} steps{came} is longer than the run "
            f"({train.max_steps} steps): set warmup (steps, or a fraction < 1)",
            where,
        )


def _pmi_section(method: str, pmi: Any, where: str) -> dict[str, Any] | None:
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
    if method not in IMPORTANCE_METHODS:
        return None
    pmi = {**PMI_DEFAULTS, **(pmi or {})}
    for key in ("max_n", "min_count", "window"):
        if not _is_int(pmi[key]) or pmi[key] < 1:
            raise FormatError(f"[pretrain.pmi] {key} must be a positive integer, got {pmi[key]!r}", where)
    if not _is_number(pmi["memory_gb"]) or not pmi["memory_gb"] > 0:
        raise FormatError(f"[pretrain.pmi] memory_gb must be > 0, got {pmi['memory_gb']!r}", where)
    if pmi["window"] > pmi["max_n"]:
        raise FormatError(
            f"[pretrain.pmi] window {pmi['window']} needs max_n >= window, got {pmi['max_n']}", where
        )
    return pmi
