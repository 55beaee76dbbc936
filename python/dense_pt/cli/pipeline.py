"""`dense-pt pipeline run CONFIG.toml`: the whole fine-tuning chain, resumable stage by stage."""

from __future__ import annotations

from pathlib import Path

import typer

from dense_pt.cli import app
from dense_pt.pipeline.run import STAGES

pipeline_app = typer.Typer(help="Multi-stage fine-tuning pipeline.", no_args_is_help=True)
app.add_typer(pipeline_app, name="pipeline")


@pipeline_app.command("run")
def run(
    config: Path = typer.Argument(..., help="Pipeline TOML (see examples/scifact.toml)."),
    quiet: bool = typer.Option(False, help="No progress bars."),
    stop_after: str | None = typer.Option(
        None,
        help=f"Stop after this stage, then exit 0 (re-run without it to continue): {', '.join(STAGES)}.",
    ),
    set_: list[str] = typer.Option(
        [],
        "--set",
        help="Override one value, dotted.key=VALUE (TOML syntax), e.g. --set r1.group_size=4 "
        "--set 'pretrain={method=\"cdmae\"}'. Repeatable; paths resolve against the config's folder.",
    ),
) -> None:
    """(pre-training) -> BM25 + zero-shot -> R1 -> mine -> R2 -> re-ranker -> scores -> distill -> report."""
    from dense_pt.pipeline import load_pipeline_config, run_pipeline
    from dense_pt.pipeline.run import StopPipeline, check_stop_after

    check_stop_after(stop_after)  # a misspelt stage fails before the file is even read
    cfg = load_pipeline_config(config, set_)
    try:
        run_pipeline(cfg, progress=not quiet, stop_after=stop_after)
    except StopPipeline as exc:  # it did what was asked: not an error
        typer.echo(str(exc), err=True)
