"""Typer options generated from the config models (``dense_pt.config``), and the shared
``--config FILE`` / ``--set dotted.key=VALUE`` handling.

A command declares its hand-written parameters (positional arguments, paths, flags that are not
settings) and ``**values``; ``with_model_options`` appends one option per field of its models,
with the field's description as help and the model's default shown. An option left unset is
``None``, so the file's value, else the model's default, applies: the model stays the one place
of each default and each check. ``load_settings`` merges a file, ``--set`` and the options, in
that order, and validates the result once, so a bad value names its dotted key wherever it came
from (``dense-pt train retriever: group_size: must be >= 1, got 0``)."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import typer

from dense_pt.config.base import Model

M = TypeVar("M", bound=Model)
Table = tuple[str, type[Model]]  # ("top", model): its fields are the file's top level; else a [table]

CONFIG_HELP = "TOML file with the same keys; options given here override it."
SET_HELP = "Set one key as the --config file would (it may stand alone): dotted.key=VALUE, checked as the file's own."


FORCE_FILE_HELP = "Replace the output file if it exists (dense-pt cannot tell a file it wrote from yours)."
FORCE_DIR_HELP = (
    "Write into the output folder even if it is not empty and dense-pt did not write it (its "
    "files may be replaced)."
)


def force_option(help: str = FORCE_FILE_HELP) -> Any:
    """``--force``: what may replace something dense-pt cannot prove it wrote (see
    ``dense_pt.fsutil.check_output_file`` / ``check_output_dir``)."""
    return typer.Option(False, "--force", help=help)


def config_option(help: str = CONFIG_HELP) -> Any:
    return typer.Option(None, "--config", help=help)


def set_option(help: str = SET_HELP) -> Any:
    return typer.Option([], "--set", metavar="KEY=VALUE", help=help)


def cli_type(annotation: Any) -> type:
    """The click type of a model field: its non-None member; a choice (Literal) is a string and a
    count-or-fraction (warm-up, epochs) a float, the model checking both; a list is a repeatable
    option."""
    if typing.get_origin(annotation) is typing.Literal:
        return str
    if typing.get_origin(annotation) is list:
        return annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    first = typing.get_origin(args[0]) or args[0]
    if first is typing.Literal:
        return str
    if first is typing.Annotated:
        return cli_type(typing.get_args(args[0])[0]) if len(args) == 1 else float
    return float if float in args or len(args) > 1 else args[0]


def _shown(default: Any) -> str | bool:
    return False if default is None else repr(default)


def model_options(
    tables: Sequence[Table],
    *,
    only: Iterable[str] | None = None,
    skip: Iterable[str] = (),
    flags: dict[str, Sequence[str]] | None = None,
    shown: Callable[[str, str, Any], str | bool] | None = None,
    eager: Iterable[str] = (),
) -> list[inspect.Parameter]:
    """One keyword option per field of ``tables`` (nested model tables skipped: their fields come
    from their own entry), unset (``None``) by default, with the field's help and default shown.
    ``flags``: extra declarations (``{"out": ["-o"]}``); ``shown(table, name, field)``: the default
    text where it is not the model's (pre-training: "the method's paper")."""
    keep, drop, flags, eager = set(only) if only is not None else None, set(skip), flags or {}, set(eager)
    params = []
    for table, model in tables:
        for name, f in model.model_fields.items():
            if name in drop or (keep is not None and name not in keep) or _is_table(f.annotation):
                continue
            typ, flag = cli_type(f.annotation), "--" + name.replace("_", "-")
            decls = [f"{flag}/--no-{flag[2:]}"] if typ is bool else [flag, *flags.get(name, ())]
            text = shown(table, name, f) if shown else _shown(f.get_default(call_default_factory=True))
            opt = typer.Option(None, *decls, help=f.description, show_default=text, is_eager=name in eager)
            params.append(
                inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=typ | None)
            )
    return params


def _is_table(annotation: Any) -> bool:
    return any(
        isinstance(t, type) and issubclass(t, Model) for t in (annotation, *typing.get_args(annotation))
    )


def with_model_options(fn: Callable[..., Any], params: list[inspect.Parameter]) -> Callable[..., Any]:
    """``fn`` (whose last parameter is ``**values``) with ``params`` as its generated options."""
    fixed = list(inspect.signature(fn, eval_str=True).parameters.values())[:-1]
    fn.__signature__ = inspect.Signature([*fixed, *params])  # type: ignore[attr-defined]
    return fn


def split(values: dict[str, Any], tables: Sequence[Table]) -> dict[str, Any]:
    """The options given (not ``None``) as a file's data: top-level keys, then ``{table: {...}}``."""
    out: dict[str, Any] = {}
    for table, model in tables:
        given = {k: str(v) if isinstance(v, Path) else v for k in model.model_fields
                 if k in values and (v := values[k]) is not None}  # fmt: skip
        if table == "top":
            out.update(given)
        elif given:
            out[table] = given
    return out


def load_settings(
    model: type[M], config: Path | None, sets: list[str] | tuple[str, ...], given: dict[str, Any], where: str
) -> M:
    """``model`` from a TOML file (optional), ``--set`` overrides and the options ``given`` (as
    ``split`` returns them), later ones winning key by key; the file is checked on its own first, so
    its errors name it."""
    from dense_pt.config.toml import apply_overrides, read_toml

    data = apply_overrides(read_toml(config) if config is not None else {}, sets)
    base = model.load(data, config if config is not None else "--set").model_dump(exclude_unset=True)
    for key, value in given.items():
        base[key] = {**base.get(key, {}), **value} if isinstance(value, dict) else value
    return model.load(base, where)
