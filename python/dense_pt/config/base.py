"""The base of every config model and the one formatter of pydantic's errors.

Every model forbids unknown keys and is strict (a string is not a number, ``true`` is not an
integer), refuses ``inf`` and ``nan`` in every float setting, and bounds every number: a count (or
any setting) beyond 2**31 - 1 is a typo, not a plan (``max_steps = 1e23``), and a seed beyond
2**63 - 1 is refused. Every error becomes one ``ConfigError`` line naming the file and the dotted
key: ``pipeline.toml: r1.train.lr: must be > 0, got -1``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from dense_pt.errors import FormatError, InvalidArgumentError


class ConfigError(FormatError, InvalidArgumentError):
    """A configuration value is refused: both a ``FormatError`` (the file is wrong, it is named)
    and an ``InvalidArgumentError`` (the value the caller gave is unusable; the CLI exits 2)."""


def _what(err: Any) -> str:
    """pydantic's message for one error, said the way dense-pt's other errors say it."""
    kind, ctx = err["type"], err.get("ctx") or {}
    bounds = {"greater_than": "> {gt}", "greater_than_equal": ">= {ge}", "less_than": "< {lt}",
              "less_than_equal": "<= {le}"}  # fmt: skip
    if kind in bounds:
        ctx = {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in ctx.items()}
        return "must be " + bounds[kind].format(**ctx)
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "is required"
    if kind == "literal_error":
        return "must be one of " + str(ctx.get("expected", "")).replace("'", "")
    if kind in ("int_type", "int_from_float"):
        return "expected an integer"
    if kind == "float_type":
        return "expected a number"
    if kind == "finite_number":
        return "must be a finite number"
    if kind == "bool_type":
        return "expected true or false"
    if kind == "string_type":
        return "expected a string"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return "expected a table"
    if kind == "list_type":
        return "expected an array"
    if kind == "value_error":
        return str(ctx.get("error", err["msg"]))
    return str(err["msg"])


# pydantic adds a union member's tag to an error's path ("int", "constrained-float", "literal['tune']")
_UNION_TAG = re.compile(r"^(int|float|bool|str|none|constrained-\w+|\w+\[.*\]|function-.*)$")


def _line(err: Any, prefix: str, known: dict[str, list[str]]) -> tuple[str, str]:
    loc = [str(p) for p in err["loc"] if not (isinstance(p, str) and _UNION_TAG.match(p))]
    key = ".".join([prefix, *loc] if prefix else loc)
    what = _what(err)
    if err["type"] == "extra_forbidden":
        table = ".".join([prefix, *loc[:-1]] if prefix else loc[:-1])
        if table in known:
            what += f" (known: {', '.join(known[table])})"
    elif err["type"] not in ("missing", "value_error"):  # a validator's own message says what it got
        what += f", got {err.get('input')!r}"
    return key, f"{key}: {what}" if key else what


def config_error(
    exc: ValidationError, where: str | Path | None, prefix: str = "", model: Any = None
) -> ConfigError:
    """One ``ConfigError`` for a ``ValidationError``: every refused key on one line, each as its
    dotted path from the file's top (``prefix`` when the model is a table inside it)."""
    known = _known_keys(model, prefix) if model is not None else {}
    lines: dict[str, str] = {}
    for err in exc.errors(include_url=False):
        key, line = _line(err, prefix, known)
        if key in lines and err["type"] == "float_type" and "expected an integer" in lines[key]:
            lines[key] = lines[key].replace("expected an integer", "expected a number")
        lines.setdefault(key, line)  # a union's members each fail: its first reason is enough
    return ConfigError("; ".join(lines.values()), path=where)


def _known_keys(model: Any, table: str = "") -> dict[str, list[str]]:
    """{dotted table: its keys} of ``model`` and its nested models, for "unknown key" errors."""
    out = {table: list(model.model_fields)}
    for name, f in model.model_fields.items():
        ann = f.annotation
        for t in (ann, *getattr(ann, "__args__", ())):
            if isinstance(t, type) and issubclass(t, BaseModel):
                out.update(_known_keys(t, f"{table}.{name}" if table else name))
    return out


# The largest magnitude of a number setting (int32: what torch, faiss and numpy index with), and of
# a seed (torch takes 64 bits).
NUMBER_LIMIT = 2**31 - 1
SEED_LIMIT = 2**63 - 1


def _bounded(value: Any, limit: int) -> None:
    """Refuse a number (or a number in a list or table) beyond ``limit`` in magnitude."""
    if isinstance(value, bool):
        return
    if isinstance(value, int | float) and abs(value) > limit:
        raise ValueError(f"must be at most {limit:,} in magnitude, got {value!r}")
    if isinstance(value, list | tuple):
        for v in value:
            _bounded(v, limit)
    elif isinstance(value, dict):
        for v in value.values():
            _bounded(v, limit)


class Model(BaseModel):
    """A config table: unknown keys refused, types strict, floats finite, numbers bounded, every
    value checked on construction (``TrainConfig(lr=0)`` raises a ``ConfigError`` as a bad file
    does)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _sane_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        _bounded(value, SEED_LIMIT if "seed" in (info.field_name or "") else NUMBER_LIMIT)
        return value

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise config_error(exc, None, model=type(self)) from None

    # pydantic calls a custom __init__ when it validates a nested model or ``model_validate``s;
    # marked as the base's, it runs only on direct construction (nested errors keep their path).
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @classmethod
    def load(cls, data: Any, where: str | Path | None = None, prefix: str = "") -> Self:
        """``data`` (a parsed TOML table) validated; errors name ``where`` and the dotted key."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise config_error(exc, where, prefix, model=cls) from None

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied and checked again (``dataclasses.replace`` for models)."""
        return type(self).load({**self.model_dump(), **changes}, type(self).__name__)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()
