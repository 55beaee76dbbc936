"""What a command prints as its result: with ``--json``, one JSON document on stdout (for scripts
and ``jq``); otherwise text for a person (a table or lines on stdout, or the status line on
stderr). Every command that has a result takes ``--json`` through ``json_option`` and prints
through ``emit``; progress, warnings and errors stay on stderr either way."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import PurePath
from typing import Any

import typer

JSON_HELP = "Print the result as one JSON document on stdout (for scripts and jq) instead of text."


def json_option() -> Any:
    """``--json``: the command's result as one JSON document on stdout."""
    return typer.Option(False, "--json", help=JSON_HELP, metavar="")


def plain(value: Any) -> Any:
    """``value`` as JSON's types: paths as strings, numpy numbers and arrays as numbers and lists,
    dataclasses and pydantic models as objects, a NaN or infinite float as null (JSON has none)."""
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Enum):
        return plain(value.value)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    if hasattr(value, "model_dump"):  # a pydantic model
        return plain(value.model_dump())
    if hasattr(value, "tolist"):  # a numpy scalar or array
        return plain(value.tolist())
    raise TypeError(f"no JSON form for {type(value).__name__}")


def emit(result: Any, as_json: bool, text: Callable[[], None] | None = None) -> None:
    """The command's ``result`` as one JSON document on stdout with ``--json``, else ``text()``
    (which prints it for a person). Under torchrun only rank 0 prints the document: one per job."""
    if as_json:
        if os.environ.get("RANK", "0") == "0":
            typer.echo(json.dumps(plain(result), indent=2, ensure_ascii=False))
    elif text is not None:
        text()
