"""Reading a TOML config and applying ``--set dotted.key=VALUE`` overrides to it (before the
model validates, so an override is checked exactly as the file's own value)."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

from dense_pt.errors import FormatError, InvalidArgumentError


def read_toml(path: str | Path) -> dict[str, Any]:
    """Parse a TOML file; syntax errors become a FormatError naming the file."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(f"invalid TOML: {exc}", path=path) from exc


def apply_overrides(raw: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``raw`` with each ``dotted.key=VALUE`` set (VALUE in TOML syntax, else taken as a string;
    tables created as needed); a copy, ``raw`` is kept."""
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
