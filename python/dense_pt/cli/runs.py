"""`dense-pt runs convert | merge`: run files between formats, and shard runs merged into one."""

from __future__ import annotations

from pathlib import Path

import typer

from dense_pt.cli import app
from dense_pt.cli.options import choices, force_option
from dense_pt.cli.output import emit, json_option
from dense_pt.config.choices import MERGE_MODES

runs_app = typer.Typer(
    help="Run files: convert between Arrow and TREC text, merge the runs of query or passage shards.",
    no_args_is_help=True,
)
app.add_typer(runs_app, name="runs")


@runs_app.command("convert")
def convert(
    run: Path = typer.Argument(..., help="A run: Arrow or TREC text (sniffed)."),
    out: Path = typer.Argument(
        ..., help="Where to write it: .arrow for Arrow, any other name for TREC text."
    ),
    tag: str | None = typer.Option(None, help="The run tag to write (default: the run's own)."),
    force: bool = force_option(),
    as_json: bool = json_option(),
) -> None:
    """Copy a run into another format (e.g. the TREC text trec_eval reads), rows and scores unchanged."""
    from dense_pt import logs
    from dense_pt.artifacts import check_output_file
    from dense_pt.runs import convert_run

    check_output_file(out, force)
    info = convert_run(run, out, tag)
    emit({"out": out, **info}, as_json,
         lambda: logs.status(f"wrote {out}: {info['queries']:,} queries, {info['rows']:,} rows ({info['format']})"))  # fmt: skip


@runs_app.command("merge")
@choices(mode=MERGE_MODES)
def merge(
    runs: list[Path] = typer.Argument(..., help="The shard runs (Arrow or TREC text), in shard order."),
    out: Path = typer.Option(..., "--out", "-o", help="The merged run (.arrow: Arrow; else TREC text)."),
    k: int | None = typer.Option(
        None,
        "-k",
        help="Passage shards: hits kept per query (default: the smallest shard depth, to which the "
        "merge is exact; a deeper -k is refused).",
    ),
    mode: str = typer.Option(
        "auto",
        help="queries (concatenate) | passages (top-k of the union) | auto (queries when no query repeats).",
    ),
    tag: str | None = typer.Option(None, help="The run tag to write (default: the first run's)."),
    force: bool = force_option(),
    as_json: bool = json_option(),
) -> None:
    """Merge the runs of query shards (concatenated) or passage shards (per query, the top-k of the
    union by score, ties by passage id as every run is ranked): the run one machine would write."""
    from dense_pt import logs
    from dense_pt.artifacts import check_output_file
    from dense_pt.runs import merge_runs

    check_output_file(out, force)
    info = merge_runs(runs, out, k=k, mode=mode, tag=tag)
    if info.get("note"):
        logs.status(f"note: {info['note']}")
    depth = f", top {info['k']}" if info["k"] else ""
    emit({"out": out, **info}, as_json,
         lambda: logs.status(f"wrote {out}: {info['queries']:,} queries, {info['rows']:,} rows ({info['mode']} shards{depth})"))  # fmt: skip
