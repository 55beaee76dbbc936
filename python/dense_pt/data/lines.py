"""Line-level reading shared by every text format: decoding, BOM and CRLF handling, line numbers.

Files are read as bytes and decoded line by line, so a bad byte is reported with its line number
instead of somewhere inside a 3 GB buffer, and nothing but the current line is held in memory.
``.gz`` files are decompressed on the fly.

Policies (documented in the README, section "Data"):
- CRLF line endings are accepted (the ``\\r`` is dropped).
- A UTF-8 byte-order mark at the very start of a file is accepted with a ``DataWarning`` (some
  BEIR files carry one); a BOM anywhere else (typically two files concatenated) is a FormatError.
- Blank lines are skipped (a trailing newline or an empty last line is common).
- Invalid UTF-8 is a FormatError naming the line and the byte offset within it.
"""

from __future__ import annotations

import gzip
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from dense_pt.errors import DataWarning, FormatError

BOM = b"\xef\xbb\xbf"


def open_binary(path: Path) -> IO[bytes]:
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    if path.is_dir():
        raise FormatError("expected a file, found a directory", path=path)
    if path.suffix == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for each non-blank line: 1-based numbers, no line ending."""
    path = Path(path)
    with open_binary(path) as f:
        for lineno, raw in enumerate(f, start=1):
            if lineno == 1 and raw.startswith(BOM):
                warnings.warn(
                    DataWarning(f"{path}:1: file starts with a UTF-8 byte-order mark; ignoring it"),
                    stacklevel=2,
                )
                raw = raw[len(BOM) :]
            elif BOM in raw:
                raise FormatError(
                    "unexpected UTF-8 byte-order mark inside the file (were two files concatenated?)",
                    path=path,
                    line=lineno,
                )
            raw = raw.rstrip(b"\n").rstrip(b"\r")
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise FormatError(
                    f"invalid UTF-8 at byte {exc.start} of the line ({exc.reason}); expected UTF-8 text",
                    path=path,
                    line=lineno,
                ) from None
            yield lineno, text


def first_line(path: str | Path) -> str | None:
    """The first non-blank line (decoded leniently, BOM stripped), for format sniffing."""
    path = Path(path)
    with open_binary(path) as f:
        for raw in f:
            raw = raw.removeprefix(BOM).rstrip(b"\r\n")
            if raw.strip():
                return raw.decode("utf-8", errors="replace")
    return None
