"""The proof an Arrow run carries that it is as dense-pt wrote it: a checksum of every record batch.

``RunWriter`` stores, in each record batch's IPC message metadata (``dense_pt.checksum``), a
BLAKE2b-128 digest of the batch's column content as written (the values of each column: a string
column's offsets from 0 and its bytes, a number column's values), and declares the algorithm in the
schema's metadata under the same key. ``RunReader`` recomputes each batch's digest as it reads it
and refuses a batch that differs, naming the file and the rows: one byte flipped anywhere in the
data is refused, whether the batch was compressed (then zstd usually refuses it first) or not.

Why per batch and not one digest of the file: the schema (and its metadata) is written before the
first row, and a run is streamed to disk a chunk of queries at a time, so a whole-run digest could
only go in a second file; a batch's digest also lets a reader verify exactly the batches it reads.
A damaged footer (the end of the file, where the batches are listed) makes the file unreadable
(``pyarrow.ipc.open_file`` refuses it), which the reader reports as one line too.

Why BLAKE2b: it is in Python's standard library (dense-pt's own xxh3 is the Rust core's file hash,
which cannot hash an Arrow buffer in memory), runs at about 1 GB/s, and releases the interpreter
for large buffers. Runs written by other tools, or by dense-pt before this existed, carry no
``dense_pt.checksum`` in their schema and are read unverified (the other checks still apply).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa

from dense_pt.errors import FormatError

CHECKSUM_KEY = "dense_pt.checksum"
ALGORITHM = "blake2b-128"


def _views(arr: pa.Array) -> Iterator[bytes | memoryview]:
    """The content of one column, independent of how its buffers are laid out (a slice, an offset
    that does not start at 0): what a reader must find again, byte for byte."""
    bufs = arr.buffers()
    n, first = len(arr), arr.offset
    yield n.to_bytes(8, "little")
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        wide = pa.types.is_large_string(arr.type)
        dtype = np.int64 if wide else np.int32
        if bufs[1] is None or n == 0:
            return
        offsets = np.frombuffer(bufs[1], dtype=dtype, count=first + n + 1)[first:]
        yield (offsets - offsets[0]).astype(np.int64).tobytes()
        if bufs[2] is not None:
            yield memoryview(bufs[2])[int(offsets[0]) : int(offsets[-1])]
        return
    width = arr.type.bit_width // 8
    if bufs[1] is not None and n:
        yield memoryview(bufs[1])[first * width : (first + n) * width]


def impossible_allocation(exc: BaseException) -> bool:
    """Whether Arrow's failed allocation asked for more bytes than the machine has: a length read
    from a damaged file (a flipped byte in a buffer's size), not memory running out."""
    m = re.search(r"of size (\d+)", str(exc))
    try:
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return False
    return m is not None and int(m.group(1)) > ram


def batch_digest(batch: pa.RecordBatch) -> str:
    """The digest of a record batch's columns, in the schema's order (32 hex digits)."""
    h = hashlib.blake2b(digest_size=16)
    for col in batch.columns:
        for view in _views(col):
            h.update(view)
    return h.hexdigest()


def batch_metadata(batch: pa.RecordBatch) -> dict[str, str]:
    """What ``RunWriter`` writes beside a batch."""
    return {CHECKSUM_KEY: batch_digest(batch)}


def schema_metadata() -> dict[str, str]:
    """What ``RunWriter`` adds to a run's schema metadata: the batches carry a digest."""
    return {CHECKSUM_KEY: ALGORITHM}


def declared(schema: pa.Schema, path: Path) -> bool:
    """Whether the run's batches carry digests (a run by dense-pt); an algorithm this version does
    not know is refused."""
    algo = (schema.metadata or {}).get(CHECKSUM_KEY.encode())
    if algo is None:
        return False
    if algo.decode(errors="replace") != ALGORITHM:
        raise FormatError(
            f"the run's checksum algorithm {algo.decode(errors='replace')!r} is unknown to this version "
            f"of dense-pt (it knows {ALGORITHM!r}): upgrade dense-pt, or the schema was damaged",
            path=path,
        )
    return True


def verify_batch(batch: pa.RecordBatch, meta: Mapping[bytes, bytes] | None, index: int, row0: int,
                 path: Path) -> None:  # fmt: skip
    """Refuse batch ``index`` (file rows ``row0 + 1`` ...) unless its content matches its digest."""
    want = (meta or {}).get(CHECKSUM_KEY.encode())
    rows = f"record batch {index} (rows {row0 + 1:,} to {row0 + batch.num_rows:,})"
    if want is None:
        raise FormatError(
            f"{rows} has no checksum though the run declares one: the file was damaged or "
            "altered after dense-pt wrote it; write it again",
            path=path,
        )
    got = batch_digest(batch)
    if got != want.decode(errors="replace"):
        raise FormatError(
            f"{rows} does not match its checksum ({ALGORITHM} {got}, written {want.decode(errors='replace')}): "
            "the file was damaged after dense-pt wrote it; write it again",
            path=path,
        )
