"""`dense-pt expand`: LLM pseudo-queries for the passages of a corpus (document expansion)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

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
from dense_pt.config.expand import ExpandSettings

if TYPE_CHECKING:
    from dense_pt.expansion import ExpandResult


def expand_cmd(
    model: str = typer.Option(
        ..., "--model", help="Local HF model folder or .gguf file; with --endpoint, the server's model name."
    ),
    corpus: Path = typer.Option(
        ..., "--corpus", help="Corpus file (BEIR jsonl or folder, tsv, Parquet, Arrow) or a corpus store."
    ),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Queries folder (Parquet shards); re-running resumes it."
    ),
    force: bool = force_option(FORCE_DIR_HELP),
    as_json: bool = json_option(),
    config: Path | None = config_option(),
    set_: list[str] = set_option(),
    **values: Any,
) -> None:
    """Generate pseudo-queries per passage with an LLM (paper's prompts, nucleus sampling), resumably."""
    from dense_pt import logs
    from dense_pt.artifacts import claimed

    s = load_settings(ExpandSettings, config, set_, split(values, EXPAND), "dense-pt expand")
    with claimed(out, "pseudo-queries", "expand", force=force):
        res = _expand_with_progress(corpus, out, model, s)
    emit(res, as_json, lambda: logs.status(summary(res)))


EXPAND = [("top", ExpandSettings)]
app.command("expand")(with_model_options(expand_cmd, model_options(EXPAND)))


def _expand_with_progress(corpus: Path, out: Path, model: str, settings: ExpandSettings) -> ExpandResult:
    """``expansion.expand`` with the shared progress display over its passages."""
    from dense_pt.expansion import expand
    from dense_pt.progress import Progress

    with Progress("expand", "passages") as bar:

        def progress(done: int, total: int) -> None:
            bar.update("generating", done, total)

        return expand(corpus, out, model, settings, progress=progress)


def summary(res: ExpandResult) -> str:
    """The status line of a finished (or resumed) expansion: what was selected, done and dropped."""
    rate = f", {res.passages_per_second:.2f} passages/s" if res.generated else ""
    return (
        f"{res.out}: {res.selected} passages selected, {res.already_done} already done, "
        f"{res.generated} generated ({res.queries} queries, {res.empty} without any, "
        f"{res.dropped_copies} copies, {res.dropped_duplicates} duplicates and {res.dropped_echoes} "
        f"echoes of the prompt dropped){rate}"
    )
