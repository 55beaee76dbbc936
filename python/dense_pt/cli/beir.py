"""`dense-pt beir`: a model on BEIR folders in one command (corpus build, encode, search, evaluate;
BM25 and the hybrid when asked), one table for all of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from dense_pt.cli import app
from dense_pt.cli.options import (
    FORCE_DIR_HELP,
    config_option,
    force_option,
    load_settings,
    model_options,
    set_option,
    split,
    with_model_options,
)
from dense_pt.cli.output import emit, json_option
from dense_pt.config.beir import BeirSettings


def beir(
    model: Path = typer.Argument(..., help="Local model folder (a dense-pt retriever, or any HF encoder)."),
    datasets: list[Path] = typer.Argument(
        ..., help="BEIR folders (corpus.jsonl, queries.jsonl, qrels/<split>.tsv): one table for all."
    ),
    runs: Path | None = typer.Option(
        None, "--runs", help="Keep each dataset's runs, store and embeddings in RUNS/<dataset>/ (resumable)."
    ),
    force: bool = force_option(FORCE_DIR_HELP),
    as_json: bool = json_option(),
    config: Path | None = config_option(),
    set_: list[str] = set_option(),
    **values: Any,
) -> None:
    """Evaluate a model on BEIR folders: encode, search, nDCG@10 / RR@10 / R@100 / R@1000."""
    from dense_pt.beir import evaluate_beir

    s = load_settings(BeirSettings, config, set_, split(values, BEIR), "dense-pt beir")
    result = evaluate_beir(model, datasets, s, runs, force=force)
    emit(result.to_json(), as_json, lambda: print_table(result))


def print_table(result: Any) -> None:
    """One row per dataset and system, one column per measure; then how each dataset was encoded."""
    names = list(result.settings["measures"])
    width = max([len("dataset"), *(len(r.dataset) for r in result.rows)])
    typer.echo(f"{'dataset':<{width}}  {'system':<6}  {'queries':>7}  " + "  ".join(f"{n:>8}" for n in names))
    for r in result.rows:
        values = "  ".join(f"{r.measures[n]:>8.4f}" for n in names)
        typer.echo(f"{r.dataset:<{width}}  {r.system:<6}  {r.queries:>7}  {values}")
    for name, d in result.datasets.items():
        typer.echo(f"# {name}: split {d['split']}, lengths {d['query_max_length']} / {d['passage_max_length']}, "
                   f"{d['pooling']} pooling{', normalised' if d['normalize'] else ''}")  # fmt: skip


BEIR = [("top", BeirSettings)]
app.command()(
    with_model_options(beir, model_options(BEIR, flags={"k": ["-k"], "measures": ["--metrics", "-m"]}))
)
