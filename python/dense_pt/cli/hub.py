"""`dense-pt hub export`: a retriever folder made ready for the Hugging Face Hub (model card,
licence, sentence-transformers' files), and uploaded with --push-to-hub."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from dense_pt.cli import app
from dense_pt.cli.options import (
    config_option,
    force_option,
    load_settings,
    model_options,
    set_option,
    split,
    with_model_options,
)
from dense_pt.cli.output import emit, json_option
from dense_pt.config.hub import HubSettings

hub_app = typer.Typer(
    help="The Hugging Face Hub: export a retriever folder for it, upload it.", no_args_is_help=True
)
app.add_typer(hub_app, name="hub")


def export(
    folder: Path = typer.Argument(
        ..., help="A retriever's model folder (dense-pt train retriever / distill: OUT/model)."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="The Hub-ready folder to write."),
    results: list[Path] = typer.Option(
        [],
        "--results",
        help="dense-pt beir results (its --json, or RUNS/<dataset>/results.json): the card's table.",
    ),
    force: bool = force_option("Replace OUT if it exists (once the new folder is complete)."),
    as_json: bool = json_option(),
    config: Path | None = config_option(),
    set_: list[str] = set_option(),
    **values: Any,
) -> None:
    """Write a Hub-ready copy of a retriever: its files, a model card (recipe, evaluation) and LICENSE."""
    from dense_pt import logs
    from dense_pt.hub import export_hub

    s = load_settings(HubSettings, config, set_, split(values, HUB), "dense-pt hub export")
    done = export_hub(folder, out, s, results, force=force)
    where = f"; uploaded to {done.url}" if done.url else ""
    emit(done, as_json, lambda: logs.status(f"wrote {out} (licence {done.license}){where}"))


HUB = [("top", HubSettings)]
hub_app.command("export")(with_model_options(export, model_options(HUB)))
