"""`dense-pt pmi ...`: n-gram tables and AMI token importance (thin layer over dense_pt.pmi)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from dense_pt import logs
from dense_pt.cli import app
from dense_pt.cli.options import (
    choices,
    config_option,
    force_option,
    load_settings,
    model_options,
    set_option,
    split,
    with_model_options,
)
from dense_pt.cli.output import emit, json_option
from dense_pt.config.pmi import MIN_COUNT, WINDOW, PmiBuild
from dense_pt.progress import Progress

pmi_app = typer.Typer(help="Corpus n-gram statistics and PMI/AMI token importance.", no_args_is_help=True)
app.add_typer(pmi_app, name="pmi")


def _progress(command: str) -> tuple[Progress, Callable[[str, int, int], None]]:
    """The progress display and the callback the Rust core reports to, one phase per order."""
    progress = Progress(command, "n-grams")
    return progress, lambda phase, done, total: progress.update(phase, done, total)


def _gb(n: int | None) -> str:
    return "n/a" if n is None else f"{n / (1 << 30):.2f} GB"


def build_cmd(
    store: Path = typer.Argument(..., help="Corpus store directory (from `dense-pt corpus build`)."),
    out: Path = typer.Option(..., "--out", "-o", help="Table file to write (atomically)."),
    spill_dir: Path = typer.Option(
        None, "--spill-dir", help="Folder for sorted runs (default: next to --out)."
    ),
    force: bool = force_option(),
    as_json: bool = json_option(),
    config: Path | None = config_option(),
    set_: list[str] = set_option(),
    **values: Any,
) -> None:
    """Count 1..max-n-grams of a corpus store into a table file."""
    from dense_pt.artifacts import check_output_file
    from dense_pt.pmi import build

    s = load_settings(PmiBuild, config, set_, split(values, PMI_BUILD), "dense-pt pmi build")
    check_output_file(out, force)
    bar, cb = _progress("pmi build")
    with bar:
        stats = build(store, out, s, spill_dir=spill_dir, progress=cb)
    emit(
        {"out": out, **stats},
        as_json,
        lambda: logs.status(
            f"wrote {out}  shard {stats['shard']}  passages {stats['passages']:,}  "
            f"N_n {stats['totals']}  stored {stats['entries']}  "
            f"passes {stats['passes']}  spilled runs {stats['spilled_runs']}  "
            f"{stats['seconds']:.1f} s  peak RSS {_gb(stats['peak_rss_bytes'])}"
        ),
    )


PMI_BUILD = [("top", PmiBuild)]
pmi_app.command("build")(with_model_options(build_cmd, model_options(PMI_BUILD)))


@pmi_app.command("merge")
def merge_cmd(
    parts: list[Path] = typer.Argument(
        ..., help="Shard tables from `pmi build --shard I/N` (all N of them)."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Merged table file to write."),
    min_count: int = typer.Option(
        MIN_COUNT, "--min-count", min=1, help="Prune n-grams of order >= 2 below this count."
    ),
    force: bool = force_option(),
    as_json: bool = json_option(),
) -> None:
    """Merge shard tables into the table an unsharded build would write (same bytes)."""
    from dense_pt.artifacts import check_output_file
    from dense_pt.pmi import merge

    check_output_file(out, force)
    bar, cb = _progress("pmi merge")
    with bar:
        res = merge(parts, out, min_count=min_count, progress=cb)
    emit(
        {"out": out, **res},
        as_json,
        lambda: logs.status(f"wrote {out} from {res['parts']} shards  N_n {res['totals']}"),
    )


@pmi_app.command("score")
@choices(dtype=("float32", "float16"))
def score_cmd(
    store: Path = typer.Argument(..., help="Corpus store directory."),
    table: Path = typer.Option(..., "--table", help="Table built from this store's vocabulary."),
    window: int = typer.Option(WINDOW, "--window", min=2, help="AMI window L (uses orders 2..L)."),
    dtype: str = typer.Option("float32", "--dtype", help="The column's float type."),
    threads: int = typer.Option(
        None, "--threads", min=1, help="Worker threads (default: all available cores)."
    ),
    column: str = typer.Option(
        "importance", "--column", help="Name of the column to add (a plain identifier)."
    ),
    as_json: bool = json_option(),
) -> None:
    """Add the per-token AMI column `importance` to the store (atomic; replaces an old one)."""
    from dense_pt.pmi import score

    with Progress("pmi score", "tokens") as progress:
        progress.update(f"scoring with window {window}", 0)
        res = score(store, table, window=window, dtype=dtype, threads=threads, column=column)
        progress.update(f"scoring with window {window}", res["tokens"])
    emit(
        res,
        as_json,
        lambda: logs.status(
            f"added column {res['column']!r} to {res['store']}: {res['tokens']:,} tokens, "
            f"{res['tokens_per_s']:,.0f} tokens/s, mean AMI {res['mean']:.3f}"
        ),
    )


@pmi_app.command("inspect")
def inspect_cmd(
    table: Path = typer.Argument(..., help="Table file."),
    tokenizer: Path = typer.Option(
        None, "--tokenizer", help="tokenizer.json, HF folder or corpus store (to decode and score --text)."
    ),
    text: list[str] = typer.Option(None, "--text", help="Text to score token by token (repeatable)."),
    top: int = typer.Option(10, "--top", min=0, help="Top n-grams by PMI to show per order (0: none)."),
    top_min_count: int = typer.Option(
        5, "--top-min-count", min=0, help="Only list n-grams seen at least this often."
    ),
    window: int = typer.Option(WINDOW, "--window", min=2, help="AMI window L for --text."),
    as_json: bool = json_option(),
) -> None:
    """Show a table's statistics, its top n-grams by PMI, and the AMI of each token of --text."""
    from dense_pt.pmi import NgramTable
    from dense_pt.pmi.inspect import describe, render

    t = NgramTable.open(table)
    args = dict(tokenizer=tokenizer, texts=text or [], top=top, top_min_count=top_min_count, window=window)
    if as_json:
        emit(describe(t, **args), as_json)  # type: ignore[arg-type]
    else:
        render(t, **args)  # type: ignore[arg-type]
