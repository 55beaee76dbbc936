"""`dense-pt mask ...`: look at what the native maskers and the collator do to real passages."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from dense_pt.cli import app

mask_app = typer.Typer(
    help="Inspect the masking and collation of pre-training batches.", no_args_is_help=True
)
app.add_typer(mask_app, name="mask")


@mask_app.command("preview")
def preview(
    store: Path = typer.Argument(..., help="Corpus store folder (dense-pt corpus build)."),
    method: str = typer.Option(
        "cdmae",
        help="mlm, cdmae, simlm, enc-dec-mlm, enc-dec-rtd, seed, condenser, autoencoder, contrastive.",
    ),
    rows: list[int] = typer.Option([0], "--row", help="Corpus row(s) to show (repeat the option)."),
    max_length: int = typer.Option(64, help="Sequence length including [CLS] and [SEP]."),
    seed: int = typer.Option(0, help="Masking seed."),
    epoch: int = typer.Option(0, help="Epoch (crops and masks change per epoch)."),
    whole_word: bool = typer.Option(False, help="Mask whole words (the store's word ids)."),
    crop: str = typer.Option("random", help="'random' window or 'head' when a passage is too long."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
) -> None:
    """Show each view of a method's batch for some rows: [MASK]ed tokens, token→label where the
    model predicts (✓ when the input kept the original), the masked positions."""
    from dense_pt.collate import preview as make_preview

    result = make_preview(
        store, method, rows, epoch=epoch, max_length=max_length, seed=seed, whole_word=whole_word, crop=crop
    )
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False, indent=1))
        return
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
