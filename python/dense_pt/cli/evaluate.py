"""`dense-pt evaluate`: ranking metrics of a TREC run against qrels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from dense_pt.cli import app
from dense_pt.cli.options import (
    config_option,
    load_settings,
    model_options,
    set_option,
    split,
    with_model_options,
)
from dense_pt.cli.output import emit, json_option
from dense_pt.config.evaluation import EvalSettings


def evaluate(
    run: Path = typer.Argument(..., help="Run file: Arrow, or TREC text (qid Q0 docid rank score tag)."),
    qrels: Path = typer.Option(..., "--qrels", help="Qrels: TREC 'qid 0 docid rel' or BEIR tsv."),
    as_json: bool = json_option(),
    answers: Path | None = typer.Option(
        None, help="JSONL {_id, answers}: also report answer-string recall@k (needs --corpus)."
    ),
    corpus: Path | None = typer.Option(None, help="BEIR corpus.jsonl with the passage texts."),
    baseline: Path | None = typer.Option(
        None,
        help="A second run to compare with, per judged query: the difference of each measure, its paired "
        "bootstrap interval and the paired randomization test's p-value.",
    ),
    config: Path | None = config_option(),
    set_: list[str] = set_option(),
    **values: Any,
) -> None:
    """Compute MRR@10, nDCG@10, R@k ... (ir-measures) and optionally answer recall@k."""
    from dense_pt.data import load_qrels
    from dense_pt.errors import InvalidArgumentError
    from dense_pt.evaluation import evaluate_run, read_answers
    from dense_pt.evaluation.answers import answer_recall_files

    s = load_settings(EvalSettings, config, set_, split(values, EVAL), "dense-pt evaluate")
    conventions = s.model_dump(include={"tie_break", "drop_self_hits", "rel_level"})
    if answers is not None and corpus is None:
        raise InvalidArgumentError("--answers needs --corpus for the passage texts")
    # the run is streamed a chunk of queries at a time; answer recall keeps only the texts it reads
    result = evaluate_run(run, load_qrels(qrels), measures=s.measures, **conventions)
    if answers is not None and corpus is not None:
        result.measures.update(answer_recall_files(run, corpus, read_answers(answers)))
    comparison = None
    if baseline is not None:
        from dense_pt.evaluation.significance import compare_runs

        comparison = compare_runs(
            run, baseline, load_qrels(qrels), s.measures, resamples=s.resamples, **conventions
        )
    _print_result(result, comparison, as_json)


EVAL = [("top", EvalSettings)]
app.command()(with_model_options(evaluate, model_options(EVAL, flags={"measures": ["--metrics", "-m"]})))


def _print_result(result: Any, comparison: dict[str, Any] | None, as_json: bool) -> None:
    """The measures (and the comparison with a baseline) on stdout: one JSON object (the measures,
    the settings and the comparison), or a table."""
    out = result.to_json()
    if comparison is not None:
        out["comparison"] = {name: c.to_json() for name, c in comparison.items()}
    emit(out, as_json, lambda: _print_table(result, comparison))


def _print_table(result: Any, comparison: dict[str, Any] | None) -> None:
    for name, value in result.measures.items():
        c = comparison.get(name) if comparison else None
        vs = f"   vs baseline {c.baseline_mean:.4f}: {c.describe()}" if c else ""
        typer.echo(f"{name:<18} {value:.4f}{vs}")
    if comparison:
        typer.echo(f"# comparison: {next(iter(comparison.values())).test}; bootstrap over queries")
    for key, value in result.settings.items():
        typer.echo(f"# {key}: {value}")
    missing = result.settings["judged_queries_without_results"]
    if missing:
        typer.echo(f"# note: {missing} judged queries have no results in the run; each counts as zero")
