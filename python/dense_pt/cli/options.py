"""Typer options generated from the config models (``dense_pt.config``), and the shared
``--config FILE`` / ``--set dotted.key=VALUE`` handling.

A command declares its hand-written parameters (positional arguments, paths, flags that are not
settings) and ``**values``; ``with_model_options`` appends one option per field of its models,
with the field's description as help, in its help panel (``dense_pt.cli.panels``), its choices (a ``Literal``, or a ``str`` field's
``json_schema_extra`` enum) as a typer choice and the model's default shown as the option's. An
option the command line did not give reaches the command as ``None`` (click's parameter source
says which were given), so the file's value, else the model's default, applies: the model stays
the one place of each default and each check. ``load_settings`` merges a file, ``--set`` and the
options, in that order, and validates the result once, so a bad value names its dotted key
wherever it came from (``dense-pt train retriever: group_size: must be >= 1, got 0``). Only
typer's public API is used: choices are Enums (typer's own choice type), flags show no
type through their metavar."""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from enum import Enum, StrEnum
from pathlib import Path
from typing import Any, TypeVar

import typer
from pydantic.fields import FieldInfo

from dense_pt.cli.panels import PANELLED_FROM, panel
from dense_pt.config.base import Model

M = TypeVar("M", bound=Model)
F = TypeVar("F", bound=Callable[..., Any])
Table = tuple[str, type[Model]]  # ("top", model): its fields are the file's top level; else a [table]

CONFIG_HELP = "TOML file with the same keys; options given here override it."
SET_HELP = "Set one key as the --config file would (it may stand alone): dotted.key=VALUE, checked as the file's own."


FORCE_FILE_HELP = "Replace the output file if it exists (dense-pt cannot tell a file it wrote from yours)."
FORCE_DIR_HELP = (
    "Write into the output folder even if it is not empty and dense-pt did not write it: files of "
    "the names dense-pt writes are replaced, no other file is touched."
)


def flag(*decls: str, help: str, default: bool = False) -> Any:
    """A flag (an option that takes no value): its help shows no type."""
    return typer.Option(default, *decls, help=help, metavar="")


def force_option(help: str = FORCE_FILE_HELP) -> Any:
    """``--force``: what may replace something dense-pt cannot prove it wrote (see
    ``dense_pt.artifacts.check_output_file`` / ``claim``)."""
    return flag("--force", help=help)


def config_option(help: str = CONFIG_HELP) -> Any:
    return typer.Option(None, "--config", help=help)


def set_option(help: str = SET_HELP) -> Any:
    return typer.Option([], "--set", metavar="KEY=VALUE", help=help)


def choice_type(names: Iterable[str], name: str = "Choice") -> type[StrEnum]:
    """A closed list of names as the type typer makes a choice of (an Enum: public in every typer
    since 0.16, unlike ``click_type``, which typer 0.29 no longer has): the names shown in
    ``--help`` as ``<a|b|c>``, completed by the shell, a bad one refused naming them (exit 2). The
    command receives the plain name (``command``)."""
    return StrEnum(name, [(n, n) for n in names])  # type: ignore[return-value]


def field_choices(annotation: Any, extra: Any = None) -> tuple[str, ...] | None:
    """The names a model field takes: its ``Literal``'s (inside ``X | None`` or ``Annotated`` too),
    or the ``enum`` of its ``json_schema_extra`` (a ``str`` field that a validator checks against a
    list of ``dense_pt.config.choices``, which keeps its own message); None for an open field."""
    if isinstance(extra, dict) and extra.get("enum"):
        return tuple(extra["enum"])
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return tuple(str(a) for a in typing.get_args(annotation))
    if origin is typing.Annotated:
        return field_choices(typing.get_args(annotation)[0])
    if origin in (types.UnionType, typing.Union):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        found = [c for a in members if (c := field_choices(a))]
        return found[0] if len(found) == 1 == len(members) else None  # a number or a word: open
    return None


def _literal_members(annotation: Any) -> tuple[Any, list[Any]]:
    """(the literal names, the other non-None members) of a union field (through ``Annotated``)."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _literal_members(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) not in (types.UnionType, typing.Union):
        return (), []
    members = [a for a in typing.get_args(annotation) if a is not type(None)]
    words = tuple(
        str(w) for a in members if typing.get_origin(a) is typing.Literal for w in typing.get_args(a)
    )
    return words, [a for a in members if typing.get_origin(a) is not typing.Literal]


def number_or_word(annotation: Any) -> str | None:
    """The metavar of a field that takes a value or a word (``cache_chunk``: a count or "auto"),
    ``INT|auto``; None for any other field. Its option takes text, read as ``--set`` reads a VALUE."""
    words, others = _literal_members(annotation)
    if not words or not others:
        return None
    first = typing.get_origin(others[0]) or others[0]
    if first is typing.Annotated:
        first = typing.get_args(others[0])[0]
    return "|".join([getattr(first, "__name__", "VALUE").upper(), *words])


LONG_CHOICES = 40  # characters: a longer list is named in the help text, not in the type column


def choice_help(name: str, names: Sequence[str] | None, help: str | None) -> tuple[str | None, str | None]:
    """The metavar and help of a choice option: the names themselves (``<a|b|c>``), or, for a long
    list that would wrap in the type column, ``NAME`` with the names in the help text."""
    if not names or len("|".join(names)) <= LONG_CHOICES:
        return None, help
    if all(n in (help or "") for n in names):
        return name.upper(), help
    return name.upper(), f"{help or ''} One of: {', '.join(names)}.".strip()


def cli_type(annotation: Any, names: Sequence[str] | None = None) -> Any:
    """The typer type of a model field: its non-None member; a choice (a ``Literal``, or ``names``)
    a ``choice_type``; a count-or-fraction (warm-up, epochs) a float, the model checking it; a list
    a repeatable option."""
    names = names or field_choices(annotation)
    if typing.get_origin(annotation) is list:
        return annotation
    if number_or_word(annotation):
        return str  # ``split`` reads it as --set would: 64 a number, auto a word
    if names:
        return choice_type(names)
    args = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    first = typing.get_origin(args[0]) or args[0]
    if first is typing.Annotated:
        return cli_type(typing.get_args(args[0])[0]) if len(args) == 1 else float
    return float if float in args or len(args) > 1 else args[0]


def _extra(f: FieldInfo) -> Any:
    return f.json_schema_extra if isinstance(f.json_schema_extra, dict) else None


def model_options(
    tables: Sequence[Table],
    *,
    only: Iterable[str] | None = None,
    skip: Iterable[str] = (),
    flags: dict[str, Sequence[str]] | None = None,
    shown: Callable[[str, str, FieldInfo], str | None] | None = None,
    eager: Iterable[str] = (),
) -> list[inspect.Parameter]:
    """One keyword option per field of ``tables`` (nested model tables skipped: their fields come
    from their own entry), with the field's help, its choices and the model's default shown as the
    option's default (``command`` passes an option not given as None: the file's value, else the
    model's default, applies). ``flags``: extra declarations (``{"out": ["-o"]}``);
    ``shown(table, name, field)``: a description of the default where the model's is not the one
    that applies (pre-training: "the method's paper"), printed ``[default: (the method's paper)]``."""
    keep, drop, flags, eager = set(only) if only is not None else None, set(skip), flags or {}, set(eager)
    params = []
    for table, model in tables:
        for name, f in model.model_fields.items():
            if name in drop or (keep is not None and name not in keep) or _is_table(f.annotation):
                continue
            names = field_choices(f.annotation, _extra(f))
            typ, flag = cli_type(f.annotation, names), "--" + name.replace("_", "-")
            metavar, text = choice_help(name, names, f.description)
            metavar = number_or_word(f.annotation) or metavar
            described = shown(table, name, f) if shown else None
            default = None if described or f.is_required() else f.get_default(call_default_factory=True)
            if isinstance(default, str) and (default.strip() != default or not default):
                described = repr(default)  # a blank value shown quoted: [default: (' ')]
            opt = typer.Option(
                default,
                *([f"{flag}/--no-{flag[2:]}"] if typ is bool else [flag, *flags.get(name, ())]),
                help=text,
                show_default=described or True,
                is_eager=name in eager,
                metavar="" if typ is bool else metavar,  # a flag takes no value: no type shown
                rich_help_panel=panel(model, name),  # dropped by ``command`` for a short command
            )
            params.append(
                inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=typ | None)
            )
    return params


def _is_table(annotation: Any) -> bool:
    return any(
        isinstance(t, type) and issubclass(t, Model) for t in (annotation, *typing.get_args(annotation))
    )


CTX = "ctx"  # the typer.Context parameter ``command`` adds


def _plain(value: Any) -> Any:
    """A choice's Enum member as its name (lists too): the command sees plain ``str``."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    return value


def _closed(annotation: Any, names: Iterable[str], name: str) -> Any:
    """``str`` / ``str | None`` / ``list[str]`` as the same shape of ``choice_type(names)``."""
    choice = choice_type(names, name)
    if typing.get_origin(annotation) is list:
        return list[choice]  # type: ignore[valid-type]
    return choice | None if type(None) in typing.get_args(annotation) else choice


def command(
    fn: Callable[..., Any], params: list[inspect.Parameter] | None = None, **closed: Iterable[str]
) -> Callable[..., Any]:
    """``fn`` ready for typer: with ``params`` (the generated options), they replace its last
    parameter (``**values``), and those the command line did not give reach ``fn`` as None; the
    parameters named in ``closed`` (declared ``str``, ``str | None`` or ``list[str]``) become choices of
    those names. ``fn`` receives plain values (a choice's name, not an Enum member)."""
    fixed = list(inspect.signature(fn, eval_str=True).parameters.values())
    if params is not None:
        fixed = fixed[:-1]
    fixed = [p.replace(annotation=_closed(p.annotation, closed[p.name], p.name)) if p.name in closed else p
             for p in fixed]  # fmt: skip
    generated = [p.name for p in params or ()]
    context = inspect.Parameter(CTX, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        ctx = kwargs.pop(CTX)
        for name in generated:
            source = ctx.get_parameter_source(name)
            if source is None or source.name == "DEFAULT":  # shown in --help, but the file's value wins
                kwargs[name] = None
        return fn(*(_plain(a) for a in args), **{k: _plain(v) for k, v in kwargs.items()})

    every = [*fixed, *(params or ()), context]
    if sum(isinstance(p.default, typer.models.OptionInfo) for p in every) < PANELLED_FROM:
        for p in params or ():
            p.default.rich_help_panel = None  # a short command: one "Options" box
    run.__signature__ = inspect.Signature(every)  # type: ignore[attr-defined]
    # typer reads the types from the annotations (which ``wraps`` copied from fn, as strings)
    run.__annotations__ = {p.name: p.annotation for p in every}
    return run


def with_model_options(
    fn: Callable[..., Any], params: list[inspect.Parameter], **closed: Iterable[str]
) -> Callable[..., Any]:
    """``fn`` (whose last parameter is ``**values``) with ``params`` as its generated options."""
    return command(fn, params, **closed)


def choices(**closed: Iterable[str]) -> Callable[[F], F]:
    """Decorator: ``command(fn, **closed)`` for a command without generated options."""

    def apply(fn: F) -> F:
        return command(fn, None, **closed)  # type: ignore[return-value]

    return apply


def _given(value: Any, annotation: Any) -> Any:
    """An option's value as the file would hold it: a path as text, a number-or-word as TOML reads it."""
    from dense_pt.config.toml import toml_value

    if isinstance(value, Path):
        return str(value)
    return toml_value(value) if isinstance(value, str) and number_or_word(annotation) else value


def split(values: dict[str, Any], tables: Sequence[Table]) -> dict[str, Any]:
    """The options given (not ``None``) as a file's data: top-level keys, then ``{table: {...}}``."""
    out: dict[str, Any] = {}
    for table, model in tables:
        given = {k: _given(v, model.model_fields[k].annotation) for k in model.model_fields
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
