"""The spans-then-queries curriculum: stage boundaries, the switch point, schedules, query rows."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dense_pt.errors import InvalidArgumentError
from dense_pt.expansion.curriculum import (
    curriculum_lr_factor,
    parse_curriculum,
    pick_query,
    plan_stages,
    rows_with_queries,
    stage_at,
)


def test_switch_point_at_75_percent():
    stages = plan_stages("spans:0.75,queries:0.25", 1000)
    assert [(s.source, s.start, s.end, s.schedule) for s in stages] == [
        ("spans", 0, 750, "cosine"),
        ("queries", 750, 1000, "constant"),
    ]
    assert stage_at(stages, 749).source == "spans" and stage_at(stages, 750).source == "queries"
    assert stage_at(stages, 999).source == "queries"
    with pytest.raises(InvalidArgumentError):
        stage_at(stages, 1000)


@given(st.integers(2, 10_000), st.integers(1, 99))
def test_stages_tile_the_steps(max_steps, pct):
    f = pct / 100
    stages = (
        plan_stages(f"spans:{f},queries:{1 - f}", max_steps)
        if round(f * max_steps) not in (0, max_steps)
        else None
    )
    if stages is None:
        with pytest.raises(InvalidArgumentError):
            plan_stages(f"spans:{f},queries:{1 - f}", max_steps)
        return
    assert stages[0].start == 0 and stages[-1].end == max_steps and stages[0].end == stages[1].start
    assert stages[0].end == round(f * max_steps)
    switches = sum(stage_at(stages, t).source != stage_at(stages, t - 1).source for t in range(1, max_steps))
    assert switches == 1


def test_schedules_cosine_then_constant():
    stages = plan_stages("spans:0.75,queries:0.25", 100)
    assert curriculum_lr_factor(stages, 0, warmup_steps=10) == pytest.approx(0.1)
    assert curriculum_lr_factor(stages, 9, warmup_steps=10) == pytest.approx(1.0)
    assert curriculum_lr_factor(stages, 10, warmup_steps=10) == pytest.approx(1.0)
    f = [curriculum_lr_factor(stages, t, warmup_steps=10) for t in range(10, 75)]
    assert all(a >= b for a, b in itertools.pairwise(f)) and f[-1] < 0.01
    assert all(curriculum_lr_factor(stages, t, warmup_steps=10) == 1.0 for t in range(75, 100))
    lin = plan_stages("spans:0.5,queries:0.5", 10, schedules=["linear", "linear"])
    assert curriculum_lr_factor(lin, 5) == 1.0 and curriculum_lr_factor(lin, 9) == pytest.approx(1 - 4 / 5)


@pytest.mark.parametrize(
    "spec", ["spans:0.7,queries:0.2", "spans", "words:1.0", "spans:x", "spans:-1,queries:2", ""]
)
def test_bad_specs(spec):
    with pytest.raises(InvalidArgumentError):
        parse_curriculum(spec)


def test_only_passages_with_queries_in_the_query_stage():
    ids = ["a", "b", "c", "d"]
    assert rows_with_queries(ids, {"a": ["q"], "b": [], "d": ["x", "y"]}) == [0, 3]
    qs = ["q1", "q2", "q3"]
    picks = {pick_query(qs, 0, "d", e) for e in range(40)}
    assert picks == set(qs)
    assert pick_query(qs, 0, "d", 3) == pick_query(qs, 0, "d", 3)
    with pytest.raises(InvalidArgumentError):
        pick_query([], 0, "b", 0)
