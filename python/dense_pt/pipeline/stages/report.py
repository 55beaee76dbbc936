"""report: a markdown table of every finished stage's dev metrics and a plot, rewritten on every
run (no manifest: it only summarises the others)."""

from __future__ import annotations

from pathlib import Path

from dense_pt.pipeline import common as C
from dense_pt.pipeline.runner import Stage


def run(ctx: C.Ctx, folder: Path) -> dict:
    from dense_pt.pipeline.report import write_report

    write_report(folder, ctx.results, ctx.cfg)
    ctx.log(f"report: {folder / 'report.md'}")
    return {}


STAGE = Stage(
    name="report",
    doc="write report.md and stages.png from the finished stages",
    reads=(),
    config=("eval", "data", "model"),
    outputs=("report.md", "stages.png"),
    inputs=lambda ctx: {},
    params=lambda ctx: {},
    run=run,
    tracked=False,
)
