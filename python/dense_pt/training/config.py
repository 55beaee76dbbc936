"""Configuration of a training run: one dataclass, validated, loadable from a TOML table.

Every stage (pre-training, retriever, re-ranker, distillation) reads its own TOML file; CLI options
override the file. Validation errors name the file and the key, so a typo fails loudly instead of
being ignored.
"""

from __future__ import annotations

import dataclasses
import tomllib
import types
import typing
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from dense_pt.errors import FormatError, InvalidArgumentError

SCHEDULES = ("linear", "cosine", "constant")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")


@dataclass
class TrainConfig:
    """Optimisation settings shared by every training stage.

    ``warmup`` is a step count when >= 1, a fraction of ``max_steps`` when < 1.
    ``batch_size`` is per process and per micro-step: the global batch is
    ``batch_size * grad_accum * world_size``. ``threads`` sets torch's intra-op CPU threads
    (0 keeps torch's default; on a busy shared CPU, 1 avoids spinning thread pools).
    """

    max_steps: int = 1000
    batch_size: int = 32
    lr: float = 1e-4
    weight_decay: float = 0.01
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    warmup: float = 0.1
    schedule: str = "linear"
    min_lr_ratio: float = 0.0
    grad_accum: int = 1
    max_grad_norm: float = 1.0
    precision: str = "auto"
    seed: int = 42
    save_every: int = 500
    keep_checkpoints: int = 2
    log_every: int = 10
    num_workers: int = 0
    prefetch_factor: int = 2
    find_unused_parameters: bool = False
    threads: int = 0
    report_to: str = "none"  # "tensorboard": scalars under OUT/tb as well (the tensorboard extra)

    def warmup_steps(self) -> int:
        if self.warmup >= 1:
            return int(self.warmup)
        return round(self.warmup * self.max_steps)

    def validate(self, where: str = "config") -> TrainConfig:
        def bad(key: str, why: str) -> InvalidArgumentError:
            return InvalidArgumentError(f"{where}: {key} {why}")

        for key in ("max_steps", "batch_size", "grad_accum", "log_every", "save_every", "keep_checkpoints"):
            if getattr(self, key) < 1:
                raise bad(key, f"must be >= 1, got {getattr(self, key)}")
        if not self.lr > 0:
            raise bad("lr", f"must be > 0, got {self.lr}")
        if self.weight_decay < 0:
            raise bad("weight_decay", f"must be >= 0, got {self.weight_decay}")
        if not (0 <= self.adam_beta1 < 1 and 0 <= self.adam_beta2 < 1):
            raise bad("adam_beta1/adam_beta2", "must lie in [0, 1)")
        if self.warmup < 0:
            raise bad("warmup", f"must be >= 0, got {self.warmup}")
        if self.schedule not in SCHEDULES:
            raise bad("schedule", f"must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise bad("min_lr_ratio", f"must lie in [0, 1], got {self.min_lr_ratio}")
        if self.precision not in PRECISIONS:
            raise bad("precision", f"must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.max_grad_norm < 0:
            raise bad("max_grad_norm", f"must be >= 0 (0 disables clipping), got {self.max_grad_norm}")
        if self.num_workers < 0:
            raise bad("num_workers", f"must be >= 0, got {self.num_workers}")
        if self.threads < 0:
            raise bad("threads", f"must be >= 0 (0 = torch's default), got {self.threads}")
        if self.prefetch_factor < 1:
            raise bad("prefetch_factor", f"must be >= 1, got {self.prefetch_factor}")
        if self.report_to not in ("none", "tensorboard"):
            raise bad("report_to", f"must be one of none, tensorboard, got {self.report_to!r}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def read_toml(path: str | Path) -> dict[str, Any]:
    """Parse a TOML file; syntax errors become a FormatError naming the file."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(f"invalid TOML: {exc}", path=path) from exc


def _check_type(value: Any, annotation: Any) -> Any:
    """Coerce ``value`` to the field's annotated type or raise TypeError with a short reason."""
    if isinstance(annotation, str):
        annotation = eval(annotation, vars(typing), {})  # annotations are postponed strings here
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _check_type(value, arg)
            except TypeError:
                continue
        raise TypeError(f"expected {annotation}")
    if origin is dict or annotation is dict:
        if not isinstance(value, dict):
            raise TypeError("expected a table")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise TypeError("expected an array")
        return value
    if annotation is bool:
        if not isinstance(value, bool):
            raise TypeError("expected true or false")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("expected an integer")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError("expected a number")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise TypeError("expected a string")
        return value
    return value


def dataclass_from_mapping(
    cls: type, data: dict[str, Any], path: str | Path | None = None, section: str = ""
):
    """Build ``cls`` from a mapping, rejecting unknown keys and wrong types with the file and key named."""
    known = {f.name: f for f in fields(cls)}
    prefix = f"{section}." if section else ""
    kwargs = {}
    for key, value in data.items():
        if key not in known:
            raise FormatError(f"unknown key '{prefix}{key}' (known: {', '.join(sorted(known))})", path=path)
        try:
            kwargs[key] = _check_type(value, known[key].type)
        except TypeError as exc:
            raise FormatError(f"key '{prefix}{key}': {exc}, got {value!r}", path=path) from None
    return cls(**kwargs)


def merge_overrides(base: Any, overrides: dict[str, Any]) -> Any:
    """Return a copy of dataclass ``base`` with the non-None ``overrides`` applied (CLI beats TOML)."""
    changes = {k: v for k, v in overrides.items() if v is not None}
    return dataclasses.replace(base, **changes)
