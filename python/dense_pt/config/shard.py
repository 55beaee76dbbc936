"""``"I/N"``: one slice of N of a job's input (``pmi build --shard``, ``bm25 --query-shard``), parsed
in one place for the settings models that hold it and the jobs that use it."""

from __future__ import annotations

from dense_pt.errors import InvalidArgumentError


def parse_shard(shard: str | tuple[int, int] | None, name: str = "shard") -> tuple[int, int]:
    """``"I/N"`` (0-based I) or ``(I, N)`` -> ``(I, N)``; None -> ``(0, 1)``. ``name``: what the
    errors call it (``"query shard"``: ``--query-shard``)."""
    if shard is None:
        return 0, 1
    if isinstance(shard, str):
        parts = shard.split("/")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            option = "--" + name.replace(" ", "-")
            raise InvalidArgumentError(f"{option} must look like I/N (e.g. 0/8), got {shard!r}")
        shard = (int(parts[0]), int(parts[1]))
    i, n = shard
    if n < 1 or not 0 <= i < n:
        raise InvalidArgumentError(f"{name} {i}/{n} is not valid: need 0 <= I < N")
    return i, n


def shard_field(value: str | None, name: str = "shard") -> str | None:
    """A settings model's check of its shard field: pydantic's ``ValueError`` for a bad one."""
    if value is not None:
        try:
            parse_shard(value, name)
        except InvalidArgumentError as exc:
            raise ValueError(str(exc)) from None
    return value
