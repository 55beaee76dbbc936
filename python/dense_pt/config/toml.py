"""Reading a TOML config and applying ``--set dotted.key=VALUE`` overrides to it (before the
model validates, so an override is checked exactly as the file's own value)."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

from dense_pt.errors import FormatError, InvalidArgumentError

# A configuration is a few KB: anything larger is the wrong file (a corpus, /dev/zero), and is
# refused after reading that much, never read to its end.
MAX_CONFIG_BYTES = 16 << 20


def read_limited(
    path: str | Path, limit: int = MAX_CONFIG_BYTES, what: str = "a configuration file"
) -> bytes:
    """The bytes of a small file, refused (a FormatError) once it has more than ``limit``: an
    endless input (``/dev/zero``, a pipe) ends in one line instead of a hang."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise FormatError(f"larger than {limit >> 20} MiB: not {what}", path=path)
    return data


def read_toml(path: str | Path) -> dict[str, Any]:
    """Parse a TOML file (UTF-8, at most ``MAX_CONFIG_BYTES``); syntax errors, another encoding
    and nesting beyond what the parser can take become a FormatError naming the file."""
    path = Path(path)
    data = read_limited(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        utf16 = data[:2] in (b"\xff\xfe", b"\xfe\xff")
        why = "it is UTF-16: save it as UTF-8" if utf16 else "it is not text (a binary file?)"
        raise FormatError(
            f"not a UTF-8 TOML file (byte {data[exc.start]:#04x} at offset {exc.start}): {why}", path=path
        ) from None
    try:
        return tomllib.loads(text.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(f"invalid TOML: {exc}", path=path) from exc
    except RecursionError:
        raise FormatError("invalid TOML: nested too deeply", path=path) from None


def toml_value(text: str) -> Any:
    """``text`` as a TOML value (``64``, ``true``, ``[1, 2]``), else as the string itself (a path, a
    method name, ``auto``): how ``--set`` and an option taking a number or a word read their VALUE."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_overrides(raw: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``raw`` with each ``dotted.key=VALUE`` set (VALUE in TOML syntax, else taken as a string;
    tables created as needed); a copy, ``raw`` is kept."""
    out = copy.deepcopy(raw)
    for item in overrides:
        key, sep, text = item.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(p.strip() for p in parts):
            raise InvalidArgumentError(f"--set {item!r}: expected dotted.key=VALUE, e.g. r1.group_size=4")
        value = toml_value(text)
        node = out
        for i, p in enumerate(parts[:-1]):
            node = node.setdefault(p.strip(), {})
            if not isinstance(node, dict):
                raise InvalidArgumentError(f"--set {item!r}: {'.'.join(parts[: i + 1])} is not a table")
        node[parts[-1].strip()] = value
    return out
