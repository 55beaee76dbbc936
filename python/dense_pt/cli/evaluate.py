"""`dense-pt evaluate`: ranking metrics of a TREC run against qrels."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from dense_pt.cli import app


@app.command()
def evaluate(
    run: Path = typer.Argument(..., help="TREC run file (qid Q0 docid rank score tag)."),
    qrels: Path = typer.Option(..., "--qrels", help="Qrels: TREC 'qid 0 docid rel' or BEIR tsv."),
    metrics: list[str] = typer.Option(
        None,
        "--metrics",
        "-m",
        help="ir-measures names, repeatable or comma-separated: -m nDCG@10,RR@10 -m R@100.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (measures + settings)."),
    tie_break: str = typer.Option(
        "docno", help="Order of equal scores: 'docno' (trec_eval) or 'score-only' (run-file order)."
    ),
    rel_level: int = typer.Option(
        1,
        help="Lowest grade counted as relevant by binary measures (RR, R@k, P@k, AP), as trec_eval -l. "
        "TREC DL (graded 0-3): 2. nDCG uses the grades as they are.",
    ),
    drop_self_hits: bool = typer.Option(
        False, "--drop-self-hits", help="Drop hits whose docid equals the query id (BEIR's habit)."
    ),
    answers: Path | None = typer.Option(
        None, help="JSONL {_id, answers}: also report answer-string recall@k (needs --corpus)."
    ),
    corpus: Path | None = typer.Option(None, help="BEIR corpus.jsonl with the passage texts."),
    baseline: Path | None = typer.Option(
        None,
        help="A second run to compare with, per judged query: the difference of each measure, its paired "
        "bootstrap interval and the paired randomization test's p-value.",
    ),
    resamples: int = typer.Option(10_000, min=1, help="Resamples of the bootstrap and randomization test."),
) -> None:
    """Compute MRR@10, nDCG@10, R@k ... (ir-measures) and optionally answer recall@k."""
    from dense_pt.data import corpus_texts, load_qrels, load_run
    from dense_pt.errors import InvalidArgumentError
    from dense_pt.evaluation import (
        DEFAULT_MEASURES,
        answer_recall,
        evaluate_run,
        read_answers,
    )

    r = load_run(run)
    result = evaluate_run(
        r,
        load_qrels(qrels),
        measures=metrics or list(DEFAULT_MEASURES),
        tie_break=tie_break,
        drop_self_hits=drop_self_hits,
        rel_level=rel_level,
    )
    if answers is not None:
        if corpus is None:
            raise InvalidArgumentError("--answers needs --corpus for the passage texts")
        result.measures.update(answer_recall(r, dict(corpus_texts(corpus)), read_answers(answers)))
    comparison = None
    if baseline is not None:
        from dense_pt.evaluation.significance import compare_runs

        comparison = compare_runs(
            r,
            load_run(baseline),
            load_qrels(qrels),
            metrics or list(DEFAULT_MEASURES),
            resamples=resamples,
            tie_break=tie_break,
            drop_self_hits=drop_self_hits,
            rel_level=rel_level,
        )
    if as_json:
        out = result.to_json()
        if comparison is not None:
            out["comparison"] = {name: c.to_json() for name, c in comparison.items()}
        typer.echo(json.dumps(out, sort_keys=False))
    else:
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
