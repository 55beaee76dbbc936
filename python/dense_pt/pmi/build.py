"""Build, merge and apply n-gram tables: counting runs in the Rust core, this is the glue to the
corpus store, the memory budget and progress reporting."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dense_pt import _native
from dense_pt.config.pmi import MAX_N, MEMORY_GB, MIN_COUNT, WINDOW, PmiBuild
from dense_pt.config.shard import parse_shard
from dense_pt.errors import FormatError, InvalidArgumentError, MismatchError
from dense_pt.pmi.table import NgramTable, check_int

Progress = Callable[[str, int, int], None]
ZERO_HASH = "0" * 64


def _budget(memory_gb: float | None, memory_bytes: int | None) -> int:
    if memory_bytes is not None:
        if memory_bytes < 0:
            raise InvalidArgumentError("memory_bytes must be >= 0")
        return int(memory_bytes)
    if memory_gb is None or not memory_gb > 0 or memory_gb == float("inf"):
        raise InvalidArgumentError(f"memory_gb (--memory-gb) must be a positive number, got {memory_gb}")
    return int(memory_gb * (1 << 30))


def _threads(threads: int | None) -> int:
    if threads is None:
        return max(
            1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        )
    if threads < 1:
        raise InvalidArgumentError(f"threads must be >= 1, got {threads}")
    return threads


def _open_store(store: Any) -> Any:
    from dense_pt.data.store import CorpusStore

    return store if isinstance(store, CorpusStore) else CorpusStore.open(store)


def build_arrays(
    values: np.ndarray,
    offsets: np.ndarray,
    out: str | Path,
    *,
    vocab_size: int | None = None,
    vocab_hash: str = ZERO_HASH,
    max_n: int = MAX_N,
    min_count: int = MIN_COUNT,
    memory_gb: float | None = MEMORY_GB,
    memory_bytes: int | None = None,
    threads: int | None = None,
    shard: str | tuple[int, int] | None = None,
    spill_dir: str | Path | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Count the n-grams of a ragged corpus (``values[offsets[i]:offsets[i+1]]`` is passage i)."""
    values = np.ascontiguousarray(values, dtype=np.uint32)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    if vocab_size is None:
        vocab_size = int(values.max()) + 1 if values.size else 1
    si, sn = parse_shard(shard)
    stats = _native.build_ngrams(
        values,
        offsets,
        str(out),
        vocab_size=check_int("vocab_size", vocab_size, 1, (1 << 32) - 1),
        vocab_hash=vocab_hash,
        max_n=check_int("max_n (--max-n)", max_n, 1, 64),
        min_count=check_int("min_count (--min-count)", min_count, 1),
        memory_bytes=_budget(memory_gb, memory_bytes),
        threads=_threads(threads),
        shard_index=si,
        shard_count=sn,
        spill_dir=None if spill_dir is None else str(spill_dir),
        progress=progress,
    )
    stats["path"] = str(out)
    stats["shard"] = f"{si}/{sn}"
    return stats


def count_arrays(
    values: np.ndarray,
    offsets: np.ndarray,
    *,
    vocab_size: int | None = None,
    max_n: int = MAX_N,
    min_count: int = MIN_COUNT,
    memory_gb: float | None = MEMORY_GB,
    memory_bytes: int | None = None,
    threads: int | None = None,
    spill_dir: str | Path | None = None,
    progress: Progress | None = None,
) -> tuple[list[tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
    """Count the n-grams of a ragged corpus into memory, without writing a table.

    Returns ``(orders, stats)``: ``orders[n - 1] = (keys, counts)``, the ascending distinct
    n-grams of order n packed into uint64 (token k of the n-gram in bits
    ``(n - 1 - k) * b .. (n - k) * b`` with ``b = max(1, (vocab_size - 1).bit_length())``) and
    their counts (orders >= 2 pruned below ``min_count``): the same entries a table built with
    these options holds. Needs ``max_n * b <= 64``.
    """
    values = np.ascontiguousarray(values, dtype=np.uint32)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    if vocab_size is None:
        vocab_size = int(values.max()) + 1 if values.size else 1
    return _native.count_ngrams(
        values,
        offsets,
        vocab_size=check_int("vocab_size", vocab_size, 1, (1 << 32) - 1),
        max_n=check_int("max_n (--max-n)", max_n, 1, 64),
        min_count=check_int("min_count (--min-count)", min_count, 1),
        memory_bytes=_budget(memory_gb, memory_bytes),
        threads=_threads(threads),
        spill_dir=None if spill_dir is None else str(spill_dir),
        progress=progress,
    )


def build(
    store_or_path: Any,
    out: str | Path,
    settings: PmiBuild | None = None,
    *,
    spill_dir: str | Path | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Count 1..max_n-grams of a corpus store (or one shard of it) into the table file ``out``,
    with ``settings`` (default: ``PmiBuild()``; e.g. ``PmiBuild(max_n=3, shard="0/4")``).

    ``memory_gb`` bounds peak memory including the memory-mapped corpus. A shard (``"I/N"``)
    counts passages ``[I*P/N, (I+1)*P/N)`` and keeps unpruned counts; prune when merging. The
    returned statistics record the settings (``"settings"``).
    """
    s = PmiBuild() if settings is None else settings
    store = _open_store(store_or_path)
    if len(store) == 0:  # a store built with --allow-empty: a table of nothing is no statistic
        raise FormatError("the corpus store has no passages: there are no n-grams to count", path=store.path)
    values, offsets = store.ragged("input_ids")
    stats = build_arrays(
        values,
        offsets,
        out,
        vocab_size=store.vocab_size,
        vocab_hash=store.vocab_hash,
        max_n=s.max_n,
        min_count=s.min_count,
        memory_gb=s.memory_gb,
        threads=s.threads,
        shard=s.shard,
        spill_dir=spill_dir,
        progress=progress,
    )
    stats["store"] = str(store.path)
    stats["settings"] = s.model_dump()
    return stats


def merge(
    parts: Sequence[str | Path],
    out: str | Path,
    min_count: int = MIN_COUNT,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Merge the shard tables of one corpus into the table an unsharded build writes (same bytes)."""
    totals = _native.merge_ngrams(
        [str(p) for p in parts],
        str(out),
        min_count=check_int("min_count (--min-count)", min_count, 1),
        progress=progress,
    )
    return {
        "path": str(out),
        "totals": totals,
        "parts": len(parts),
        "peak_rss_bytes": _native.peak_rss_bytes(),
    }


def score(
    store: Any,
    table: NgramTable | str | Path,
    window: int = WINDOW,
    dtype: str = "float32",
    threads: int | None = None,
    force: bool = True,
    column: str = "importance",
) -> dict[str, Any]:
    """Add the per-token AMI column (``importance`` by default) to the store, atomically."""
    import time

    from dense_pt.config.names import check_name
    from dense_pt.data.store import RESERVED_COLUMNS

    if dtype not in ("float32", "float16"):
        raise InvalidArgumentError(f"dtype must be float32 or float16, got {dtype!r}")
    check_name(column, "column name (--column)", RESERVED_COLUMNS)
    window = check_int("window (--window)", window, 2, 64)
    store = _open_store(store)
    if not isinstance(table, NgramTable):
        table = NgramTable.open(table)
    table.check_vocab(store.vocab_hash, f"the store {store.path}")
    if table.vocab_size != store.vocab_size:
        raise MismatchError(
            f"{table.path}: vocab size {table.vocab_size} differs from the store's {store.vocab_size}"
        )
    t0 = time.perf_counter()
    values, offsets = store.ragged("input_ids")
    scores = table.ami_ragged(values, offsets, window=window, threads=_threads(threads))
    seconds = time.perf_counter() - t0
    scores = scores.astype(np.float16) if dtype == "float16" else scores
    meta = {
        "kind": "ami",
        "window": int(window),
        "table": str(Path(table.path).resolve()),
        "table_min_count": table.min_count,
        "table_max_n": table.max_n,
    }
    store.add_column(column, scores, offsets, meta=meta, force=force)
    return {
        "store": str(store.path),
        "column": column,
        "tokens": int(values.size),
        "seconds": seconds,
        "tokens_per_s": values.size / seconds if seconds > 0 else float("inf"),
        "mean": float(scores.mean(dtype=np.float64)) if scores.size else 0.0,  # no float64 copy
    }
