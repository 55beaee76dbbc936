"""Evaluation: ranking metrics via ir-measures and answer-string recall. Runs, qrels and queries are
read and written by ``dense_pt.data`` (``load_run``, ``load_qrels``, ``load_queries``, ``write_run``)."""

from dense_pt.evaluation.answers import answer_recall, has_answer, read_answers
from dense_pt.evaluation.metrics import (
    DEFAULT_MEASURES,
    DEFAULT_REL_LEVEL,
    Evaluation,
    evaluate_run,
    split_measures,
)

__all__ = [
    "DEFAULT_MEASURES",
    "DEFAULT_REL_LEVEL",
    "Evaluation",
    "answer_recall",
    "evaluate_run",
    "has_answer",
    "read_answers",
    "split_measures",
]
