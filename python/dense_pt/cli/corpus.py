"""`dense-pt corpus ...`: build and inspect tokenized corpus stores, train a tokenizer, check files."""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Container, Iterator
from pathlib import Path
from typing import Any, get_args

import typer

from dense_pt import logs
from dense_pt.cli import app
from dense_pt.cli.options import (
    choices,
    config_option,
    flag,
    load_settings,
    model_options,
    set_option,
    split,
    with_model_options,
)
from dense_pt.cli.output import emit, json_option
from dense_pt.config.corpus import MAX_RECORD_HELP, CorpusFormat, CorpusSettings
from dense_pt.progress import Progress

corpus_app = typer.Typer(
    help="Tokenized corpus stores: build, inspect, check input files.", no_args_is_help=True
)
app.add_typer(corpus_app, name="corpus")

KINDS = ("corpus", "queries", "qrels", "run")
# Imports stay light here (`dense-pt --help`): the formats come from the config, not dense_pt.data.


def record_bytes(mb: float | None) -> int | None:
    """--max-record-mb as bytes (None: the readers' default)."""
    from dense_pt.errors import InvalidArgumentError

    if mb is None:
        return None
    if not (math.isfinite(mb) and mb > 0):  # inf: int() of it overflows; nan compares false
        raise InvalidArgumentError(f"--max-record-mb must be positive and finite (a number of MiB), got {mb}")
    return max(1, int(mb * (1 << 20)))


@contextlib.contextmanager
def data_warnings() -> Iterator[None]:
    """Show each DataWarning as one yellow line on stderr (not Python's two-line default)."""
    from dense_pt.errors import DataWarning

    def show(message, category, filename, lineno, file=None, line=None):
        typer.secho(f"warning: {message}", fg=typer.colors.YELLOW, err=True)

    with warnings.catch_warnings():
        warnings.simplefilter("always", DataWarning)
        warnings.showwarning = show
        yield


def build(
    corpus: Path = typer.Argument(
        ..., help="Corpus file (BEIR jsonl, MS MARCO tsv, Parquet, Arrow) or BEIR folder."
    ),
    tokenizer: Path = typer.Option(
        ..., "--tokenizer", "-t", help="A tokenizer.json or a local HF model folder."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Store folder to write."),
    force: bool = flag(
        "--force",
        help="Rebuild even if an up-to-date store exists, or replace another store; a folder holding "
        "anything else (a file of yours) is refused, naming it.",
    ),
    as_json: bool = json_option(),
    config: Path | None = config_option(),
    set_: list[str] = set_option(),
    **values: Any,
) -> None:
    """Tokenize a corpus once into a memory-mappable store (Arrow IPC + manifest)."""
    from dense_pt.data.build import build_corpus_store

    s = load_settings(CorpusSettings, config, set_, split(values, BUILD), "dense-pt corpus build")
    with data_warnings(), Progress("corpus build", "passages") as progress:
        progress.update("tokenizing", 0)
        res = build_corpus_store(
            corpus, tokenizer, out, s, force=force, progress=lambda done: progress.update("tokenizing", done)
        )
    m = res.store.manifest
    result = {"out": out, "built": res.built, "passages": len(res.store), "tokens": m["num_tokens"],
              "truncated": res.truncated if res.built else m.get("truncated"), "max_length": m.get("max_length"),
              "max_length_source": m.get("max_length_source", "given"), "seconds": res.seconds}  # fmt: skip
    emit(result, as_json, lambda: logs.status(_build_line(out, res)))


def _build_line(out: Path, res: Any) -> str:
    if not res.built:
        return (
            f"{out} is up to date ({len(res.store):,} passages; same source, tokenizer and "
            "max length): nothing to do (use --force to rebuild)"
        )
    m = res.store.manifest
    return (
        f"wrote {out}: {res.passages:,} passages, {m['num_tokens']:,} tokens, "
        f"{res.truncated:,} truncated (max length {m.get('max_length') or 'none'}, "
        f"{m.get('max_length_source', 'given')}), {res.seconds:.1f} s "
        f"({res.passages_per_s:,.0f} passages/s)"
    )


BUILD = [("top", CorpusSettings)]
corpus_app.command("build")(with_model_options(build, model_options(BUILD)))


@corpus_app.command("info")
def info(
    store: Path = typer.Argument(..., help="A corpus store folder."),
    as_json: bool = json_option(),
    verify: bool = flag(
        "--verify",
        help="Hash every file of the store against its manifest checksum, even when it was "
        "verified before (columns included).",
    ),
) -> None:
    """Rows, tokens, length percentiles, columns and provenance of a store."""
    from dense_pt.data.build import corpus_info
    from dense_pt.data.store import CorpusStore

    opened = CorpusStore.open(store, verify="full" if verify else "cached")
    if verify:
        opened.verify_columns()
    summary = corpus_info(opened)
    emit(summary, as_json, lambda: _print_info(summary, verify))


def _print_info(summary: dict[str, Any], verify: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"corpus store {summary['path']}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    L = summary["length"]
    rows = [
        ("rows", f"{summary['rows']:,}"),
        ("tokens", f"{summary['tokens']:,}"),
        (
            "length",
            f"min {L['min']}  mean {L['mean']:.1f}  p50 {L['p50']:.0f}  p90 {L['p90']:.0f}  "
            f"p99 {L['p99']:.0f}  max {L['max']}",
        ),
        ("max_length", f"{summary['max_length'] or 'none'} ({summary['max_length_source'] or 'given'})"),
        ("truncated", str(summary["truncated"])),
        ("columns", ", ".join(f"{k} ({v})" for k, v in summary["columns"].items())),
        (
            "checksums",
            ("verified: " if verify else "")
            + (", ".join(summary["checksums"]) or "none (a store written before checksums)"),
        ),
        ("vocab", f"{summary['vocab_size']:,} tokens, hash {summary['vocab_hash'][:16]}"),
        ("tokenizer", str(summary["tokenizer"])),
        ("source", f"{summary['source']} (sha256 {str(summary['source_sha256'])[:16]})"),
        ("created", f"{summary['created']} by dense-pt {summary['dense_pt_version']}"),
    ]
    for k, v in rows:
        table.add_row(k, v)
    Console().print(table)


@corpus_app.command("train-tokenizer")
@choices(format=get_args(CorpusFormat))
def train_tokenizer(
    corpus: Path = typer.Argument(..., help="Corpus file or BEIR folder."),
    out: Path = typer.Option(..., "--out", "-o", help="tokenizer.json to write."),
    vocab_size: int = typer.Option(8000, help="Vocabulary size, special tokens included."),
    format: str | None = typer.Option(None, "--format", help="The corpus file's format (default: detect)."),
    cased: bool = flag("--cased", help="Keep case (default: lowercase, strip accents)."),
    min_frequency: int = typer.Option(2, help="Minimum pair frequency for a merge."),
    force: bool = flag("--force", help="Overwrite an existing file."),
    as_json: bool = json_option(),
) -> None:
    """Train a BERT-style WordPiece tokenizer ([PAD] [UNK] [CLS] [SEP] [MASK]) on a corpus."""
    from dense_pt.data.build import train_tokenizer_on_corpus

    with data_warnings():
        tok = train_tokenizer_on_corpus(
            corpus,
            out,
            vocab_size=vocab_size,
            format=format,
            lowercase=not cased,
            min_frequency=min_frequency,
            force=force,
        )
    size = tok.get_vocab_size()
    emit({"out": out, "vocab_size": size}, as_json, lambda: logs.status(f"wrote {out}: {size:,} tokens"))


@corpus_app.command("check")
@choices(kind=KINDS)
def check(
    path: Path = typer.Argument(..., help="File to validate."),
    kind: str = typer.Option("corpus", "--kind", "-k", help="What the file holds."),
    format: str | None = typer.Option(
        None, "--format", help="Override format detection (the kind's readers name the formats they take)."
    ),
    queries: Path | None = typer.Option(None, help="Queries file: qrels ids are checked against it."),
    corpus: Path | None = typer.Option(None, help="Corpus file or store: qrels ids are checked against it."),
    strict: bool = flag("--strict", help="A judgement for an unknown id is an error."),
    max_record_mb: float | None = typer.Option(None, "--max-record-mb", help=MAX_RECORD_HELP),
    as_json: bool = json_option(),
) -> None:
    """Read a whole input file and report the first problem (file:line: what was expected)."""
    from dense_pt.data.judgements import read_qrels
    from dense_pt.data.readers import read_corpus, read_queries
    from dense_pt.runs import read_run

    limit = record_bytes(max_record_mb)
    with data_warnings():
        if kind == "corpus":
            n = sum(1 for _ in read_corpus(path, format, limit))
        elif kind == "queries":
            n = sum(1 for _ in read_queries(path, format, limit))
        elif kind == "run":
            n = sum(c.num_rows for c in read_run(path, max_record_bytes=limit))
        else:
            qids = {q.id for q in read_queries(queries, max_record_bytes=limit)} if queries else None
            pids = _corpus_ids(corpus) if corpus else None
            n = sum(1 for _ in read_qrels(path, format, qids, pids, strict=strict, max_record_bytes=limit))
    what = {"corpus": "passages", "queries": "queries", "qrels": "judgements", "run": "run lines"}[kind]
    if n == 0:  # an empty (or blank) file is no corpus: every command that reads it would fail later
        from dense_pt.errors import FormatError

        raise FormatError(f"holds no {what} (the file is empty or blank)", path=path)
    result = {"path": path, "kind": kind, "ok": True, "records": n, "unit": what}
    emit(result, as_json, lambda: typer.echo(f"{path}: ok, {n:,} {what}"))


def _corpus_ids(path: Path) -> Container[str]:
    from dense_pt.data.readers import read_corpus
    from dense_pt.data.store import MANIFEST_FILE, CorpusStore

    if path.is_dir() and (path / MANIFEST_FILE).exists():
        return CorpusStore.open(path)  # supports `pid in store`
    return {p.id for p in read_corpus(path)}
