"""`dense-pt pretrain` (bottleneck pre-training) and `dense-pt plot` (loss curves).

`dense-pt pretrain`'s options are generated from the config models (``dense_pt.config``: the
pre-training file's top level, ``MethodOptions`` and ``TrainConfig``), one per field, with the
field's help; ``--config FILE`` and ``--set dotted.key=VALUE`` give the same keys from a file.

`dense-pt pretrain --method M --help` ends with M's defaults, each with the paper section (or the
authors' code) it comes from: ``dense_pt.config.defaults.objectives``, the one place they are declared."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand

from dense_pt import logs
from dense_pt.cli import app
from dense_pt.cli.options import (
    FORCE_DIR_HELP,
    Table,
    config_option,
    flag,
    force_option,
    model_options,
    set_option,
    split,
    with_model_options,
)
from dense_pt.cli.output import emit, json_option


def print_defaults(method: str, console=None) -> None:
    """The defaults of ``method`` per paper, with their sources, as rich tables."""
    from rich.console import Console
    from rich.table import Table

    from dense_pt.objectives import describe_method

    console = console or Console()
    for prof in describe_method(method):
        mark = "default" if prof["default"] else f"--paper {prof['paper']}"
        table = Table(title=f"{method}: defaults from {prof['title']} ({mark})", title_justify="left")
        table.add_column("setting", style="cyan", no_wrap=True)
        table.add_column("value", no_wrap=True)
        table.add_column("source")
        for name, value, source in prof["rows"]:
            note = "(the paper's scale, not applied) " if name.startswith("scale.") else ""
            table.add_row(name, repr(value), note + source)
        console.print(table)


class PretrainCommand(TyperCommand):
    """Help that ends with the chosen method's defaults (``--method`` is eager, so it is known
    when ``--help`` comes after it)."""

    def format_help(self, ctx, formatter) -> None:
        super().format_help(ctx, formatter)
        method = ctx.params.get("method")
        method = getattr(method, "value", method)  # a choice: its Enum member
        if method:
            from rich.console import Console

            from dense_pt.errors import DensePtError

            try:
                print_defaults(method, Console())
            except DensePtError as exc:
                typer.echo(f"\n{exc}")
        else:
            typer.echo("\nPut --method M before --help to see M's defaults and the papers they come from.")


def _paper_keys() -> dict[str, set[str]]:
    """{table: the keys some paper sets} (their default is the method's paper, not the model's)."""
    from dense_pt.objectives import PROFILES

    keys: dict[str, set[str]] = {"top": set(), "options": set(), "train": set()}
    for papers in PROFILES.values():
        for prof in papers.values():
            for table in keys:
                keys[table] |= set(getattr(prof, table))
    return keys


def _tables() -> list[Table]:
    """The pre-training settings as a file lays them out: the top level, ``[options]``, ``[train]``."""
    from dense_pt.config import MethodOptions, PretrainSettings, TrainConfig

    return [("top", PretrainSettings), ("options", MethodOptions), ("train", TrainConfig)]


def _model_options() -> list[inspect.Parameter]:
    """One option per field of the pre-training settings (top level, ``[options]``, ``[train]``),
    with the field's help and its default: the model's, or "the method's paper"."""
    paper = _paper_keys()

    def shown(table: str, name: str, f: Any) -> str | None:
        return "the method's paper" if name in paper[table] else None

    return model_options(_tables(), flags={"out": ["-o"]}, shown=shown, eager=["method"])


def pretrain(
    config: Path | None = config_option("TOML file; options given here override it."),
    set_: list[str] = set_option(
        "Override one key of the file: dotted.key=VALUE (e.g. train.adam_eps=1e-6), checked as the file's own."
    ),
    resume: bool = flag("--resume/--no-resume", help="Continue from the last checkpoint in --out."),
    quiet: bool = flag("--quiet", help="No progress bar."),
    force: bool = force_option(FORCE_DIR_HELP),
    as_json: bool = json_option(),
    **values: Any,
) -> None:
    """Pre-train an encoder with a bottleneck objective; the encoder lands in OUT/encoder."""
    from dense_pt.artifacts import claimed
    from dense_pt.pretrain import load_settings, resolve, run_pretrain

    # the file, --set and the options merged once into one PretrainSettings, then resolved once
    cfg = resolve(load_settings(config, set_, split(values, _tables())))
    with claimed(cfg.out, "pretraining run", "pretrain", force=force, settings=cfg.model_dump(mode="json")):
        summary = run_pretrain(cfg, resume=resume, progress=not quiet)
    if summary.get("rank", 0) != 0:
        return
    rec = summary.get("final_record") or {}
    encoder = Path(cfg.out) / "encoder"
    line = f"done: {summary['steps']} steps, final loss {rec.get('loss', float('nan')):.4f}; encoder in {encoder}"
    emit({"out": cfg.out, "encoder": encoder, **summary}, as_json, lambda: logs.status(line))


app.command(cls=PretrainCommand)(with_model_options(pretrain, _model_options()))


@app.command()
def plot(
    logs: list[Path] = typer.Argument(..., help="Training logs (log.jsonl)."),
    out: Path = typer.Option(..., "--out", "-o", help="PNG file to write."),
    key: list[str] = typer.Option(["loss"], "--key", help="Logged value(s) to draw, one panel each."),
    label: list[str] | None = typer.Option(None, "--label", help="A legend label per log."),
    smooth: int = typer.Option(1, help="Moving-average window in logged points."),
    title: str | None = typer.Option(None, help="Figure title."),
    force: bool = force_option(),
    as_json: bool = json_option(),
) -> None:
    """Draw loss curves from training logs to a PNG."""
    from dense_pt.artifacts import check_output_file
    from dense_pt.plot import plot_logs

    check_output_file(out, force)
    path = plot_logs(logs, out, keys=key, labels=label or None, smooth=smooth, title=title)
    emit({"out": path, "logs": logs, "keys": key}, as_json, lambda: typer.echo(str(path)))
