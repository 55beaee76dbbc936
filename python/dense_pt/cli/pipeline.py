"""`dense-pt pipeline run CONFIG.toml`: the whole fine-tuning chain, resumable stage by stage."""

from __future__ import annotations

from pathlib import Path

import typer

from dense_pt.cli import app
from dense_pt.cli.options import FORCE_DIR_HELP, force_option
from dense_pt.pipeline.run import STAGES

pipeline_app = typer.Typer(help="Multi-stage fine-tuning pipeline.", no_args_is_help=True)
app.add_typer(pipeline_app, name="pipeline")


@pipeline_app.command("run")
def run(
    config: Path = typer.Argument(..., help="Pipeline TOML (see examples/scifact.toml)."),
    quiet: bool = typer.Option(False, help="No progress bars."),
    until: str | None = typer.Option(
        None,
        help=f"Stop after this stage, then exit 0 (re-run without it to continue): {', '.join(STAGES)}.",
    ),
    stop_after: str | None = typer.Option(None, help="The same as --until (its former name)."),
    only: str | None = typer.Option(
        None, help="Run this one stage; the stages it reads must be finished (up to date)."
    ),
    dry_run: bool = typer.Option(
        False, help="Print the plan (which stages run, which are up to date, and why); run nothing."
    ),
    set_: list[str] = typer.Option(
        [],
        "--set",
        help="Override one value, dotted.key=VALUE (TOML syntax), e.g. --set r1.group_size=4 "
        "--set 'pretrain={method=\"cdmae\"}'. Repeatable; paths resolve against the config's folder.",
    ),
    force: bool = force_option(
        FORCE_DIR_HELP + " Stage folders without the stage's manifest (yours) are replaced too."
    ),
) -> None:
    """(pre-training) -> BM25 + zero-shot -> R1 -> mine -> R2 -> re-ranker -> scores -> distill -> report."""
    from dense_pt.errors import InvalidArgumentError
    from dense_pt.pipeline import load_pipeline_config, plan_pipeline, run_pipeline
    from dense_pt.pipeline.run import check_stage, format_plan, stopped_message

    if until is not None and stop_after is not None:
        raise InvalidArgumentError("give --until or --stop-after (the same option), not both")
    option = "--until" if stop_after is None else "--stop-after"
    until = until or stop_after
    check_stage(until, option=option)  # a misspelt stage fails before the file is even read
    check_stage(only, option="--only")
    cfg = load_pipeline_config(config, set_)
    check_stage(until, cfg, option)  # and one this file runs
    if dry_run:
        typer.echo(format_plan(plan_pipeline(cfg, until=until, only=only)))
        return
    run_pipeline(cfg, progress=not quiet, until=until, only=only, force=force)
    if until is not None and until != STAGES[-1]:  # it did what was asked: not an error
        typer.echo(stopped_message(until, option), err=True)
