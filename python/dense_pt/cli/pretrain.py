"""`dense-pt pretrain` (bottleneck pre-training) and `dense-pt plot` (loss curves).

`dense-pt pretrain --method M --help` ends with M's defaults, each with the paper section (or the
authors' code) it comes from: ``dense_pt.objectives.defaults``, the one place they are declared."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.core import TyperCommand

from dense_pt import logs
from dense_pt.cli import app

METHOD_HELP = (
    "simlm, cdmae, seed, mlm, enc-dec-mlm, enc-dec-rtd, condenser, autoencoder, querygen or contrastive."
)
PAPER_DEFAULT = "Default: the method's paper (`--method M --help` lists each value and its source)."


def print_defaults(method: str, console=None) -> None:
    """The defaults of ``method`` per paper, with their sources, as rich tables."""
    from rich.console import Console
    from rich.table import Table

    from dense_pt.objectives import describe

    console = console or Console()
    for prof in describe(method):
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
        if method:
            from rich.console import Console

            from dense_pt.errors import DensePtError

            try:
                print_defaults(method, Console())
            except DensePtError as exc:
                typer.echo(f"\n{exc}")
        else:
            typer.echo("\nPut --method M before --help to see M's defaults and the papers they come from.")


@app.command(cls=PretrainCommand)
def pretrain(
    method: str | None = typer.Option(None, is_eager=True, help=f"Pre-training method: {METHOD_HELP}"),
    paper: str | None = typer.Option(
        None,
        help="Take the defaults from this paper where a method has several (condenser: 'condenser' "
        "or 'simlm', SimLM's Table 7 row).",
    ),
    model: Path | None = typer.Option(
        None, help="A local HF checkpoint folder, or a config.json (random init)."
    ),
    corpus: Path | None = typer.Option(None, help="Corpus store folder."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Output folder (encoder/, decoder/, log.jsonl, checkpoints/)."
    ),
    config: Path | None = typer.Option(None, "--config", help="TOML file; options given here override it."),
    resume: bool = typer.Option(False, help="Continue from the last checkpoint in --out."),
    max_steps: int | None = typer.Option(None, help="Optimiser steps."),
    batch_size: int | None = typer.Option(None, help="Passages per step and process."),
    lr: float | None = typer.Option(None, help=f"Peak learning rate. {PAPER_DEFAULT}"),
    seed: int | None = typer.Option(None, help="Seed of the init, the data order and the masks."),
    save_every: int | None = typer.Option(None, help="Checkpoint every N steps."),
    max_length: int | None = typer.Option(
        None, help=f"Tokens per passage, [CLS] and [SEP] included. {PAPER_DEFAULT}"
    ),
    generator: str | None = typer.Option(
        None,
        help="simlm / enc-dec-rtd (required): a frozen masked LM, as a folder or a hub name in the "
        "local Hugging Face cache (the paper: google/electra-base-generator), or 'joint' (a small "
        "BERT trained alongside).",
    ),
    generator_fill: str | None = typer.Option(
        None,
        help="simlm / enc-dec-rtd: the generator's input at masked positions: 'mask' or 'bert' (80/10/10).",
    ),
    generator_weight: float | None = typer.Option(
        None, help="simlm / enc-dec-rtd with --generator joint: weight of the generator's MLM loss."
    ),
    rtd_weight: float | None = typer.Option(None, help="enc-dec-rtd: weight of the detection losses."),
    projection: bool | None = typer.Option(
        None,
        "--projection/--no-projection",
        help="Linear projection of [CLS] into the bottleneck (cdmae default).",
    ),
    attention_span: int | None = typer.Option(None, help="seed: tokens the decoder sees before each target."),
    seed_window: str | None = typer.Option(
        None,
        help="seed: 'strict' (eq. 9: exactly k tokens), 'band' (per-layer band mask) or 'released' "
        "(the authors' code: band mask + cross-attention to [CLS] in every layer).",
    ),
    p_enc: float | None = typer.Option(None, help="Encoder mask rate."),
    p_dec: float | None = typer.Option(None, help="Decoder mask rate."),
    sigma: float | None = typer.Option(None, help="cdmae: std of the noise added to importance."),
    decoder_layers: int | None = typer.Option(None, help="Layers of the decoder / head."),
    whole_word: bool | None = typer.Option(
        None, "--whole-word/--no-whole-word", help=f"Mask whole words (the store's word_ids). {PAPER_DEFAULT}"
    ),
    crop: str | None = typer.Option(None, help="Long passages: a 'random' window each epoch, or the 'head'."),
    condenser_layer: int | None = typer.Option(None, help="condenser: the early layer the head reads."),
    pooling: str | None = typer.Option(
        None,
        help="What the bottleneck reads: 'cls' (the papers), 'mean', or 'auto' (the checkpoint's own "
        "sentence-transformers pooling, else [CLS]). Recorded in OUT/encoder, so fine-tuning and "
        f"encoding pool the same way. {PAPER_DEFAULT}",
    ),
    queries: Path | None = typer.Option(
        None, help="querygen / contrastive: the queries folder written by `dense-pt expand`."
    ),
    curriculum: str | None = typer.Option(
        None,
        help='querygen / contrastive: context stages, e.g. "passage:0.75,queries:0.25" (querygen) or '
        '"spans:0.75,queries:0.25" (contrastive) (default: queries:1 with --queries, else spans:1).',
    ),
    stage_schedules: str | None = typer.Option(
        None, help='Learning-rate schedule per curriculum stage (default "cosine,constant,...").'
    ),
    stage_optimizer: str | None = typer.Option(
        None,
        help="Curriculum: at a stage switch 'reset' the AdamW moments (a new run from the checkpoint, "
        "the paper's) or 'keep' them.",
    ),
    max_query_tokens: int | None = typer.Option(None, help="Tokens kept per LLM query (default 32)."),
    warmup: float | None = typer.Option(
        None,
        help="Warm-up steps (>= 1) or a fraction (< 1) of the steps (curriculum: of the first "
        f"stage). {PAPER_DEFAULT}",
    ),
    schedule: str | None = typer.Option(None, help=f"linear, cosine or constant. {PAPER_DEFAULT}"),
    weight_decay: float | None = typer.Option(None, help=f"AdamW weight decay. {PAPER_DEFAULT}"),
    grad_accum: int | None = typer.Option(None, help="Micro-batches per optimiser step."),
    precision: str | None = typer.Option(None, help="auto, fp32, bf16 or fp16."),
    num_workers: int | None = typer.Option(None, help="DataLoader worker processes."),
    log_every: int | None = typer.Option(None, help="Log every N steps."),
    threads: int | None = typer.Option(None, help="torch CPU threads per process (0: torch's default)."),
    quiet: bool = typer.Option(False, help="No progress bar."),
) -> None:
    """Pre-train an encoder with a bottleneck objective; the encoder lands in OUT/encoder."""
    from dense_pt.pretrain import build_config, run_pretrain

    cfg = build_config(
        config,
        top={
            "method": method,
            "paper": paper,
            "model": model,
            "corpus": corpus,
            "out": out,
            "max_length": max_length,
            "queries": queries,
            "curriculum": curriculum,
            "stage_schedules": stage_schedules,
            "max_query_tokens": max_query_tokens,
            "stage_optimizer": stage_optimizer,
        },
        options={
            "generator": generator,
            "generator_fill": generator_fill,
            "generator_weight": generator_weight,
            "rtd_weight": rtd_weight,
            "projection": projection,
            "attention_span": attention_span,
            "seed_window": seed_window,
            "p_enc": p_enc,
            "p_dec": p_dec,
            "sigma": sigma,
            "decoder_layers": decoder_layers,
            "condenser_layer": condenser_layer,
            "whole_word": whole_word,
            "crop": crop,
            "pooling": pooling,
        },
        train={
            "max_steps": max_steps,
            "batch_size": batch_size,
            "lr": lr,
            "seed": seed,
            "save_every": save_every,
            "warmup": warmup,
            "schedule": schedule,
            "weight_decay": weight_decay,
            "grad_accum": grad_accum,
            "precision": precision,
            "num_workers": num_workers,
            "log_every": log_every,
            "threads": threads,
        },
    )
    summary = run_pretrain(cfg, resume=resume, progress=not quiet)
    if summary.get("rank", 0) != 0:
        return
    rec = summary.get("final_record") or {}
    logs.status(
        f"done: {summary['steps']} steps, final loss {rec.get('loss', float('nan')):.4f}; "
        f"encoder in {Path(cfg.out) / 'encoder'}"
    )


@app.command()
def plot(
    logs: list[Path] = typer.Argument(..., help="Training logs (log.jsonl)."),
    out: Path = typer.Option(..., "--out", "-o", help="PNG file to write."),
    key: list[str] = typer.Option(["loss"], "--key", help="Logged value(s) to draw, one panel each."),
    label: list[str] | None = typer.Option(None, "--label", help="A legend label per log."),
    smooth: int = typer.Option(1, help="Moving-average window in logged points."),
    title: str | None = typer.Option(None, help="Figure title."),
) -> None:
    """Draw loss curves from training logs to a PNG."""
    from dense_pt.plot import plot_logs

    path = plot_logs(logs, out, keys=key, labels=label or None, smooth=smooth, title=title)
    typer.echo(str(path))
