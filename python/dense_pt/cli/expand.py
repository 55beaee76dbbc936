"""`dense-pt expand`: LLM pseudo-queries for the passages of a corpus (document expansion)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from dense_pt.cli import app
from dense_pt.errors import InvalidArgumentError

if TYPE_CHECKING:
    from dense_pt.expansion import ExpandResult


@app.command("expand")
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
    num_queries: int = typer.Option(10, help="Queries asked for and kept per passage."),
    prompt: str = typer.Option("alpaca", help="alpaca | tk-instruct | a template FILE ({passage}, ...)."),
    limit: int | None = typer.Option(None, help="Only the first N passages."),
    sample: float | None = typer.Option(
        None, help="Only a deterministic FRACTION of passages, chosen from (seed, passage id)."
    ),
    seed: int = typer.Option(0, help="Seed of the sample and of sampling."),
    batch_size: int = typer.Option(
        8, help="Prompts per generate() call (requests in flight with --endpoint)."
    ),
    shard_size: int = typer.Option(256, help="Passages per Parquet shard (the unit of resumption)."),
    max_new_tokens: int = typer.Option(256, help="Tokens generated per passage at most."),
    temperature: float = typer.Option(0.7),
    top_p: float = typer.Option(0.95),
    top_k: int = typer.Option(50, help="0 disables top-k."),
    max_passage_words: int = typer.Option(256, help="Passages are cut to this many words in the prompt."),
    chat: str = typer.Option(
        "auto",
        help="auto | on | off: wrap the prompt in the model's chat template "
        "(auto: when it has one; with --endpoint: on = /chat/completions).",
    ),
    endpoint: str | None = typer.Option(
        None, help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (API key from $DENSE_PT_API_KEY)."
    ),
    timeout: float = typer.Option(120.0, help="Seconds per HTTP request (--endpoint)."),
    retries: int = typer.Option(4, help="Retries per HTTP request on network errors, 429 and 5xx."),
    device: str | None = typer.Option(None, help="cpu, cuda, cuda:1 ... (default: cuda when available)."),
    dtype: str = typer.Option("auto", help="auto | float32 | bfloat16 | float16."),
) -> None:
    """Generate pseudo-queries per passage with an LLM (paper's prompts, nucleus sampling), resumably."""
    from dense_pt import logs
    from dense_pt.expansion import SamplingParams

    sampling = SamplingParams(
        temperature=temperature, top_p=top_p, top_k=top_k, max_new_tokens=max_new_tokens
    )
    res = _expand_with_progress(
        corpus, out, model, endpoint=endpoint, prompt=prompt, num_queries=num_queries, sampling=sampling,
        limit=limit, sample=sample, seed=seed, batch_size=batch_size, shard_size=shard_size,
        max_passage_words=max_passage_words, chat=chat_option(chat), device=device, dtype=dtype,
        timeout=timeout, retries=retries, api_key=os.environ.get("DENSE_PT_API_KEY"),
    )  # fmt: skip
    logs.status(summary(res))


def chat_option(chat: str) -> str | bool:
    """``--chat auto | on | off`` as ``expand``'s ``chat`` argument ("auto", True, False)."""
    choices: dict[str, str | bool] = {"auto": "auto", "on": True, "off": False}
    if chat not in choices:
        raise InvalidArgumentError(f"--chat must be auto, on or off, got {chat!r}")
    return choices[chat]


def _expand_with_progress(*args: Any, **kwargs: Any) -> ExpandResult:
    """``expansion.expand`` with the shared progress display over its passages."""
    from dense_pt.expansion import expand
    from dense_pt.progress import Progress

    with Progress("expand", "passages") as bar:

        def progress(done: int, total: int) -> None:
            bar.update("generating", done, total)

        return expand(*args, progress=progress, **kwargs)


def summary(res: ExpandResult) -> str:
    """The status line of a finished (or resumed) expansion: what was selected, done and dropped."""
    rate = f", {res.passages_per_second:.2f} passages/s" if res.generated else ""
    return (
        f"{res.out}: {res.selected} passages selected, {res.already_done} already done, "
        f"{res.generated} generated ({res.queries} queries, {res.empty} without any, "
        f"{res.dropped_copies} copies, {res.dropped_duplicates} duplicates and {res.dropped_echoes} "
        f"echoes of the prompt dropped){rate}"
    )
