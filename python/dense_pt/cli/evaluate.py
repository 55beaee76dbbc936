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
        None, "--metrics", "-m", help="ir-measures names (repeatable), e.g. nDCG@10 RR@10 R@100."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (measures + settings)."),
    tie_break: str = typer.Option(
        "docno", help="Order of equal scores: 'docno' (trec_eval) or 'score-only' (run-file order)."
    ),
    drop_self_hits: bool = typer.Option(
        False, "--drop-self-hits", help="Drop hits whose docid equals the query id (BEIR's habit)."
    ),
    answers: Path | None = typer.Option(
        None, help="JSONL {_id, answers}: also report answer-string recall@k (needs --corpus)."
    ),
    corpus: Path | None = typer.Option(None, help="BEIR corpus.jsonl with the passage texts."),
) -> None:
    """Compute MRR@10, nDCG@10, R@k ... (ir-measures) and optionally answer recall@k."""
    from dense_pt.errors import InvalidArgumentError
    from dense_pt.evaluation import (
        DEFAULT_MEASURES,
        answer_recall,
        evaluate_run,
        read_answers,
        read_qrels,
        read_run,
    )
    from dense_pt.evaluation.trec import read_beir_corpus

    r = read_run(run)
    result = evaluate_run(
        r,
        read_qrels(qrels),
        measures=metrics or list(DEFAULT_MEASURES),
        tie_break=tie_break,
        drop_self_hits=drop_self_hits,
    )
    if answers is not None:
        if corpus is None:
            raise InvalidArgumentError("--answers needs --corpus for the passage texts")
        result.measures.update(answer_recall(r, dict(read_beir_corpus(corpus)), read_answers(answers)))
    if as_json:
        typer.echo(json.dumps(result.to_json(), sort_keys=False))
    else:
        for name, value in result.measures.items():
            typer.echo(f"{name:<18} {value:.4f}")
        for key, value in result.settings.items():
            typer.echo(f"# {key}: {value}")
