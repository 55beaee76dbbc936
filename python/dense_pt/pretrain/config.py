"""The configuration of one pre-training run: what to train (method, model, corpus, output), the
method's options, and the optimisation settings. Read from a TOML file::

    method = "cdmae"
    model = "models/all-MiniLM-L6-v2"     # a checkpoint folder or a config.json (random init)
    corpus = "stores/scifact"
    out = "runs/cdmae"
    max_length = 144     # default: the method's paper

    [options]            # dense_pt.objectives.MethodOptions (the paper's values when absent)
    p_dec = 0.5
    sigma = 1.0

    [train]              # dense_pt.training.TrainConfig (lr, warm-up, Adam: the paper's when absent)
    max_steps = 300
    batch_size = 16
    lr = 1e-4

Every value not given comes from the method's paper (``dense_pt.config.defaults.objectives``; ``paper``
picks another paper's settings where a method has several). Relative paths in the file are
resolved against the file's folder. CLI options override the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from dense_pt.config.base import Model
from dense_pt.config.defaults.objectives import STAGE_OPTIMIZER, STAGE_WARMUP
from dense_pt.config.options import MethodOptions
from dense_pt.config.pretrain import MAX_QUERY_TOKENS, MIN_LENGTH, PretrainSettings, StageOptimizer
from dense_pt.config.toml import apply_overrides
from dense_pt.config.train import TrainConfig, Warmup
from dense_pt.errors import InvalidArgumentError, not_found
from dense_pt.objectives import check_method, profile, resolve_options, resolve_pooling
from dense_pt.training.config import read_toml

_PATHS = ("model", "corpus", "out", "queries")
CLI = "dense-pt pretrain"  # where a value given as an option (or in Python) is named


class PretrainConfig(Model):
    """One pre-training run, every setting resolved (``build_config`` makes it from
    ``PretrainSettings``, the method's paper filling what is unset)."""

    method: str
    model: str
    corpus: str
    out: str
    max_length: int | None = Field(None, ge=MIN_LENGTH)  # None: the method's paper
    options: MethodOptions = Field(default_factory=MethodOptions)
    train: TrainConfig = Field(default_factory=TrainConfig)
    # whose defaults (a paper that trained this method); resolve fills in the method's own
    paper: str | None = None
    # querygen / contrastive: the `dense-pt expand` output, the curriculum and its stage schedules
    queries: str | None = None
    curriculum: str | None = None
    stage_schedules: str | None = None
    max_query_tokens: int = Field(MAX_QUERY_TOKENS, ge=1)
    # curriculum: the AdamW moments at a stage switch ("reset": a new run from the checkpoint)
    stage_optimizer: StageOptimizer | None = None
    # curriculum: warm-up of each later stage (steps, or a fraction of it; 0: the paper's constant rate)
    stage_warmup: Warmup = STAGE_WARMUP.value

    def resolve(self) -> PretrainConfig:
        """Fill what the method's paper decides and check what needs the disk (corpus, model)."""
        check_method(self.method)
        prof = profile(self.method, self.paper)
        self.paper = prof.paper
        if self.max_length is None:
            self.max_length = int(prof.top["max_length"].value)
        self.options = resolve_options(self.method, self.options, self.paper)
        if not Path(self.corpus).is_dir():
            raise not_found(self.corpus, "no such corpus store")
        if not Path(self.model).exists():
            raise not_found(self.model, "no such model")
        self.options = resolve_pooling(self.options, self.model)
        if self.options.generator is not None:
            from dense_pt.models.generator import resolve_generator

            resolve_generator(self.options.generator)
        self._validate_context()
        self._validate_warmup()
        return self

    def length(self) -> int:
        """``max_length`` once ``resolve`` has filled it (an unset one: the method's paper)."""
        if self.max_length is None:
            raise InvalidArgumentError("max_length is unset: resolve() the config first (build_config does)")
        return self.max_length

    def _validate_warmup(self) -> None:
        """A warm-up longer than the run (or than the curriculum's first stage) never reaches the
        peak rate: refused, naming where the number came from."""
        from dense_pt.pretrain.context_data import CONTEXT_METHODS, warmup_steps

        if self.method in CONTEXT_METHODS:
            first = self.stages()[0]
            warm, span, what = (
                warmup_steps(first, self.train.warmup),
                first.steps,
                "the first curriculum stage",
            )
        else:
            warm, span, what = self.train.warmup_steps(), self.train.max_steps, "the run"
        if warm > span:
            declared = profile(self.method, self.paper).train.get("warmup")
            came = (
                f" (the {self.paper} default: {declared.source})"
                if declared and declared.value == self.train.warmup
                else ""
            )
            raise InvalidArgumentError(
                f"warm-up of {warm} steps{came} is longer than {what} ({span} steps): pass --warmup "
                "(steps, or a fraction < 1)"
            )

    def _validate_context(self) -> None:
        from dense_pt.expansion.curriculum import stage_warmup_steps
        from dense_pt.pretrain.context_data import CONTEXT_METHODS, plan

        if self.method not in CONTEXT_METHODS:
            for key in ("queries", "curriculum", "stage_schedules", "stage_optimizer", "stage_warmup"):
                if getattr(self, key) not in (None, 0 if key == "stage_warmup" else None):
                    raise InvalidArgumentError(
                        f"--{key.replace('_', '-')} is for {' and '.join(CONTEXT_METHODS)}, not {self.method}"
                    )
            return
        if self.queries is not None and not Path(self.queries).is_dir():
            raise not_found(self.queries, "no such queries folder (run `dense-pt expand`)")
        if self.stage_optimizer is None:
            self.stage_optimizer = STAGE_OPTIMIZER.value
        stages = plan(self)  # validates the curriculum against max_steps
        for stage in stages[1:]:
            if stage_warmup_steps(stage, self.stage_warmup) > stage.steps:
                raise InvalidArgumentError(
                    f"stage_warmup ({self.stage_warmup}) is longer than the {stage.source} stage ({stage.steps} steps)"
                )

    def stages(self) -> list:
        """The curriculum's stages (context methods only)."""
        from dense_pt.pretrain.context_data import plan

        return plan(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "model": str(self.model),
            "corpus": str(self.corpus),
            "out": str(self.out),
            "max_length": self.max_length,
            "paper": self.paper,
            "options": self.options.to_dict(),
            "train": self.train.to_dict(),
            **self._context_dict(),
        }

    def _context_dict(self) -> dict[str, Any]:
        from dense_pt.pretrain.context_data import CONTEXT_METHODS

        if self.method not in CONTEXT_METHODS:
            return {}
        # The planned stages are part of the run: a resumed run must switch at the same step.
        return {
            "queries": None if self.queries is None else str(self.queries),
            "curriculum": self.curriculum,
            "stage_schedules": self.stage_schedules,
            "max_query_tokens": self.max_query_tokens,
            "stage_optimizer": self.stage_optimizer,
            "stages": [[s.source, s.start, s.end, s.schedule] for s in self.stages()],
            # recorded when set, so that runs started before it existed resume unchanged
            **({"stage_warmup": self.stage_warmup} if self.stage_warmup else {}),
        }


def load_config(path: str | Path, sets: list[str] | tuple[str, ...] = ()) -> PretrainSettings:
    """A pre-training TOML (with ``--set dotted.key=VALUE`` overrides applied) checked key by key
    (errors name the file and the dotted key); relative paths resolved against the file's folder."""
    path = Path(path)
    settings = PretrainSettings.load(apply_overrides(read_toml(path), sets), path)
    for key in _PATHS:
        value = getattr(settings, key)
        if value is not None and not Path(value).is_absolute():
            setattr(settings, key, str(path.parent / value))
    return settings


def build_config(
    toml: str | Path | None = None,
    *,
    top: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    train: dict[str, Any] | None = None,
    sets: list[str] | tuple[str, ...] = (),
) -> PretrainConfig:
    """Merge the method's paper defaults, a TOML file (optional; ``sets`` override it, or stand
    alone) and keyword overrides (``None`` values are ignored), in that order, and resolve."""
    if toml:
        base = load_config(toml, sets).model_dump(exclude_none=True)
    else:
        base = PretrainSettings.load(apply_overrides({}, sets), "--set").model_dump(exclude_none=True)
    given = {k: str(v) if isinstance(v, Path) else v for k, v in (top or {}).items() if v is not None}
    for table, values in (("options", options), ("train", train)):
        given[table] = {**base.get(table, {}), **{k: v for k, v in (values or {}).items() if v is not None}}
    s = PretrainSettings.load({**base, **given}, CLI)
    missing = [k for k in ("method", "model", "corpus", "out") if not getattr(s, k)]
    if missing:
        where = f" (not in {toml} either)" if toml else ""
        raise InvalidArgumentError(
            f"missing required setting(s): {', '.join('--' + m for m in missing)}{where}"
        )
    assert s.method and s.model and s.corpus and s.out  # for the type checker: checked just above
    prof = profile(check_method(s.method), s.paper)
    train_values = {**prof.values("train"), **s.train.model_dump(exclude_none=True)}
    cfg = PretrainConfig(
        method=s.method,
        model=s.model,
        corpus=s.corpus,
        out=s.out,
        max_length=s.max_length,
        options=s.options,
        train=TrainConfig.load(train_values, CLI, "train"),
        paper=prof.paper,
        queries=s.queries,
        curriculum=s.curriculum,
        stage_schedules=s.stage_schedules,
        max_query_tokens=s.max_query_tokens or MAX_QUERY_TOKENS,
        stage_optimizer=s.stage_optimizer,
        stage_warmup=STAGE_WARMUP.value if s.stage_warmup is None else s.stage_warmup,
    )
    return cfg.resolve()
