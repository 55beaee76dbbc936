"""The one rule for query and passage ids, applied wherever an id enters (the corpus, query, qrels
and run readers) or leaves (the run writer).

TREC runs and qrels separate their columns by whitespace, so an id that holds a space cannot make
the round trip through our own files: ``a b`` would be written as two columns and refused when read
back. Rather than escape ids (a second spelling of each id, which other tools would not undo), an
id must be one printable word: not empty, no whitespace of any kind (space, tab, no-break space,
...), no control character and no lone UTF-16 surrogate. Surrounding whitespace is dropped by the
readers as before; anything else is refused with the file and line."""

from __future__ import annotations

from pathlib import Path

from dense_pt.errors import FormatError


def id_problem(value: str) -> str | None:
    """Why ``value`` cannot be an id, or None when it can (``str.isprintable`` is False for every
    whitespace character but the space, for control characters and for surrogates: one C-level
    scan)."""
    if not value:
        return "is empty"
    if " " in value or not value.isprintable():
        bad = next(c for c in value if c == " " or not c.isprintable())
        return (
            f"contains {_describe(bad)}: an id must be one word (TREC runs and qrels separate "
            "columns by whitespace); rename it"
        )
    return None


def _describe(c: str) -> str:
    if c.isspace():
        return "whitespace" if c == " " else f"whitespace ({c!r})"
    if 0xD800 <= ord(c) <= 0xDFFF:
        return f"a lone UTF-16 surrogate ({c!r})"
    return f"a control character ({c!r})"


def check_id(value: str, what: str, path: str | Path | None = None, line: int | None = None) -> str:
    """``value`` if it is a valid id, else a FormatError naming ``what`` (``passage id``), the file
    and the line."""
    problem = id_problem(value)
    if problem is not None:
        raise FormatError(f"{what} {value!r} {problem}", path=path, line=line)
    return value
