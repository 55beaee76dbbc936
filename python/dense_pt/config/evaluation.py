"""Evaluation settings: ``dense-pt evaluate`` (``EvalSettings``) and the pipeline's ``[eval]``
table (``EvalTable``, ``dense_pt.config.pipeline``) share ``EvalMeasures``, so the measures, the
relevance level and the tie-break are defined and checked once; ``evaluation.evaluate_run`` and
``evaluation.significance.compare_runs`` check their keywords through the same models."""

from __future__ import annotations

from pydantic import Field, model_validator

from dense_pt.config.base import Model
from dense_pt.config.choices import DEFAULT_TIE_BREAK, TIE_BREAKS, one_of

DEFAULT_MEASURES = ("nDCG@10", "RR@10", "R@10", "R@100", "R@1000", "AP")  # dense-pt evaluate's
PIPELINE_MEASURES = ("nDCG@10", "R@100", "RR@10")  # the pipeline's report
BEIR_MEASURES = ("nDCG@10", "RR@10", "R@100", "R@1000")  # dense-pt beir's table (BEIR reports nDCG@10)
DEFAULT_REL_LEVEL = 1  # trec_eval's -l: any positive grade is relevant
DEFAULT_RESAMPLES = 10_000  # of the paired bootstrap and the randomization test


class EvalMeasures(Model):
    """What is measured and how a run is read (the measure names are ir-measures': checked when
    parsed, ``evaluation.metrics.parse_measures``)."""

    measures: list[str] = Field(
        default_factory=lambda: list(DEFAULT_MEASURES),
        description="ir-measures names, repeatable or comma-separated: -m nDCG@10,RR@10 -m R@100.",
    )
    rel_level: int = Field(
        DEFAULT_REL_LEVEL,
        ge=1,
        description="Lowest grade counted as relevant by binary measures (RR, R@k, P@k, AP), as trec_eval "
        "-l. TREC DL (graded 0-3): 2. nDCG uses the grades as they are.",
    )
    tie_break: str = Field(
        DEFAULT_TIE_BREAK,
        json_schema_extra=one_of(TIE_BREAKS),
        description="Order of equal scores: 'docno' (trec_eval) or 'score-only' (run-file order).",
    )

    @model_validator(mode="after")
    def check_tie_break(self) -> EvalMeasures:
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break must be one of {', '.join(TIE_BREAKS)}, got {self.tie_break!r}")
        return self


class EvalSettings(EvalMeasures):
    """``dense-pt evaluate`` (and ``evaluate_run`` / ``compare_runs``)."""

    drop_self_hits: bool = Field(
        False, description="Drop hits whose docid equals the query id (BEIR's habit)."
    )
    resamples: int = Field(
        DEFAULT_RESAMPLES, ge=1, description="Resamples of the bootstrap and randomization test (--baseline)."
    )
