"""Which passages get expanded: ``--limit N`` or ``--sample FRACTION``, and per-passage seeds.

``--sample f`` keeps passage ``pid`` iff ``u(seed, pid) < f``, where ``u`` is the first 8 bytes of
blake2b(``"{seed}\\x00{pid}"``) read as an integer over 2**64. The choice depends only on the seed and
the id: not on corpus order, batch size or which passages were generated before, so a resumed run
and the curriculum's pre-training stage agree on the subset; and subsets are nested (the 10% sample
is inside the 25% sample for the same seed).
"""

from __future__ import annotations

import hashlib

from dense_pt.errors import InvalidArgumentError

_SCALE = float(2**64)


def _u64(seed: int, pid: str, purpose: str) -> int:
    h = hashlib.blake2b(f"{seed}\x00{purpose}\x00{pid}".encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little")


def sample_key(seed: int, pid: str) -> float:
    """The uniform number in [0, 1) that decides whether ``pid`` is in the sample."""
    return _u64(seed, pid, "sample") / _SCALE


def in_sample(seed: int, pid: str, fraction: float) -> bool:
    return sample_key(seed, pid) < fraction


def passage_seed(seed: int, pid: str) -> int:
    """A 31-bit generation seed for one passage (servers such as vLLM take it per request)."""
    return _u64(seed, pid, "generate") & 0x7FFFFFFF


def check_selection(limit: int | None, sample: float | None) -> None:
    if limit is not None and sample is not None:
        raise InvalidArgumentError("--limit and --sample are exclusive: give one of them")
    if limit is not None and limit < 0:
        raise InvalidArgumentError(f"--limit must be >= 0, got {limit}")
    if sample is not None and not 0.0 < sample <= 1.0:
        raise InvalidArgumentError(f"--sample must be a fraction in (0, 1], got {sample}")
