"""`dense-pt pipeline run`: (pre-training) -> BM25 + zero-shot -> R1 -> mine -> R2 -> re-ranker ->
scores -> distilled retriever (-> fusion), evaluated on a held-out dev split, with a final report.

The stages are declared one module each in ``dense_pt.pipeline.stages``; ``dense_pt.pipeline.runner``
plans them (fingerprints, what is up to date and why) and runs them, skipping finished stages and
resuming interrupted ones. This module is the entry point: ``run_pipeline`` and ``plan_pipeline``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from dense_pt.errors import DensePtError, InvalidArgumentError
from dense_pt.pipeline.config import ResolvedPipeline
from dense_pt.pipeline.runner import Context, Step, format_plan, plan, run_stages
from dense_pt.pipeline.stages import load_stages
from dense_pt.pipeline.stages.split import dev_split

__all__ = ["STAGES", "Context", "StopPipeline", "check_stage", "dev_split", "format_plan", "plan_pipeline",
           "planned_stages", "run_pipeline", "stopped_message"]  # fmt: skip

STAGE_DEFS = load_stages()
STAGES = tuple(s.name for s in STAGE_DEFS)
# The run file each evaluated stage leaves in its folder (its metrics can be recomputed from it).
RUN_FILES = {s.name: s.run_file for s in STAGE_DEFS if s.run_file}


class StopPipeline(DensePtError):
    """Raised after ``stop_after`` (tests simulate an interrupted pipeline with it)."""


def planned_stages(cfg: ResolvedPipeline) -> tuple[str, ...]:
    """The stages ``cfg`` runs, in order (the optional ones only when configured)."""
    return tuple(s.name for s in STAGE_DEFS if s.disabled(cfg) is None)


def check_stage(name: str | None, cfg: ResolvedPipeline | None = None, option: str = "--until") -> None:
    """``name`` (given as ``option``) is a stage that ``cfg`` runs, checked before any work."""
    if name is None:
        return
    if name not in STAGES:
        raise InvalidArgumentError(f"{option} {name!r}: not a stage; the stages are {', '.join(STAGES)}")
    if cfg is not None and name not in planned_stages(cfg):
        raise InvalidArgumentError(
            f"{option} {name!r}: this configuration does not run that stage (it runs "
            f"{', '.join(planned_stages(cfg))})"
        )


def check_stop_after(name: str | None, cfg: ResolvedPipeline | None = None) -> None:
    check_stage(name, cfg, "--stop-after")


def _config(config: ResolvedPipeline | str | Path) -> ResolvedPipeline:
    """A configuration already validated (``validate_config``), or a pipeline file to read."""
    from dense_pt.pipeline.config import load_pipeline_config

    if isinstance(config, ResolvedPipeline):
        return config
    if isinstance(config, str | Path):
        return load_pipeline_config(config)
    raise TypeError(
        f"a pipeline configuration is a file path or validate_config()'s ResolvedPipeline, not {type(config).__name__}"
    )


def _context(
    cfg: ResolvedPipeline,
    until: str | None,
    only: str | None,
    option: str,
    log: Callable[[str], None],
    progress: bool,
    force: bool = False,
) -> Context[ResolvedPipeline]:
    if until is not None and only is not None:
        raise InvalidArgumentError("give one of --until and --only, not both")
    check_stage(until, cfg, option)
    check_stage(only, cfg, "--only")
    return Context(cfg, progress, log, force)


def plan_pipeline(
    config: ResolvedPipeline | str | Path, until: str | None = None, only: str | None = None
) -> list[Step[ResolvedPipeline]]:
    """What ``run_pipeline`` would do, stage by stage, and why (``--dry-run``); writes nothing.
    ``format_plan`` renders it."""
    cfg = _config(config)
    return plan(_context(cfg, until, only, "--until", lambda _: None, False), STAGE_DEFS, until, only)


def run_pipeline(
    config: ResolvedPipeline | str | Path,
    progress: bool = True,
    stop_after: str | None = None,
    log: Callable[[str], None] | None = None,
    *,
    until: str | None = None,
    only: str | None = None,
    force: bool = False,
) -> dict[str, dict[str, Any]]:
    """Run (or continue) the chain; returns the manifests of the stages it ran or found done.
    ``until``: stop after that stage; ``only``: run that one stage, whose inputs must be finished;
    ``stop_after``: as ``until``, then raise ``StopPipeline``. ``force``: write into an output
    folder the pipeline did not write, replacing stage folders without the stage's manifest."""
    cfg = _config(config)
    if log is None:
        from dense_pt import logs

        log = lambda m: logs.status(f"pipeline: {m}")  # noqa: E731  (stderr; --quiet hides it)
    option = "--stop-after" if stop_after is not None else "--until"
    ctx = _context(cfg, until or stop_after, only, option, log, progress, force)
    run_stages(ctx, STAGE_DEFS, until or stop_after, only)
    if stop_after is not None and stop_after != STAGES[-1]:
        raise StopPipeline(stopped_message(stop_after, "--stop-after"))
    return ctx.results


def stopped_message(stage: str, option: str = "--until") -> str:
    return f"stopped after stage {stage!r} as asked; re-run without {option} to continue"
