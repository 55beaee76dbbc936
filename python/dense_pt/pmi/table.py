"""Read access to an n-gram table file: counts, PMI and AMI per token (memory-mapped, checksummed)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from dense_pt import _native
from dense_pt.config.pmi import WINDOW
from dense_pt.errors import InvalidArgumentError, MismatchError


def check_int(name: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    """``value`` as an int if ``minimum <= value <= maximum``, else an InvalidArgumentError naming
    the parameter (a negative count would otherwise reach the Rust core as an OverflowError)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InvalidArgumentError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"at least {minimum}" if maximum is None else f"between {minimum} and {maximum}"
        raise InvalidArgumentError(f"{name} must be {bound}, got {value}")
    return value


def _id_array(ids: Any) -> np.ndarray:
    """Token ids as contiguous uint32, refusing what does not fit (negative, too large, not int)."""
    arr = np.asarray(ids)
    if arr.size:
        if arr.dtype.kind not in "iu":
            raise InvalidArgumentError(f"token ids must be integers, got dtype {arr.dtype}")
        if int(arr.min()) < 0 or int(arr.max()) >= 1 << 32:
            raise InvalidArgumentError("token ids must be in 0..2^32-1")
    return np.ascontiguousarray(arr.reshape(-1), dtype=np.uint32)


def _token_ids(ids: Any) -> list[int]:
    return _id_array(list(ids) if not isinstance(ids, np.ndarray) else ids).tolist()


class NgramTable:
    """An n-gram table written by :func:`dense_pt.pmi.build` or :func:`dense_pt.pmi.merge`.

    ``open`` validates the header and layout and, with ``verify`` (the default), every section
    checksum; a truncated, corrupt or foreign file raises :class:`dense_pt.errors.FormatError`.
    Lookups binary-search the memory map: the file is never loaded whole.
    """

    def __init__(self, native: _native.NgramTable):
        self._t = native

    @classmethod
    def open(cls, path: str | Path, verify: bool = True) -> NgramTable:
        return cls(_native.NgramTable.open(str(path), verify))

    # ---- statistics ----------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return Path(self._t.path)

    @property
    def vocab_hash(self) -> str:
        return self._t.vocab_hash

    @property
    def vocab_size(self) -> int:
        return self._t.vocab_size

    @property
    def max_n(self) -> int:
        return self._t.max_n

    @property
    def orders(self) -> list[int]:
        return list(range(1, self._t.max_n + 1))

    @property
    def N(self) -> dict[int, int]:
        """``N_n``: occurrences of order n before pruning, per order."""
        return dict(zip(self.orders, self._t.totals, strict=True))

    @property
    def entries(self) -> dict[int, int]:
        """Distinct n-grams stored per order (after pruning)."""
        return dict(zip(self.orders, self._t.entries, strict=True))

    @property
    def min_count(self) -> int:
        return self._t.min_count

    @property
    def num_passages(self) -> int:
        return self._t.num_passages

    @property
    def shard(self) -> tuple[int, int]:
        return tuple(self._t.shard)  # type: ignore[return-value]

    def stats(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "file_bytes": self.path.stat().st_size,
            "vocab_hash": self.vocab_hash,
            "vocab_size": self.vocab_size,
            "max_n": self.max_n,
            "min_count": self.min_count,
            "num_passages": self.num_passages,
            "shard": list(self.shard),
            "N": self.N,
            "entries": self.entries,
        }

    def __repr__(self) -> str:
        return f"NgramTable({str(self.path)!r}, max_n={self.max_n}, entries={self.entries})"

    def check_vocab(self, vocab_hash: str, what: str) -> None:
        """Raise MismatchError unless the table was built with the vocabulary ``vocab_hash``."""
        if vocab_hash != self.vocab_hash:
            raise MismatchError(
                f"{self.path}: the n-gram table was built for vocabulary {self.vocab_hash[:16]}…, "
                f"but {what} uses {vocab_hash[:16]}…; rebuild the table with `dense-pt pmi build`"
            )

    # ---- lookups -------------------------------------------------------------------------
    def count(self, ids: Any) -> int:
        """c(g): occurrences of the n-gram ``ids`` (0 when absent or pruned)."""
        return self._t.count(_token_ids(ids))

    def pmi(self, ids: Any) -> float:
        """PMI(g) = ln p(g) - sum_k ln p(w_k) for len(g) >= 2; NaN when g is absent or pruned."""
        v = self._t.pmi(_token_ids(ids))
        return math.nan if v is None else v

    def unigram_counts(self) -> np.ndarray:
        return self._t.unigram_counts()

    def ami(self, token_ids: Any, window: int = WINDOW) -> np.ndarray:
        """AMI of each token of one passage (float32, same length)."""
        ids = _id_array(token_ids)
        return self._t.ami(ids, check_int("window", window, 2, 64))

    def ami_ragged(
        self, values: np.ndarray, offsets: np.ndarray, window: int = WINDOW, threads: int = 1
    ) -> np.ndarray:
        """AMI of every token of a ragged corpus (values, int64 offsets), in parallel."""
        return self._t.ami_ragged(
            np.ascontiguousarray(values, dtype=np.uint32),
            np.ascontiguousarray(offsets, dtype=np.int64),
            check_int("window", window, 2, 64),
            check_int("threads", threads, 1),
        )

    def top_pmi(self, n: int, k: int = 10, min_count: int = 1) -> list[tuple[list[int], int, float]]:
        """The ``k`` n-grams of order ``n`` with the highest PMI among those seen >= ``min_count``
        times (``k = 0``: none)."""
        return self._t.top_pmi(
            check_int("n (order)", n, 2, self.max_n),
            check_int("k (--top)", k, 0),
            check_int("min_count (--top-min-count)", min_count, 0),
        )
