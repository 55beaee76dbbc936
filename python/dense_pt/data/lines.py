"""Line-level reading shared by every text format: decoding, BOM and CRLF handling, line numbers.

Files are read as bytes and decoded line by line, so a bad byte is reported with its line number
instead of somewhere inside a 3 GB buffer, and nothing but the current line is held in memory.
``.gz`` files are decompressed on the fly.

Policies (documented in docs/data.md):
- CRLF line endings are accepted (the ``\\r`` is dropped).
- A UTF-8 byte-order mark at the very start of a file is accepted with a ``DataWarning`` (some
  BEIR files carry one); a BOM anywhere else (typically two files concatenated) is a FormatError.
- Blank lines are skipped (a trailing newline or an empty last line is common).
- Invalid UTF-8 is a FormatError naming the line and the byte offset within it.
- A line longer than the maximum record size (``max_record_bytes()``: 64 MiB unless
  ``$DENSE_PT_MAX_RECORD_BYTES`` or a reader's ``max_record_bytes=`` says otherwise) is a
  FormatError naming the line, found after reading at most that many bytes of it: one hostile
  record cannot take the memory of the machine.
"""

from __future__ import annotations

import errno
import gzip
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from dense_pt.errors import DataWarning, FormatError, InvalidArgumentError, io_error, not_found

BOM = b"\xef\xbb\xbf"
DEFAULT_MAX_RECORD_BYTES = 64 << 20
MAX_RECORD_ENV = "DENSE_PT_MAX_RECORD_BYTES"


def max_record_bytes(value: int | None = None) -> int:
    """The largest record (line, or Parquet/Arrow row) a reader accepts: ``value`` when given,
    else ``$DENSE_PT_MAX_RECORD_BYTES``, else 64 MiB."""
    if value is None:
        env = os.environ.get(MAX_RECORD_ENV)
        if env is None or env.strip() == "":
            return DEFAULT_MAX_RECORD_BYTES
        try:
            value = int(env)
        except ValueError:
            raise InvalidArgumentError(f"${MAX_RECORD_ENV} must be a number of bytes, got {env!r}") from None
        what = f"${MAX_RECORD_ENV}"
    else:
        what = "max_record_bytes"
    if value < 1:
        raise InvalidArgumentError(f"{what} must be at least 1, got {value}")
    return int(value)


def record_too_large(limit: int) -> str:
    return (
        f"record is longer than the maximum record size of {limit:,} bytes; raise it with "
        f"--max-record-mb or ${MAX_RECORD_ENV} if the input is right"
    )


def open_binary(path: Path) -> IO[bytes]:
    if not path.exists():
        raise not_found(path, "no such file")
    if path.is_dir():
        raise io_error(errno.EISDIR, f"{path}: expected a file, found a folder", path)
    if path.suffix == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def iter_lines(path: str | Path, max_record: int | None = None) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for each non-blank line: 1-based numbers, no line ending.
    A line longer than ``max_record_bytes(max_record)`` is a FormatError."""
    path = Path(path)
    limit = max_record_bytes(max_record)
    with open_binary(path) as f:
        # readline(limit + 2): the line and its CRLF fit; anything longer is cut there.
        for lineno, raw in enumerate(iter(lambda: f.readline(limit + 2), b""), start=1):
            if len(raw) > limit and len(raw.rstrip(b"\r\n")) > limit:
                raise FormatError(record_too_large(limit), path=path, line=lineno)
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
        # A bounded read: enough to sniff the format, never a whole 200 MB line.
        for raw in iter(lambda: f.readline(1 << 16), b""):
            raw = raw.removeprefix(BOM).rstrip(b"\r\n")
            if raw.strip():
                return raw.decode("utf-8", errors="replace")
    return None


# Relevance grades and ranks are 32-bit integers (trec_eval's, pytrec_eval's): 1e20 is not a grade.
INT32 = (-(2**31), 2**31 - 1)


def int_field(value: str, what: str, path: Path, lineno: int, low: int = INT32[0]) -> int:
    """A text field that must be a 32-bit integer (at least ``low``), refused naming the line."""
    try:
        number = int(value)
    except ValueError:
        raise FormatError(f"{what} must be an integer, found {value!r}", path=path, line=lineno) from None
    if not low <= number <= INT32[1]:
        raise FormatError(
            f"{what} must be an integer from {low:,} to {INT32[1]:,}, found {value!r}", path=path, line=lineno
        )
    return number
