"""The coarse-then-fine curriculum of the LLM expansion paper (section "Curriculum Learning"): which
context source each pre-training step uses. Sources: ``passage`` (the passage itself, the coarse
context of query generation), ``spans`` (random spans, contrastive pre-training's) and
``queries`` (the LLM queries).

``--curriculum "spans:0.75,queries:0.25"`` splits ``max_steps`` into consecutive stages, one per
``source:fraction`` item, in order. Stage ``k`` covers steps ``[round(F_{k-1} * N), round(F_k * N))``
where ``F_k`` is the cumulative fraction and ``N`` the number of optimizer steps, so with N = 1000
the switch to queries happens at step 750 exactly. Fractions must be positive and sum to 1
(within 1e-6).

Learning rate (the paper's default): the first stage follows warm-up (a fraction of the first
stage) + cosine decay over its own steps; later stages use a constant rate (the peak rate) from
their first step. ``--stage-schedules cosine,constant`` overrides this per stage, and
``--stage-warmup`` gives each later stage a linear warm-up from 0 to the peak (steps, or a fraction
of that stage) before its own schedule.

In a ``queries`` stage only passages that have at least one LLM query take part
(:func:`rows_with_queries`), and the context of a passage is one of its queries chosen
deterministically from (seed, passage id, epoch) (:func:`pick_query`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from dense_pt.config.defaults.objectives import CURRICULUM_SCHEDULES
from dense_pt.errors import InvalidArgumentError

T = TypeVar("T")
SOURCES = ("passage", "spans", "queries")
SCHEDULES = ("cosine", "constant", "linear")


@dataclass(frozen=True)
class CurriculumStage:
    source: str
    start: int  # first step (inclusive)
    end: int  # last step (exclusive)
    schedule: str

    @property
    def steps(self) -> int:
        return self.end - self.start


def parse_curriculum(spec: str) -> list[tuple[str, float]]:
    """``"spans:0.75,queries:0.25"`` -> ``[("spans", 0.75), ("queries", 0.25)]`` (validated)."""
    items: list[tuple[str, float]] = []
    for part in spec.split(","):
        name, sep, frac = part.strip().partition(":")
        if not sep:
            raise InvalidArgumentError(f"--curriculum item {part.strip()!r} is not SOURCE:FRACTION")
        if name not in SOURCES:
            raise InvalidArgumentError(f"--curriculum source {name!r} is not one of {', '.join(SOURCES)}")
        try:
            f = float(frac)
        except ValueError:
            raise InvalidArgumentError(
                f"--curriculum fraction {frac!r} of {name!r} is not a number"
            ) from None
        if not (f > 0 and math.isfinite(f)):
            raise InvalidArgumentError(f"--curriculum fraction of {name!r} must be > 0, got {frac}")
        items.append((name, f))
    total = sum(f for _, f in items)
    if abs(total - 1.0) > 1e-6:
        raise InvalidArgumentError(f"--curriculum fractions must sum to 1, got {total:g}")
    return items


def plan_stages(spec: str, max_steps: int, schedules: Sequence[str] | None = None) -> list[CurriculumStage]:
    items = parse_curriculum(spec)
    if max_steps < len(items):
        raise InvalidArgumentError(f"--max-steps {max_steps} cannot hold {len(items)} curriculum stages")
    if schedules is None:  # the paper's: cosine, then constant
        first, rest = CURRICULUM_SCHEDULES.value
        schedules = [first] + [rest] * (len(items) - 1)
    if len(schedules) != len(items) or any(s not in SCHEDULES for s in schedules):
        raise InvalidArgumentError(
            f"stage schedules must be {len(items)} of {', '.join(SCHEDULES)}, got {list(schedules)}"
        )
    stages, cum, start = [], 0.0, 0
    for i, ((source, f), sched) in enumerate(zip(items, schedules, strict=True)):
        cum += f
        end = max_steps if i == len(items) - 1 else round(cum * max_steps)
        if end <= start:
            raise InvalidArgumentError(f"curriculum stage {source}:{f:g} gets no step of {max_steps}")
        stages.append(CurriculumStage(source, start, end, sched))
        start = end
    return stages


def stage_at(stages: Sequence[CurriculumStage], step: int) -> CurriculumStage:
    for s in stages:
        if s.start <= step < s.end:
            return s
    raise InvalidArgumentError(f"step {step} lies outside the curriculum (0..{stages[-1].end - 1})")


def stage_warmup_steps(stage: CurriculumStage, stage_warmup: float) -> int:
    """Warm-up steps of a later stage: ``stage_warmup`` steps when >= 1, else that fraction of it."""
    return int(stage_warmup) if stage_warmup >= 1 else round(stage_warmup * stage.steps)


def curriculum_lr_factor(
    stages: Sequence[CurriculumStage], step: int, warmup_steps: int = 0, stage_warmup: float = 0
) -> float:
    """Multiplier of the peak learning rate at ``step``: ``warmup_steps`` of warm-up in the first
    stage, ``stage_warmup`` (steps, or a fraction of the stage) in each later one, then the stage's
    schedule over the rest of it."""
    s = stage_at(stages, step)
    t = step - s.start
    w = warmup_steps if s is stages[0] else stage_warmup_steps(s, stage_warmup)
    if t < w:
        return (t + 1) / w
    if s.schedule == "constant":
        return 1.0
    progress = (t - w) / max(1, s.steps - w)
    if s.schedule == "linear":
        return max(0.0, 1.0 - progress)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def rows_with_queries(ids: Sequence[str], queries: Mapping[str, Sequence[str]]) -> list[int]:
    """Indices of the passages that have at least one query (the second stage's rows)."""
    return [i for i, pid in enumerate(ids) if queries.get(pid)]


def pick_query(queries: Sequence[T], seed: int, pid: str, epoch: int) -> T:
    """One of a passage's queries, chosen from (seed, passage id, epoch) only."""
    if not queries:
        raise InvalidArgumentError(f"passage {pid!r} has no query")
    h = hashlib.blake2b(f"{seed}\x00query\x00{epoch}\x00{pid}".encode(), digest_size=8).digest()
    return queries[int.from_bytes(h, "little") % len(queries)]


lr_factor = curriculum_lr_factor  # the old name (the engine's schedule is training.lr_factor)
