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

Every value not given comes from the method's paper (``dense_pt.objectives.defaults``; ``paper``
picks another paper's settings where a method has several). Relative paths in the file are
resolved against the file's folder. CLI options override the file.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dense_pt.errors import FormatError, InvalidArgumentError, not_found
from dense_pt.objectives import MethodOptions, check_method, profile, resolve_options, resolve_pooling
from dense_pt.objectives.defaults import STAGE_OPTIMIZER
from dense_pt.training.config import TrainConfig, dataclass_from_mapping, read_toml

STAGE_OPTIMIZERS = ("reset", "keep")

_PATHS = ("model", "corpus", "out", "queries")
_STRINGS = (
    "method",
    "model",
    "corpus",
    "out",
    "paper",
    "queries",
    "curriculum",
    "stage_schedules",
    "stage_optimizer",
)


@dataclass
class PretrainConfig:
    method: str
    model: str
    corpus: str
    out: str
    max_length: int | None = None  # None: the method's paper
    options: MethodOptions = field(default_factory=MethodOptions)
    train: TrainConfig = field(default_factory=TrainConfig)
    # whose defaults (a paper that trained this method); build_config fills in the method's own
    paper: str | None = None
    # querygen / contrastive: the `dense-pt expand` output, the curriculum and its stage schedules
    queries: str | None = None
    curriculum: str | None = None
    stage_schedules: str | None = None
    max_query_tokens: int = 32
    # curriculum: the AdamW moments at a stage switch ("reset": a new run from the checkpoint)
    stage_optimizer: str | None = None

    def validate(self) -> PretrainConfig:
        check_method(self.method)
        prof = profile(self.method, self.paper)
        self.paper = prof.paper
        if self.max_length is None:
            self.max_length = int(prof.top["max_length"].value)
        self.options = resolve_options(self.method, self.options, self.paper)
        self.train.validate("train")
        if self.max_length < 8:
            raise InvalidArgumentError(f"max_length must be >= 8, got {self.max_length}")
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
        from dense_pt.pretrain.context_data import CONTEXT_METHODS, plan

        if self.method not in CONTEXT_METHODS:
            for key in ("queries", "curriculum", "stage_schedules", "stage_optimizer"):
                if getattr(self, key) is not None:
                    raise InvalidArgumentError(
                        f"--{key.replace('_', '-')} is for {' and '.join(CONTEXT_METHODS)}, not {self.method}"
                    )
            return
        if self.queries is not None and not Path(self.queries).is_dir():
            raise not_found(self.queries, "no such queries folder (run `dense-pt expand`)")
        if self.max_query_tokens < 1:
            raise InvalidArgumentError(f"max_query_tokens must be >= 1, got {self.max_query_tokens}")
        if self.stage_optimizer is None:
            self.stage_optimizer = STAGE_OPTIMIZER.value
        if self.stage_optimizer not in STAGE_OPTIMIZERS:
            raise InvalidArgumentError(
                f"stage_optimizer must be one of {', '.join(STAGE_OPTIMIZERS)}, got {self.stage_optimizer!r}"
            )
        plan(self)  # validates the curriculum against max_steps

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
        }


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a pre-training TOML into {top-level values, 'options': MethodOptions, 'train': {the keys
    it sets}}, checking every key and type (errors name the file and the key)."""
    path = Path(path)
    data = read_toml(path)
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == "options":
            if not isinstance(value, dict):
                raise FormatError("[options] must be a table", path=path)
            out["options"] = dataclass_from_mapping(MethodOptions, value, path=path, section="options")
        elif key == "train":
            if not isinstance(value, dict):
                raise FormatError("[train] must be a table", path=path)
            given = dataclass_from_mapping(TrainConfig, value, path=path, section="train")
            out["train"] = {k: getattr(given, k) for k in value}  # only what the file sets
        elif key in _STRINGS:
            if not isinstance(value, str):
                raise FormatError(f"key '{key}': expected a string, got {value!r}", path=path)
            out[key] = str(path.parent / value) if key in _PATHS and not Path(value).is_absolute() else value
        elif key in ("max_length", "max_query_tokens"):
            if isinstance(value, bool) or not isinstance(value, int):
                raise FormatError(f"key '{key}': expected an integer, got {value!r}", path=path)
            out[key] = value
        else:
            known = ", ".join((*_STRINGS, "max_length", "max_query_tokens", "[options]", "[train]"))
            raise FormatError(f"unknown key '{key}' (known: {known})", path=path)
    return out


def build_config(
    toml: str | Path | None = None,
    *,
    top: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    train: dict[str, Any] | None = None,
) -> PretrainConfig:
    """Merge the method's paper defaults, a TOML file (optional) and overrides (``None`` values are
    ignored), in that order, and validate."""
    base = load_config(toml) if toml else {}
    merged_top = {k: v for k, v in base.items() if k not in ("options", "train")}
    merged_top.update({k: v for k, v in (top or {}).items() if v is not None})
    missing = [k for k in ("method", "model", "corpus", "out") if not merged_top.get(k)]
    if missing:
        where = f" (not in {toml} either)" if toml else ""
        raise InvalidArgumentError(
            f"missing required setting(s): {', '.join('--' + m for m in missing)}{where}"
        )
    method = check_method(merged_top["method"])
    prof = profile(method, merged_top.get("paper"))
    opts = base.get("options", MethodOptions())
    opts = dataclasses.replace(opts, **{k: v for k, v in (options or {}).items() if v is not None})
    train_values = {
        **prof.values("train"),
        **base.get("train", {}),
        **{k: v for k, v in (train or {}).items() if v is not None},
    }
    unknown = set(train_values) - {f.name for f in dataclasses.fields(TrainConfig)}
    if unknown:
        raise InvalidArgumentError(f"unknown train setting(s): {sorted(unknown)}")
    cfg = PretrainConfig(
        method=method,
        model=str(merged_top["model"]),
        corpus=str(merged_top["corpus"]),
        out=str(merged_top["out"]),
        max_length=merged_top.get("max_length"),
        options=opts,
        train=TrainConfig(**train_values),
        paper=prof.paper,
        queries=None if merged_top.get("queries") is None else str(merged_top["queries"]),
        curriculum=merged_top.get("curriculum"),
        stage_schedules=merged_top.get("stage_schedules"),
        max_query_tokens=int(merged_top.get("max_query_tokens", 32)),
        stage_optimizer=merged_top.get("stage_optimizer"),
    )
    return cfg.validate()
