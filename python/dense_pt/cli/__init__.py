"""The `dense-pt` command line: a thin Typer layer over the library.

Each command group lives in its own module and registers itself on ``app``; commands parse and
validate, then call a library function that is tested without the CLI. Heavy imports (torch,
transformers) happen inside the commands, so ``dense-pt --help`` stays fast.
"""

from __future__ import annotations

import importlib
import sys

import typer

from dense_pt import __version__
from dense_pt.errors import DensePtError

app = typer.Typer(
    name="dense-pt",
    help="Pre-train and fine-tune dense passage retrievers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Command-group modules, in pipeline order. Only groups that work are listed here.
GROUPS = [
    "dense_pt.cli.corpus",
    "dense_pt.cli.pmi",
    "dense_pt.cli.mask",
    "dense_pt.cli.expand",
    "dense_pt.cli.pretrain",
    "dense_pt.cli.retrieval",
    "dense_pt.cli.fusion",
    "dense_pt.cli.finetune",
    "dense_pt.cli.evaluate",
    "dense_pt.cli.pipeline",
    "dense_pt.cli.study",
    "dense_pt.cli.demo",
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dense-pt {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """dense-pt: bottleneck pre-training (SimLM, CDMAE, SEED) and multi-stage fine-tuning."""


for _module in GROUPS:
    importlib.import_module(_module)


def main() -> None:
    """Entry point: expected errors become one clear line on stderr and exit code 2."""
    try:
        app()
    except DensePtError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        sys.exit(2)
    except (FileNotFoundError, FileExistsError, IsADirectoryError, PermissionError) as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        sys.exit(2)
