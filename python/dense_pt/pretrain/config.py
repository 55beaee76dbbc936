"""The configuration of one pre-training run: what to train (method, model, corpus, output), the
method's options, and the optimisation settings. Read from a TOML file::

    method = "cdmae"
    model = "models/all-MiniLM-L6-v2"     # a checkpoint folder or a config.json (random init)
    corpus = "stores/scifact"
    out = "runs/cdmae"
    max_length = 144

    [options]            # dense_pt.objectives.MethodOptions (method defaults when absent)
    p_dec = 0.5
    sigma = 1.0

    [train]              # dense_pt.training.TrainConfig
    max_steps = 300
    batch_size = 16
    lr = 1e-4

Relative paths in the file are resolved against the file's folder. CLI options override the file.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dense_pt.errors import FormatError, InvalidArgumentError
from dense_pt.objectives import MethodOptions, check_method, resolve_options
from dense_pt.training.config import TrainConfig, dataclass_from_mapping, read_toml

_PATHS = ("model", "corpus", "out", "queries")


@dataclass
class PretrainConfig:
    method: str
    model: str
    corpus: str
    out: str
    max_length: int = 144
    options: MethodOptions = field(default_factory=MethodOptions)
    train: TrainConfig = field(default_factory=TrainConfig)
    # querygen / contrastive: the `dense-pt expand` output, the curriculum and its stage schedules
    queries: str | None = None
    curriculum: str | None = None
    stage_schedules: str | None = None
    max_query_tokens: int = 32

    def validate(self) -> PretrainConfig:
        check_method(self.method)
        self.options = resolve_options(self.method, self.options)
        self.train.validate("train")
        if self.max_length < 8:
            raise InvalidArgumentError(f"max_length must be >= 8, got {self.max_length}")
        if not Path(self.corpus).is_dir():
            raise FileNotFoundError(f"corpus store {self.corpus} does not exist")
        if not Path(self.model).exists():
            raise FileNotFoundError(f"model {self.model} does not exist")
        gen = self.options.generator
        if gen not in (None, "joint") and not Path(gen).is_dir():
            raise FileNotFoundError(f"generator {gen} does not exist (a folder, or 'joint')")
        self._validate_context()
        return self

    def _validate_context(self) -> None:
        from dense_pt.pretrain.context_data import CONTEXT_METHODS, plan

        if self.method not in CONTEXT_METHODS:
            for key in ("queries", "curriculum", "stage_schedules"):
                if getattr(self, key) is not None:
                    raise InvalidArgumentError(
                        f"--{key.replace('_', '-')} is for {' and '.join(CONTEXT_METHODS)}, not {self.method}"
                    )
            return
        if self.queries is not None and not Path(self.queries).is_dir():
            raise FileNotFoundError(f"queries folder {self.queries} does not exist (run `dense-pt expand`)")
        if self.max_query_tokens < 1:
            raise InvalidArgumentError(f"max_query_tokens must be >= 1, got {self.max_query_tokens}")
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
            "stages": [[s.source, s.start, s.end, s.schedule] for s in self.stages()],
        }


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a pre-training TOML into {top-level values, 'options': {...}, 'train': {...}}, checking
    every key and type (errors name the file and the key)."""
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
            out["train"] = dataclass_from_mapping(TrainConfig, value, path=path, section="train")
        elif key in ("method", "model", "corpus", "out", "queries", "curriculum", "stage_schedules"):
            if not isinstance(value, str):
                raise FormatError(f"key '{key}': expected a string, got {value!r}", path=path)
            out[key] = str(path.parent / value) if key in _PATHS and not Path(value).is_absolute() else value
        elif key in ("max_length", "max_query_tokens"):
            if isinstance(value, bool) or not isinstance(value, int):
                raise FormatError(f"key '{key}': expected an integer, got {value!r}", path=path)
            out[key] = value
        else:
            known = (
                "method, model, corpus, out, max_length, queries, curriculum, stage_schedules, "
                "max_query_tokens, [options], [train]"
            )
            raise FormatError(f"unknown key '{key}' (known: {known})", path=path)
    return out


def build_config(
    toml: str | Path | None = None,
    *,
    top: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    train: dict[str, Any] | None = None,
) -> PretrainConfig:
    """Merge a TOML file (optional) with overrides (``None`` values are ignored) and validate."""
    base = load_config(toml) if toml else {}
    merged_top = {k: v for k, v in base.items() if k not in ("options", "train")}
    merged_top.update({k: v for k, v in (top or {}).items() if v is not None})
    missing = [k for k in ("method", "model", "corpus", "out") if not merged_top.get(k)]
    if missing:
        where = f" (not in {toml} either)" if toml else ""
        raise InvalidArgumentError(
            f"missing required setting(s): {', '.join('--' + m for m in missing)}{where}"
        )
    opts = base.get("options", MethodOptions())
    opts = dataclasses.replace(opts, **{k: v for k, v in (options or {}).items() if v is not None})
    tcfg = base.get("train", TrainConfig())
    tcfg = dataclasses.replace(tcfg, **{k: v for k, v in (train or {}).items() if v is not None})
    cfg = PretrainConfig(
        method=merged_top["method"],
        model=str(merged_top["model"]),
        corpus=str(merged_top["corpus"]),
        out=str(merged_top["out"]),
        max_length=int(merged_top.get("max_length", 144)),
        options=opts,
        train=tcfg,
        queries=None if merged_top.get("queries") is None else str(merged_top["queries"]),
        curriculum=merged_top.get("curriculum"),
        stage_schedules=merged_top.get("stage_schedules"),
        max_query_tokens=int(merged_top.get("max_query_tokens", 32)),
    )
    return cfg.validate()
