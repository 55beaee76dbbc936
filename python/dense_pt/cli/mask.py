"""`dense-pt mask ...`: look at what the native maskers and the collator do to real passages."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import typer

from dense_pt.cli import app
from dense_pt.cli.options import choices, flag
from dense_pt.cli.output import emit, json_option
from dense_pt.config.choices import COLLATOR_METHODS
from dense_pt.config.options import Crop

mask_app = typer.Typer(
    help="Inspect the masking and collation of pre-training batches.", no_args_is_help=True
)
app.add_typer(mask_app, name="mask")


@mask_app.command("preview")
@choices(method=COLLATOR_METHODS, crop=get_args(Crop))
def preview(
    store: Path = typer.Argument(..., help="Corpus store folder (dense-pt corpus build)."),
    method: str = typer.Option("cdmae", help="The pre-training method whose batch to show."),
    rows: list[int] = typer.Option([0], "--row", help="Corpus row(s) to show (repeat the option)."),
    max_length: int = typer.Option(64, help="Sequence length including [CLS] and [SEP]."),
    seed: int = typer.Option(0, help="Masking seed."),
    epoch: int = typer.Option(0, help="Epoch (crops and masks change per epoch)."),
    whole_word: bool = flag("--whole-word/--no-whole-word", help="Mask whole words (the store's word ids)."),
    crop: str = typer.Option("random", help="A 'random' window or the 'head' when a passage is too long."),
    as_json: bool = json_option(),
) -> None:
    """Show each view of a method's batch for some rows: [MASK]ed tokens, token→label where the
    model predicts (✓ when the input kept the original), the masked positions."""
    from dense_pt.collate import preview as make_preview

    result = make_preview(
        store, method, rows, epoch=epoch, max_length=max_length, seed=seed, whole_word=whole_word, crop=crop
    )
    emit(result, as_json, lambda: _print(result))


def _print(result: list[dict[str, Any]]) -> None:
    for item in result:
        typer.secho(f"row {item['row']} (id {item['id']})", bold=True)
        for key, value in item.items():
            if key in ("row", "id"):
                continue
            if key == "spans":
                for i, span in enumerate(value):
                    typer.echo(f"  span {i}: {span}")
            else:
                typer.echo(f"  {key}: {value}")
