"""Native maskers for masked-language-model pre-training: numpy in, numpy out, no torch needed.

Every function takes padded ``[B, L]`` batches. A row's *maskable* positions are its attended
(``attention_mask != 0``), non-special positions (``special_tokens_mask == 0`` and id not in
``special_ids``); ``n`` is their count and a row masks ``k = floor(n * p)`` tokens.

Whole-word masking: pass ``word_ids`` ``[B, L]`` (any integer dtype; e.g. the tokenizer's
``word_ids()`` with ``None`` as -1). A word is a run of adjacent maskable positions sharing one
non-negative word id (a negative id is a word of its own). Words are visited in selection order
(uniformly random, or by decreasing noisy importance) and taken whenever they still fit in ``k``
tokens; the visit stops at exactly ``k``. So a row never masks more than ``k`` tokens, masks
exactly ``k`` whenever the leftover words include a single-token word, and without ``word_ids``
always exactly ``k``.

Determinism: row ``r`` draws from a counter-based stream keyed by ``(seed, row_keys[r])``
(``row_keys`` defaults to ``arange(B)``), so its output depends only on the seed, its key and its
own inputs: not on the batch around it, ``num_threads`` or the platform. ``num_threads > 1`` runs
rows on a thread pool in the importing process and serially in forked DataLoader workers.

Bad input raises :class:`dense_pt.errors.InvalidArgumentError` (a ``ValueError``) naming the
argument: shapes that disagree, probabilities outside [0, 1], NaN importance, ids outside the
vocabulary, an empty batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from dense_pt import _native
from dense_pt.config.defaults.objectives import BERT_FILL, IMPORTANCE_NOISE
from dense_pt.errors import InvalidArgumentError

IGNORE_INDEX = -100
# The maskers' defaults are the papers' (config/defaults): CDMAE's noise, BERT's 80/10/10.
SIGMA: float = IMPORTANCE_NOISE["sigma"].value
MASK_PROB: float = BERT_FILL["mask_prob"].value
RANDOM_PROB: float = BERT_FILL["random_prob"].value
"""Label of positions that are not predicted (PyTorch's ``ignore_index``)."""

__all__ = [
    "IGNORE_INDEX",
    "importance_mask",
    "nested_masks",
    "random_mask",
    "replace",
    "span_crop",
]

# dtypes the native code reads in place; anything else integer-like is widened to int64 once.
_DIRECT_INT = frozenset(np.dtype(t) for t in (np.bool_, np.uint8, np.int32, np.uint32, np.int64))
_DIRECT_FLOAT = frozenset(np.dtype(t) for t in (np.float32, np.float64))

Seed: TypeAlias = int | np.integer
"""A seed in [0, 2**64): a Python or numpy integer."""


def _ids2d(name: str, a: npt.ArrayLike) -> np.ndarray:
    if type(a) is not np.ndarray:
        a = np.asarray(a)
    if a.ndim != 2:
        raise InvalidArgumentError(f"{name} must be a 2-d [batch, length] array, got shape {a.shape}")
    if a.shape[0] == 0:
        raise InvalidArgumentError(f"empty batch: {name} has no rows")
    return a


def _ints(name: str, a: npt.ArrayLike, shape: tuple[int, ...]) -> np.ndarray:
    """A C-contiguous integer/bool array of the given shape the native code reads in place (a
    widened copy of any other integer dtype)."""
    if type(a) is not np.ndarray:
        a = np.asarray(a)
    if a.shape != shape:
        raise InvalidArgumentError(f"{name} has shape {a.shape} but input_ids has shape {shape}")
    if a.dtype not in _DIRECT_INT:
        if a.dtype.kind not in "biu":
            raise InvalidArgumentError(f"{name} must hold integers or bools, got dtype {a.dtype}")
        if a.dtype.kind == "u" and a.size and a.max() > np.iinfo(np.int64).max:
            raise InvalidArgumentError(f"{name} holds values above the int64 range")
        a = a.astype(np.int64)
    return np.ascontiguousarray(a)


def _floats(name: str, a: npt.ArrayLike, shape: tuple[int, ...]) -> np.ndarray:
    if type(a) is not np.ndarray:
        a = np.asarray(a)
    if a.shape != shape:
        raise InvalidArgumentError(f"{name} has shape {a.shape} but input_ids has shape {shape}")
    if a.dtype in _DIRECT_FLOAT:
        return np.ascontiguousarray(a)
    if a.dtype == np.float16:
        return np.ascontiguousarray(a).view(np.uint16)
    if a.dtype.kind not in "biuf":
        raise InvalidArgumentError(f"{name} must hold real numbers, got dtype {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.float64)


def _seed(seed: object) -> int:
    if type(seed) is int and 0 <= seed < 2**64:
        return seed
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= int(seed) < 2**64:
        raise InvalidArgumentError(f"seed must be an integer in [0, 2**64), got {seed!r}")
    return int(seed)


def _row_keys(row_keys: npt.ArrayLike, batch: int) -> np.ndarray:
    k = np.asarray(row_keys)
    if k.shape != (batch,):
        raise InvalidArgumentError(f"row_keys must have shape ({batch},), got {k.shape}")
    if k.dtype.kind not in "iu" or (k.size and k.dtype.kind == "i" and k.min() < 0):
        raise InvalidArgumentError("row_keys must hold non-negative integers")
    return np.ascontiguousarray(k, dtype=np.uint64)


def _special_ids(special_ids: Sequence[int]) -> list[int]:
    try:
        return [int(s) for s in special_ids]
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"special_ids must be a sequence of ints: {exc}") from None


def _coerce(kind: str, name: str, value: object, shape: tuple[int, int] | None) -> object:
    """The one place arguments are converted and refused. The native maskers read what they can
    in place (2-d C-contiguous arrays of the dtypes in ``_DIRECT_INT`` / ``_DIRECT_FLOAT``, a
    Python int seed, an empty special_ids, uint64 row keys) and call this for anything else, once
    per argument: it returns what they can read or raises the error naming ``name``."""
    if kind == "ids":
        return _ids2d(name, value)  # type: ignore[arg-type]
    if kind == "int":
        return _ints(name, value, shape)  # type: ignore[arg-type]
    if kind == "float":
        return _floats(name, value, shape)  # type: ignore[arg-type]
    if kind == "seed":
        return _seed(value)
    if kind == "special_ids":
        return _special_ids(value)  # type: ignore[arg-type]
    if kind == "row_keys":
        return _row_keys(value, shape[0])  # type: ignore[arg-type, index]
    raise AssertionError(f"unknown argument kind {kind!r}")


def random_mask(
    input_ids: npt.ArrayLike,
    attention_mask: npt.ArrayLike,
    p: float,
    seed: Seed,
    special_tokens_mask: npt.ArrayLike | None = None,
    *,
    word_ids: npt.ArrayLike | None = None,
    special_ids: Sequence[int] = (),
    row_keys: npt.ArrayLike | None = None,
    num_threads: int = 1,
) -> np.ndarray:
    """Mask exactly ``floor(n * p)`` maskable positions per row, uniformly without replacement.

    Returns a bool ``[B, L]`` array. With ``word_ids``: whole words (see the module docstring).
    """
    return _native.mask_random(
        input_ids, attention_mask, p, seed, special_tokens_mask, word_ids, special_ids, row_keys, num_threads
    )


def importance_mask(
    input_ids: npt.ArrayLike,
    attention_mask: npt.ArrayLike,
    importance: npt.ArrayLike,
    p: float,
    seed: Seed,
    sigma: float = SIGMA,
    special_tokens_mask: npt.ArrayLike | None = None,
    *,
    word_ids: npt.ArrayLike | None = None,
    special_ids: Sequence[int] = (),
    row_keys: npt.ArrayLike | None = None,
    num_threads: int = 1,
) -> np.ndarray:
    """CDMAE's Algorithm 1: add N(0, sigma^2) noise to each maskable position's importance and
    mask the top ``k = floor(n * p)``. ``sigma=0`` is the exact top-k; ties (equal scores) go to
    the earlier position. With ``word_ids`` a word scores the mean importance of its tokens plus
    one noise draw. ``importance`` is float16/32/64 ``[B, L]``; NaN at a maskable position is an
    error (padding may hold anything).
    """
    return _native.mask_importance(
        input_ids, attention_mask, importance, p, seed, sigma, special_tokens_mask, word_ids, special_ids,
        row_keys, num_threads,
    )  # fmt: skip


def nested_masks(
    input_ids: npt.ArrayLike,
    attention_mask: npt.ArrayLike,
    p_enc: float,
    p_dec: float,
    seed: Seed,
    importance: npt.ArrayLike | None = None,
    special_tokens_mask: npt.ArrayLike | None = None,
    *,
    sigma: float = SIGMA,
    word_ids: npt.ArrayLike | None = None,
    special_ids: Sequence[int] = (),
    row_keys: npt.ArrayLike | None = None,
    num_threads: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """SimLM's pair of masks ``(enc, dec)`` with ``enc`` a subset of ``dec``.

    ``dec`` masks ``floor(n * p_dec)`` positions: it is exactly ``random_mask(..., p_dec, seed)``,
    or ``importance_mask(..., p_dec, seed, sigma)`` when ``importance`` is given. ``enc`` is a
    uniformly random subset of ``dec`` (of its words, with ``word_ids``) with
    ``floor(n * p_enc)`` tokens. Needs ``p_enc <= p_dec``.
    """
    return _native.mask_nested(
        input_ids, attention_mask, p_enc, p_dec, seed, importance, sigma, special_tokens_mask, word_ids,
        special_ids, row_keys, num_threads,
    )  # fmt: skip


def replace(
    input_ids: npt.ArrayLike,
    mask: npt.ArrayLike,
    mask_token_id: int,
    vocab_size: int,
    seed: Seed,
    mask_prob: float = MASK_PROB,
    random_prob: float = RANDOM_PROB,
    special_ids: Sequence[int] = (),
    *,
    row_keys: npt.ArrayLike | None = None,
    num_threads: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """BERT's 80/10/10 on the masked positions: ``[MASK]`` with ``mask_prob``, a uniformly random
    id from ``[0, vocab_size)`` minus ``special_ids`` with ``random_prob``, the original otherwise.

    Returns ``(new_ids, labels)``: ``new_ids`` in the dtype of ``input_ids``; ``labels`` int64 with
    the original id where ``mask`` is set and -100 everywhere else. Every id must be in
    ``[0, vocab_size)``.
    """
    new, labels = _native.mask_replace(
        input_ids, mask, int(mask_token_id), int(vocab_size), seed, mask_prob, random_prob, special_ids,
        row_keys, num_threads,
    )  # fmt: skip
    dtype = input_ids.dtype if type(input_ids) is np.ndarray else np.asarray(input_ids).dtype
    return new.astype(dtype, copy=False), labels


def span_crop(
    lengths: npt.ArrayLike,
    min_len: int,
    max_len: int,
    seed: Seed,
    n: int = 1,
    *,
    row_keys: npt.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random spans per row for contrastive pre-training (coCondenser-style crops).

    For a row of ``length`` tokens a span's length is uniform in
    ``[min(min_len, length), min(max_len, length)]`` and its start uniform where it fits.
    Returns ``(starts, ends)``, int64 ``[B, n]``, half-open ``[start, end)``.
    """
    lens = np.asarray(lengths)
    if lens.ndim != 1:
        raise InvalidArgumentError(f"lengths must be 1-d, got shape {lens.shape}")
    if lens.size == 0:
        raise InvalidArgumentError("empty batch: lengths is empty")
    if int(n) < 1:
        raise InvalidArgumentError(f"n must be >= 1, got {n}")
    starts, ends = _native.mask_span_crop(
        _ints("lengths", lens, lens.shape),
        int(min_len),
        int(max_len),
        _seed(seed),
        n=int(n),
        row_keys=None if row_keys is None else _row_keys(row_keys, lens.shape[0]),
    )
    return starts.reshape(-1, int(n)), ends.reshape(-1, int(n))
