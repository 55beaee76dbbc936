"""Paired significance tests against independent references: exact enumeration written out here,
scipy.stats.permutation_test and scipy.stats.bootstrap, on inputs that reach the edges (ties with
the observed mean, all-zero differences, the exact/Monte Carlo switch)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from scipy import stats

from dense_pt.errors import InvalidArgumentError
from dense_pt.evaluation.significance import (
    compare_per_query,
    compare_runs,
    paired_bootstrap_ci,
    randomization_p_value,
)


def exact_reference(d: list[float]) -> float:
    """Two-sided sign-flip p-value by brute force, in plain Python."""
    n = len(d)
    obs = abs(sum(d) / n)
    hits = 0
    for signs in itertools.product((1, -1), repeat=n):
        if abs(sum(s * x for s, x in zip(signs, d, strict=True)) / n) >= obs - 1e-12:
            hits += 1
    return hits / 2**n


@pytest.mark.parametrize(
    "d",
    [
        [0.1, 0.2, -0.05, 0.3, 0.0, 0.15, 0.05, -0.1],
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],  # every assignment but one is less extreme
        [0.5, -0.5, 0.25, -0.25],  # observed mean 0: every assignment ties, p = 1
        [1 / 3, 1 / 3, -1 / 3, 1 / 3, 0.1 + 0.2, -0.3],  # ties lost to float rounding without a tolerance
    ],
)
def test_exact_randomization_equals_brute_force(d):
    p, how = randomization_p_value(d)
    assert "exact" in how
    assert p == pytest.approx(exact_reference(d), abs=1e-12)


def test_monte_carlo_agrees_with_exact_and_with_scipy():
    rng = np.random.default_rng(3)
    d = rng.normal(0.05, 0.2, size=14)
    exact, _ = randomization_p_value(d)
    mc, how = randomization_p_value(d, resamples=40_000, exact_max=0)
    assert "random" in how
    assert mc == pytest.approx(exact, abs=0.01)
    # A larger sample (past the exact limit): scipy's paired permutation test as the reference.
    d = rng.normal(0.03, 0.25, size=81)
    ours, _ = randomization_p_value(d, resamples=40_000)
    ref = stats.permutation_test(
        (d,), np.mean, permutation_type="samples", n_resamples=40_000, alternative="two-sided", random_state=1
    ).pvalue
    assert ours == pytest.approx(ref, abs=0.015)


def test_monte_carlo_never_reports_zero():
    p, _ = randomization_p_value([1.0] * 40, resamples=1000)
    assert p == pytest.approx(1 / 1001)


def test_bootstrap_interval_agrees_with_scipy():
    rng = np.random.default_rng(5)
    d = rng.normal(0.02, 0.3, size=81)
    low, high = paired_bootstrap_ci(d, 0.95, resamples=20_000)
    ref = stats.bootstrap((d,), np.mean, confidence_level=0.95, method="percentile", n_resamples=20_000,
                          random_state=2).confidence_interval  # fmt: skip
    assert low == pytest.approx(ref.low, abs=0.01)
    assert high == pytest.approx(ref.high, abs=0.01)
    assert low < d.mean() < high


def test_identical_runs_compare_as_no_difference():
    a = {f"q{i}": v for i, v in enumerate([0.1, 0.5, 0.9, 0.0, 1.0] * 5)}
    c = compare_per_query(a, dict(a))
    assert (c.delta, c.ci_low, c.ci_high, c.p_value) == (0.0, 0.0, 0.0, 1.0)
    assert c.n == 25 and c.mean == c.baseline_mean


def test_mismatched_queries_and_bad_settings_are_refused():
    with pytest.raises(InvalidArgumentError, match="different queries"):
        compare_per_query({"a": 1.0, "b": 0.0}, {"a": 1.0, "c": 0.0})
    with pytest.raises(InvalidArgumentError, match="confidence"):
        paired_bootstrap_ci([0.1, 0.2], confidence=1.5)
    with pytest.raises(InvalidArgumentError, match="no queries"):
        randomization_p_value([])


def test_compare_runs_counts_missing_queries_as_zero_on_either_side():
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(20)}
    # The system finds each relevant passage at rank 1; the baseline at rank 2, and misses q0.
    system = {q: {f"d{i}": 2.0, "x": 1.0} for i, q in enumerate(qrels)}
    baseline = {q: {"x": 2.0, f"d{i}": 1.0} for i, q in enumerate(qrels) if i}
    c = compare_runs(system, baseline, qrels, ["RR@10"])["RR@10"]
    assert c.n == 20
    assert c.mean == 1.0 and c.baseline_mean == pytest.approx(19 * 0.5 / 20)
    assert c.p_value == pytest.approx(1 / 10_001)  # every difference positive: no flip is as extreme
    assert c.ci_low > 0


def test_evaluate_cli_with_a_baseline(tmp_path):
    from typer.testing import CliRunner

    from dense_pt.cli import app
    from dense_pt.runs import write_run

    qrels = {f"q{i}": {f"d{i}": 1} for i in range(12)}
    system = {q: {f"d{i}": 2.0, "x": 1.0} for i, q in enumerate(qrels)}
    baseline = {q: {"x": 2.0, f"d{i}": 1.0} for i, q in enumerate(qrels)}
    (tmp_path / "q.qrels").write_text("".join(f"{q} 0 {d} 1\n" for q, h in qrels.items() for d in h))
    write_run(tmp_path / "a.trec", system)
    write_run(tmp_path / "b.trec", baseline)
    args = ["evaluate", str(tmp_path / "a.trec"), "--qrels", str(tmp_path / "q.qrels"), "-m", "RR@10"]
    res = CliRunner().invoke(app, [*args, "--baseline", str(tmp_path / "b.trec"), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)["comparison"]["RR@10"]
    assert out["delta"] == 0.5 and out["p_value"] == pytest.approx(1 / 2**11)  # exact: 2 of 4096
    assert "exact" in out["test"]
    res = CliRunner().invoke(app, [*args, "--baseline", str(tmp_path / "b.trec")])
    assert res.exit_code == 0 and "vs baseline" in res.stdout and "+0.5000" in res.stdout
