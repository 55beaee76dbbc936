"""`dense-pt study run [--config] STUDY.toml`: every objective pre-trained with one budget, fine-tuned alike."""

from __future__ import annotations

from pathlib import Path

import typer

from dense_pt import logs
from dense_pt.cli import app
from dense_pt.cli.options import FORCE_DIR_HELP, flag, force_option
from dense_pt.cli.output import emit, json_option
from dense_pt.cli.pipeline import config_file

study_app = typer.Typer(
    help="Does pre-training pay off? Every objective, one budget, one table.", no_args_is_help=True
)
app.add_typer(study_app, name="study")


@study_app.command("run")
def run(
    config_arg: Path | None = typer.Argument(
        None, metavar="CONFIG", help="Study TOML (see examples/study-scifact.toml); or give it as --config."
    ),
    config: Path | None = typer.Option(None, "--config", help="Study TOML: the same as CONFIG."),
    set_: list[str] = typer.Option(
        [],
        "--set",
        metavar="KEY=VALUE",
        help="Override one value of the study file, dotted.key=VALUE, e.g. --set 'seeds=[1]'.",
    ),
    only: list[str] = typer.Option([], "--only", help="Run only these objectives (repeatable)."),
    quiet: bool = flag("--quiet", help="No progress bars."),
    force: bool = force_option(FORCE_DIR_HELP),
    as_json: bool = json_option(),
) -> None:
    """Pre-train each objective (and 'none'), fine-tune each result with the same pipeline over
    the seeds, and write OUT/report.md, OUT/results.json and OUT/study.png; print the report
    (with --json: the results). Resumable."""
    from dense_pt.pipeline.study import load_study, render_markdown, run_study

    study = load_study(config_file(config_arg, config, "examples/study-scifact.toml"), set_)
    results = run_study(study, progress=not quiet, log=logs.status, only=only or None, force=force)
    emit(results, as_json, lambda: typer.echo(render_markdown(results)))
