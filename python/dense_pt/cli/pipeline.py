"""`dense-pt pipeline run [--config] CONFIG.toml`: the whole fine-tuning chain, resumable stage by stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from dense_pt.cli import app
from dense_pt.cli.options import FORCE_DIR_HELP, choices, flag, force_option
from dense_pt.cli.output import emit, json_option
from dense_pt.pipeline.run import STAGES

pipeline_app = typer.Typer(help="Multi-stage fine-tuning pipeline.", no_args_is_help=True)
app.add_typer(pipeline_app, name="pipeline")


def config_file(positional: Path | None, option: Path | None, example: str) -> Path:
    """The TOML file of ``run CONFIG`` or ``run --config CONFIG`` (the same file, either way)."""
    from dense_pt.errors import InvalidArgumentError

    if positional is not None and option is not None and positional != option:
        raise InvalidArgumentError(f"give the config file once: {positional} or --config {option}")
    found = positional if positional is not None else option
    if found is None:
        raise InvalidArgumentError(f"give the config file: CONFIG or --config CONFIG (see {example})")
    return found


@pipeline_app.command("run")
@choices(until=STAGES, stop_after=STAGES, only=STAGES)
def run(
    config_arg: Path | None = typer.Argument(
        None, metavar="CONFIG", help="Pipeline TOML (see examples/scifact.toml); or give it as --config."
    ),
    config: Path | None = typer.Option(None, "--config", help="Pipeline TOML: the same as CONFIG."),
    quiet: bool = flag("--quiet", help="No progress bars."),
    until: str | None = typer.Option(
        None,
        metavar="STAGE",
        help=f"Stop after this stage, then exit 0 (re-run without it to continue): {', '.join(STAGES)}.",
    ),
    stop_after: str | None = typer.Option(
        None, metavar="STAGE", help="The same as --until (its former name)."
    ),
    only: str | None = typer.Option(
        None,
        metavar="STAGE",
        help=f"Run this one stage ({', '.join(STAGES)}); the stages it reads must be finished (up to date).",
    ),
    dry_run: bool = flag(
        "--dry-run", help="Print the plan (which stages run, which are up to date, and why); run nothing."
    ),
    set_: list[str] = typer.Option(
        [],
        "--set",
        metavar="KEY=VALUE",
        help="Override one value, dotted.key=VALUE (TOML syntax), e.g. --set r1.group_size=4 "
        "--set 'pretrain={method=\"cdmae\"}'. Repeatable; paths resolve against the config's folder.",
    ),
    force: bool = force_option(
        FORCE_DIR_HELP + " A folder named like a stage without that stage's manifest (yours) is never "
        "replaced; a symbolic link to a stage's folder is (the link, not what it points to)."
    ),
    as_json: bool = json_option(),
) -> None:
    """(pre-training) -> BM25 + zero-shot -> R1 -> mine -> R2 -> re-ranker -> scores -> distill -> report.
    With --json: the plan (--dry-run) or each stage's manifest, as one JSON document."""
    from dense_pt.errors import InvalidArgumentError
    from dense_pt.pipeline import load_pipeline_config, plan_pipeline, run_pipeline
    from dense_pt.pipeline.run import check_stage, format_plan, stopped_message

    if until is not None and stop_after is not None:
        raise InvalidArgumentError("give --until or --stop-after (the same option), not both")
    option = "--until" if stop_after is None else "--stop-after"
    until = until or stop_after
    cfg = load_pipeline_config(config_file(config_arg, config, "examples/scifact.toml"), set_)
    check_stage(until, cfg, option)  # a stage this file runs
    if dry_run:
        steps = plan_pipeline(cfg, until=until, only=only)
        emit([_step(s) for s in steps], as_json, lambda: typer.echo(format_plan(steps)))
        return
    results = run_pipeline(cfg, progress=not quiet, until=until, only=only, force=force)
    emit({"out": cfg.out, "stages": results}, as_json)
    if until is not None and until != STAGES[-1]:  # it did what was asked: not an error
        typer.echo(stopped_message(until, option), err=True)


def _step(step: Any) -> dict[str, Any]:
    """A planned stage as data: what a run does with it (run, rerun, resume, skip, off) and why."""
    return {"stage": step.stage.name, "action": step.action, "why": step.why, "deferred": step.deferred,
            "fingerprint": step.fingerprint, "needs": list(step.needs)}  # fmt: skip
