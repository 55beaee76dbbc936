"""Evaluation: ranking metrics via ir-measures, answer-string recall, TREC run/qrels I/O."""

from dense_pt.evaluation.answers import answer_recall, has_answer, read_answers
from dense_pt.evaluation.metrics import DEFAULT_MEASURES, Evaluation, evaluate_run
from dense_pt.evaluation.trec import read_qrels, read_queries, read_run, write_run

__all__ = [
    "DEFAULT_MEASURES",
    "Evaluation",
    "answer_recall",
    "evaluate_run",
    "has_answer",
    "read_answers",
    "read_qrels",
    "read_queries",
    "read_run",
    "write_run",
]
