"""`dense-pt demo`: the whole pipeline on the embedded demo corpus (grows with every stage)."""

from __future__ import annotations

from pathlib import Path

import typer

from dense_pt.cli import app
from dense_pt.cli.options import flag
from dense_pt.cli.output import emit, json_option
from dense_pt.demo.context import DEMO_THREADS


@app.command()
def demo(
    out: Path = typer.Option(Path("demo-output"), "--out", "-o", help="Folder for the demo's artifacts."),
    corpus: Path | None = typer.Option(None, help="Run on this BEIR folder instead of the demo corpus."),
    force: bool = flag(
        "--force",
        help="Redo every stage, even those that are up to date; also write into a non-empty folder "
        "the demo did not write (files of yours stay: a stage folder holding one is refused).",
    ),
    with_expansion: bool = flag(
        "--with-expansion",
        help="Add an LLM document-expansion stage (SmolLM2 when installed), then a short contrastive "
        "pre-training on its queries.",
    ),
    threads: int = typer.Option(
        DEMO_THREADS,
        min=0,
        help="Torch threads (0: torch's default, one per core). One is faster on a busy machine.",
    ),
    as_json: bool = json_option(),
) -> None:
    """Run the pipeline end to end on a small generated corpus (fictional DEMO DATA) with a tiny model."""
    from dense_pt.cli.corpus import data_warnings
    from dense_pt.demo import STAGES, run_demo

    stages = None
    if with_expansion:
        from dense_pt.demo.expansion import stage_expansion, stage_pretrain_expanded

        stages = [*STAGES, ("expansion", stage_expansion), ("pretrain-expanded", stage_pretrain_expanded)]
    with data_warnings():
        report = run_demo(out=out, corpus=corpus, force=force, stages=stages, threads=threads,
                          print_summary=not as_json)  # fmt: skip
    emit(report, as_json)
