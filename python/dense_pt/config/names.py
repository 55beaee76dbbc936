"""Names a user gives that become part of a file name: checked as plain names, so that ``../x``,
``/abs/path`` or ``a/b`` never lead a command out of the folder it writes into.

- an *identifier* (``IDENTIFIER``): ASCII letters, digits and ``_``, not starting with a digit
  (column names of a corpus store);
- a *plain name* (``PLAIN_NAME``): also ``-`` and ``.``, starting with a letter, digit or ``_``
  (study objectives and their labels, ``cdmae-cls``; folder names built from them).

Both at most 100 characters. ``check_name`` applies them to file names; the config
models (a study's objectives) check their values with ``plain_name``."""

from __future__ import annotations

import re

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


def name_problem(name: object, pattern: re.Pattern[str] = PLAIN_NAME) -> str | None:
    """Why ``name`` is not a plain name (or an identifier), or None when it is one."""
    if isinstance(name, str) and pattern.fullmatch(name):
        return None
    if pattern is IDENTIFIER:
        return f"must be a plain identifier (letters, digits and _, not starting with a digit), got {name!r}"
    return (
        f"must be a plain name (letters, digits, _, - and ., starting with a letter, digit or _; "
        f"no / or ..), got {name!r}"
    )


def plain_name(name: str, what: str) -> str:
    """``name`` when it is a plain name, else a ``ValueError`` naming ``what`` (a model's
    validator turns it into a ``ConfigError`` naming the key)."""
    problem = name_problem(name)
    if problem is not None:
        raise ValueError(f"{what} {problem}")
    return name


def check_name(name: str, what: str, reserved: tuple[str, ...] = (), plain: bool = False) -> str:
    """``name`` if it is a plain identifier (ASCII letters, digits, ``_``; not starting with a
    digit; at most 100 characters; with ``plain``: ``-`` and ``.`` too, see
    above) and not reserved. Every user-given name that becomes part of a file
    name goes through here, so ``../evil`` never leaves the folder it is meant for."""
    from dense_pt.errors import InvalidArgumentError

    problem = name_problem(name, PLAIN_NAME if plain else IDENTIFIER)
    if problem is not None:
        raise InvalidArgumentError(f"{what} {problem}")
    if name in reserved:
        raise InvalidArgumentError(f"{what} {name!r} is reserved (reserved: {', '.join(reserved)})")
    return name
