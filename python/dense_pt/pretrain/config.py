"""The settings of one pre-training run (``dense_pt.config.PretrainSettings``): the one merge of a
TOML file, ``--set`` and the options given (``load_settings``), and the one resolve step that fills
what the method's paper decides and checks what needs the disk (``resolve``). A TOML file::

    method = "cdmae"
    model = "models/all-MiniLM-L6-v2"     # a checkpoint folder or a config.json (random init)
    corpus = "stores/scifact"
    out = "runs/cdmae"
    max_length = 144     # default: the method's paper

    [options]            # dense_pt.config.MethodOptions (absent: the paper's, as
    whole_word = true    # `dense-pt pretrain --method cdmae --help` lists them)

    [train]              # dense_pt.config.TrainConfig (lr, warm-up, Adam: the paper's when absent)
    max_steps = 300
    batch_size = 16
    lr = 1e-4

Every value not given comes from the method's paper (``dense_pt.config.defaults.objectives``; ``paper``
picks another paper's settings where a method has several). Relative paths in the file are
resolved against the file's folder. Options given (the CLI's, or a Python caller's) override the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dense_pt.config.defaults.objectives import STAGE_OPTIMIZER, STAGE_WARMUP
from dense_pt.config.pretrain import CONTEXT_KEYS, REQUIRED, PretrainSettings
from dense_pt.config.toml import apply_overrides
from dense_pt.config.train import TrainConfig, partial
from dense_pt.errors import InvalidArgumentError, not_found
from dense_pt.objectives import check_method, profile, resolve_options, resolve_pooling
from dense_pt.training.config import read_toml

_PATHS = ("model", "corpus", "out", "queries")
CLI = "dense-pt pretrain"  # where a value given as an option (or in Python) is named
# A file may leave out what the command line gives (method, model, corpus, out): checked key by
# key on its own first, so its errors name it.
PretrainFile = partial(PretrainSettings, "PretrainFile")


def load_settings(
    toml: str | Path | None = None,
    sets: list[str] | tuple[str, ...] = (),
    given: Mapping[str, Any] | None = None,
) -> PretrainSettings:
    """The one merge: a TOML file (optional; its relative paths against its folder), ``sets``
    (``--set dotted.key=VALUE``) over it or alone, and ``given`` over both: a file's data (top-level
    keys, ``options`` and ``train`` tables; ``None`` = not given), as the CLI's options or a Python
    caller give it. Checked once, as one ``PretrainSettings``; nothing is filled in yet."""
    data = apply_overrides(read_toml(Path(toml)) if toml else {}, sets)
    base = PretrainFile.load(data, toml or "--set").model_dump(exclude_unset=True)
    if toml:
        for key in _PATHS:
            if base.get(key) is not None and not Path(base[key]).is_absolute():
                base[key] = str(Path(toml).parent / base[key])
    for key, value in (given or {}).items():
        if isinstance(value, Mapping):
            base[key] = {**base.get(key, {}), **{k: v for k, v in value.items() if v is not None}}
        elif value is not None:
            base[key] = str(value) if isinstance(value, Path) else value
    missing = [k for k in REQUIRED if base.get(k) is None]
    if missing:
        where = f" (not in {toml} either)" if toml else ""
        raise InvalidArgumentError(
            f"missing required setting(s): {', '.join('--' + m for m in missing)}{where}"
        )
    return PretrainSettings.load(base, CLI)


def resolve(settings: PretrainSettings) -> PretrainSettings:
    """``settings`` with what the method's paper decides filled in (``paper``, ``max_length``, the
    options, the ``train`` keys not set) and what needs the disk checked (corpus, model, generator,
    queries, the curriculum, the warm-up). Idempotent: a resolved run resolves to itself."""
    method = check_method(settings.method)
    prof = profile(method, settings.paper)
    train_values = {**prof.values("train"), **settings.train.model_dump(exclude_unset=True)}
    train = TrainConfig.load(train_values, CLI, "train")
    options = resolve_options(method, settings.options, prof.paper)
    if not Path(settings.corpus).is_dir():
        raise not_found(settings.corpus, "no such corpus store")
    if not Path(settings.model).exists():
        raise not_found(settings.model, "no such model")
    options = resolve_pooling(options, settings.model)
    if options.generator is not None:
        from dense_pt.models.generator import resolve_generator

        resolve_generator(options.generator)
    max_length = settings.max_length or int(prof.top["max_length"].value)
    cfg = settings.model_copy(
        update={"paper": prof.paper, "max_length": max_length, "options": options, "train": train}
    )
    cfg = _resolve_context(cfg)
    _check_warmup(cfg)
    return cfg


def build_config(
    toml: str | Path | None = None,
    *,
    top: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    train: Mapping[str, Any] | None = None,
    sets: list[str] | tuple[str, ...] = (),
) -> PretrainSettings:
    """A resolved run from a TOML file (optional), ``sets`` and keyword overrides (``None`` values
    are ignored), later ones winning key by key: ``resolve(load_settings(...))``."""
    given = {**(top or {}), "options": options or {}, "train": train or {}}
    return resolve(load_settings(toml, sets, given))


def run_record(cfg: PretrainSettings) -> dict[str, Any]:
    """What ``run_config.json`` and ``pretrain.json`` record of a resolved run: the settings (the
    context keys only for querygen / contrastive) and, for those, the planned stages (a resumed run
    must switch at the same step)."""
    from dense_pt.pretrain.context_data import CONTEXT_METHODS, plan_curriculum

    if cfg.method not in CONTEXT_METHODS:
        return cfg.model_dump(exclude=set(CONTEXT_KEYS))
    # stage_warmup recorded when set, so that runs started before it existed resume unchanged
    record = cfg.model_dump(exclude=set() if cfg.stage_warmup else {"stage_warmup"})
    return {**record, "stages": [[s.source, s.start, s.end, s.schedule] for s in plan_curriculum(cfg)]}


def _check_warmup(cfg: PretrainSettings) -> None:
    """A warm-up longer than the run (or than the curriculum's first stage) never reaches the
    peak rate: refused, naming where the number came from."""
    from dense_pt.pretrain.context_data import CONTEXT_METHODS, plan_curriculum, warmup_steps

    if cfg.method in CONTEXT_METHODS:
        first = plan_curriculum(cfg)[0]
        warm, span, what = warmup_steps(first, cfg.train.warmup), first.steps, "the first curriculum stage"
    else:
        warm, span, what = cfg.train.warmup_steps(), cfg.train.max_steps, "the run"
    if warm > span:
        declared = profile(cfg.method, cfg.paper).train.get("warmup")
        came = (
            f" (the {cfg.paper} default: {declared.source})"
            if declared and declared.value == cfg.train.warmup
            else ""
        )
        raise InvalidArgumentError(
            f"warm-up of {warm} steps{came} is longer than {what} ({span} steps): pass --warmup "
            "(steps, or a fraction < 1)"
        )


def _resolve_context(cfg: PretrainSettings) -> PretrainSettings:
    """querygen / contrastive: the queries folder exists, the curriculum plans against max_steps,
    ``stage_optimizer`` and ``stage_warmup`` default to the paper's, each later stage is longer than
    its warm-up. Other methods refuse the context settings."""
    from dense_pt.expansion.curriculum import stage_warmup_steps
    from dense_pt.pretrain.context_data import CONTEXT_METHODS, plan_curriculum

    if cfg.method not in CONTEXT_METHODS:
        for key in ("queries", "curriculum", "stage_schedules", "stage_optimizer", "stage_warmup"):
            if getattr(cfg, key) not in (None, 0 if key == "stage_warmup" else None):
                raise InvalidArgumentError(
                    f"--{key.replace('_', '-')} is for {' and '.join(CONTEXT_METHODS)}, not {cfg.method}"
                )
        return cfg
    if cfg.queries is not None and not Path(cfg.queries).is_dir():
        raise not_found(cfg.queries, "no such queries folder (run `dense-pt expand`)")
    if cfg.stage_optimizer is None:
        cfg = cfg.model_copy(update={"stage_optimizer": STAGE_OPTIMIZER.value})
    warmup = STAGE_WARMUP.value if cfg.stage_warmup is None else cfg.stage_warmup
    cfg = cfg.model_copy(update={"stage_warmup": warmup})
    for stage in plan_curriculum(cfg)[1:]:  # plan_curriculum validates the curriculum against max_steps
        if stage_warmup_steps(stage, warmup) > stage.steps:
            raise InvalidArgumentError(
                f"stage_warmup ({warmup}) is longer than the {stage.source} stage ({stage.steps} steps)"
            )
    return cfg


def __getattr__(name: str) -> Any:
    """``PretrainConfig``: the old name of the resolved settings (deprecated; one model now)."""
    if name == "PretrainConfig":
        import warnings

        warnings.warn(
            "PretrainConfig is now dense_pt.config.PretrainSettings (resolved by dense_pt.pretrain.resolve)",
            DeprecationWarning,
            stacklevel=2,
        )
        return PretrainSettings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
