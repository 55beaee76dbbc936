"""Is a difference between two runs real? Paired tests over the per-query values of one measure.

On a dev split of 81 queries (SciFact's 10%), one nDCG@10 point is well inside the noise, so every
comparison the pipeline and ``dense-pt evaluate --baseline`` print carries:

* the **paired randomization test** (Fisher's sign-flip test; Smucker, Allan & Carterette, CIKM
  2007, recommend it for IR): under the null each query's difference is as likely to have either
  sign, so the p-value is the share of sign assignments whose mean difference is at least as far
  from zero as the observed one (two-sided). Exact enumeration of all 2^n assignments up to
  ``EXACT_MAX_QUERIES`` queries, otherwise ``resamples`` random assignments with the add-one
  estimate ``(hits + 1) / (resamples + 1)``, which never reports p = 0 from a finite sample;
* a **paired bootstrap** percentile interval of the mean difference (queries resampled with
  replacement, ``resamples`` times).

Both use a fixed seed, so the same runs give the same numbers.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dense_pt.config.evaluation import DEFAULT_RESAMPLES, EvalSettings
from dense_pt.errors import InvalidArgumentError
from dense_pt.runs import RunSource

EXACT_MAX_QUERIES = 16
DEFAULT_CONFIDENCE = 0.95

__all__ = [
    "PairedComparison",
    "compare_per_query",
    "compare_runs",
    "paired_bootstrap_ci",
    "randomization_p_value",
]


@dataclass(frozen=True)
class PairedComparison:
    """``delta`` = mean(system) - mean(baseline) over ``n`` queries, with its interval and p-value."""

    n: int
    mean: float
    baseline_mean: float
    delta: float
    ci_low: float
    ci_high: float
    confidence: float
    p_value: float
    test: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self, digits: int = 4) -> str:
        pct = round(self.confidence * 100)
        return (
            f"{self.delta:+.{digits}f} [{self.ci_low:+.{digits}f}, {self.ci_high:+.{digits}f}] "
            f"({pct}% CI), p = {self.p_value:.3g}"
        )


def randomization_p_value(diffs: Sequence[float] | np.ndarray, resamples: int = DEFAULT_RESAMPLES,
                          seed: int = 0, exact_max: int = EXACT_MAX_QUERIES) -> tuple[float, str]:  # fmt: skip
    """Two-sided p-value of the paired sign-flip test, and how it was computed."""
    d = np.asarray(diffs, dtype=np.float64)
    n = len(d)
    if n == 0:
        raise InvalidArgumentError("no queries to compare")
    observed = abs(d.mean())
    # Differences are sums of a few per-query values: a tolerance keeps ties with the observed mean
    # (which count as "at least as extreme") from being lost to float rounding.
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    if n <= exact_max:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        means = np.abs(signs @ d) / n
        return float(np.mean(means >= observed - tol)), f"randomization, exact ({2**n} sign assignments)"
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, resamples, 4096):
        m = min(4096, resamples - start)
        signs = rng.choice((1.0, -1.0), size=(m, n))
        hits += int(np.sum(np.abs(signs @ d) / n >= observed - tol))
    return (hits + 1) / (resamples + 1), f"randomization, {resamples} random sign assignments"


def paired_bootstrap_ci(diffs: Sequence[float] | np.ndarray, confidence: float = DEFAULT_CONFIDENCE,
                        resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> tuple[float, float]:  # fmt: skip
    """Percentile interval of the mean difference, queries resampled with replacement."""
    if not 0 < confidence < 1:
        raise InvalidArgumentError(f"confidence must lie in (0, 1), got {confidence}")
    d = np.asarray(diffs, dtype=np.float64)
    if len(d) == 0:
        raise InvalidArgumentError("no queries to compare")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for start in range(0, resamples, 4096):
        m = min(4096, resamples - start)
        means[start : start + m] = d[rng.integers(0, len(d), size=(m, len(d)))].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)


def compare_per_query(system: Mapping[str, float], baseline: Mapping[str, float],
                      resamples: int = DEFAULT_RESAMPLES, confidence: float = DEFAULT_CONFIDENCE,
                      seed: int = 0) -> PairedComparison:  # fmt: skip
    """Compare two runs' per-query values of one measure over the same judged queries."""
    if set(system) != set(baseline):
        only = sorted(set(system) ^ set(baseline))
        raise InvalidArgumentError(
            f"the two runs were evaluated on different queries ({len(only)} differ, e.g. {only[:3]})"
        )
    if resamples < 1:
        raise InvalidArgumentError(f"resamples must be >= 1, got {resamples}")
    qids = sorted(system)
    a = np.array([system[q] for q in qids], dtype=np.float64)
    b = np.array([baseline[q] for q in qids], dtype=np.float64)
    d = a - b
    p, test = randomization_p_value(d, resamples, seed)
    low, high = paired_bootstrap_ci(d, confidence, resamples, seed)
    return PairedComparison(
        n=len(qids),
        mean=float(a.mean()),
        baseline_mean=float(b.mean()),
        delta=float(d.mean()),
        ci_low=low,
        ci_high=high,
        confidence=confidence,
        p_value=p,
        test=test,
    )


def compare_runs(
    run: RunSource,
    baseline: RunSource,
    qrels: Mapping[str, Mapping[str, int]],
    measures: Sequence[str],
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
    **conventions: Any,
) -> dict[str, PairedComparison]:
    """Each measure of ``run`` against ``baseline`` (run files, streamed, or mappings) on every
    judged query (missing ones count as
    zero on either side, as in ``evaluate_run``, whose ``conventions`` keywords are passed on);
    ``resamples`` and the conventions are ``EvalSettings``' fields, checked there first."""
    from dense_pt.evaluation.metrics import evaluate_run

    names = [measures] if isinstance(measures, str) else list(measures)
    EvalSettings(measures=names, resamples=resamples, **conventions)

    mine = evaluate_run(run, qrels, measures, per_query=True, **conventions).per_query
    theirs = evaluate_run(baseline, qrels, measures, per_query=True, **conventions).per_query
    assert mine is not None and theirs is not None
    labels = next(iter(mine.values())).keys()
    return {
        label: compare_per_query(
            {q: v[label] for q, v in mine.items()},
            {q: v[label] for q, v in theirs.items()},
            resamples,
            confidence,
            seed,
        )
        for label in labels
    }
