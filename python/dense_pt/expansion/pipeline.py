"""``expand``: passages in, parsed pseudo-queries out, resumably (the library side of `dense-pt expand`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dense_pt.config.expand import (
    BATCH_SIZE,
    MAX_PASSAGE_WORDS,
    NUM_QUERIES,
    RETRIES,
    SHARD_SIZE,
    TIMEOUT,
    ExpandSettings,
)
from dense_pt.errors import InvalidArgumentError
from dense_pt.expansion.corpus import SourcePassage, iter_passages
from dense_pt.expansion.generate import Generator, SamplingParams, describe, open_generator
from dense_pt.expansion.parse import parse_queries_detailed, prompt_echoes
from dense_pt.expansion.prompts import Prompt, load_prompt
from dense_pt.expansion.select import check_selection, in_sample, passage_seed
from dense_pt.expansion.writer import QueryWriter


@dataclass
class ExpandResult:
    out: Path
    selected: int  # passages chosen by --limit / --sample (all when neither)
    already_done: int  # of those, found in existing shards
    generated: int  # passages sent to the LLM in this run
    queries: int  # queries kept after parsing, this run
    empty: int  # generated passages whose output gave no query, this run
    dropped_copies: int
    dropped_duplicates: int
    dropped_echoes: int  # queries repeating a line of the prompt (few-shot examples)
    seconds: float  # generation wall time, model loading excluded

    @property
    def passages_per_second(self) -> float:
        return self.generated / self.seconds if self.seconds > 0 else 0.0


def select_passages(
    passages: Iterator[SourcePassage], limit: int | None, sample: float | None, seed: int
) -> Iterator[SourcePassage]:
    """``--limit``: the first N passages in corpus order; ``--sample``: see :mod:`.select`."""
    check_selection(limit, sample)
    for i, p in enumerate(passages):
        if limit is not None and i >= limit:
            return
        if sample is None or in_sample(seed, p.id, sample):
            yield p


def expand(
    corpus: str | Path,
    out: str | Path,
    model: str | Path | None = None,
    *,
    generator: Generator | None = None,
    endpoint: str | None = None,
    prompt: str | Path | Prompt = "alpaca",
    num_queries: int = NUM_QUERIES,
    sampling: SamplingParams | None = None,
    limit: int | None = None,
    sample: float | None = None,
    seed: int = 0,
    batch_size: int = BATCH_SIZE,
    shard_size: int = SHARD_SIZE,
    max_passage_words: int = MAX_PASSAGE_WORDS,
    chat: str | bool = "auto",
    device: str | None = None,
    dtype: str = "auto",
    timeout: float = TIMEOUT,
    retries: int = RETRIES,
    api_key: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ExpandResult:
    """Generate ``num_queries`` pseudo-queries for each selected passage of ``corpus`` into ``out``.

    Give ``model`` (a local HF folder / .gguf file, or with ``endpoint`` the server's model name) or a
    ready ``generator``. Passages already in ``out`` are skipped; the model is loaded only when
    something is left to generate. ``progress(done, total)`` is called after every batch.
    """
    if generator is None and model is None:
        raise InvalidArgumentError("give --model (and --endpoint for an HTTP server)")
    ExpandSettings.load(dict(num_queries=num_queries, limit=limit, sample=sample, seed=seed, batch_size=batch_size,
                             shard_size=shard_size, max_passage_words=max_passage_words, endpoint=endpoint,
                             device=device, dtype=dtype, timeout=timeout, retries=retries))  # fmt: skip
    sampling = sampling or SamplingParams()
    prompt = prompt if isinstance(prompt, Prompt) else load_prompt(prompt)
    out = Path(out)
    # The manifest names the model before it is loaded, so a finished folder is checked without loading.
    manifest: dict[str, Any] = {
        **_model_ident(generator, model, endpoint, chat),
        "prompt": prompt.name,
        "prompt_hash": prompt.hash,
        "prompt_template": prompt.template,
        "num_queries": num_queries,
        "sampling": sampling.to_dict(),
        "seed": seed,
        "max_passage_words": max_passage_words,
        "corpus": str(corpus),
    }
    writer = QueryWriter(out, manifest)
    done = writer.done_ids()

    selected = already = 0
    for p in select_passages(iter_passages(corpus), limit, sample, seed):
        selected += 1
        already += p.id in done
    todo_total = selected - already
    result = ExpandResult(out, selected, already, 0, 0, 0, 0, 0, 0, 0.0)
    if todo_total == 0:
        return result
    if generator is None:
        assert model is not None  # _check_args: a model or a generator
        generator = open_generator(
            model, endpoint=endpoint, chat=chat, device=device, dtype=dtype, timeout=timeout, retries=retries,
            concurrency=batch_size, api_key=api_key,
        )  # fmt: skip
    todo = (p for p in select_passages(iter_passages(corpus), limit, sample, seed) if p.id not in done)
    for chunk in _chunks(todo, shard_size):
        rows = _generate_chunk(generator, chunk, prompt, num_queries, sampling, seed, batch_size, max_passage_words,
                               result, todo_total, progress)  # fmt: skip
        writer.write(rows)
    return result


def _model_ident(
    generator: Generator | None, model: str | Path | None, endpoint: str | None, chat: str | bool
) -> dict[str, Any]:
    """What the manifest records of the model (a local model resolved to its file, not loaded)."""
    if generator is not None:
        return describe(generator)
    if endpoint:
        return {"model": str(model), "backend": "endpoint", "chat": chat is True}
    from dense_pt.expansion.generate import resolve_model_path

    folder, gguf = resolve_model_path(model)  # type: ignore[arg-type]
    return {"model": str(folder / gguf) if gguf else str(folder), "backend": "hf", "chat": chat}


def _chunks(passages: Iterator[SourcePassage], size: int) -> Iterator[list[SourcePassage]]:
    """``passages`` in lists of ``size`` (the last one shorter): one shard of the output each."""
    chunk: list[SourcePassage] = []
    for p in passages:
        chunk.append(p)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _generate_chunk(
    gen: Generator,
    chunk: list[SourcePassage],
    prompt: Prompt,
    num_queries: int,
    sampling: SamplingParams,
    seed: int,
    batch_size: int,
    max_passage_words: int,
    result: ExpandResult,
    total: int,
    progress: Callable[[int, int], None] | None,
) -> list[dict[str, Any]]:
    prompts = [prompt.render(p.text, p.title, num_queries, max_passage_words) for p in chunk]
    seeds = [passage_seed(seed, p.id) for p in chunk]
    # Similar lengths in one batch waste less padding; rows are written back in corpus order.
    order = sorted(range(len(chunk)), key=lambda i: len(prompts[i]))
    outputs: list[str] = [""] * len(chunk)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        t0 = time.perf_counter()
        texts = gen.generate([prompts[i] for i in idx], [seeds[i] for i in idx], sampling)
        result.seconds += time.perf_counter() - t0
        if len(texts) != len(idx):
            raise RuntimeError(f"generator returned {len(texts)} outputs for {len(idx)} prompts")
        for i, t in zip(idx, texts, strict=True):
            outputs[i] = t
        result.generated += len(idx)
        if progress:
            progress(result.generated, total)
    rows = []
    echoes = prompt_echoes(prompt.template)
    for p, raw, s in zip(chunk, outputs, seeds, strict=True):
        passage = f"{p.title} {p.text}" if p.title else p.text
        parsed = parse_queries_detailed(raw, passage, max_queries=num_queries, echoes=echoes)
        result.queries += len(parsed.queries)
        result.empty += not parsed.queries
        result.dropped_copies += parsed.copies
        result.dropped_duplicates += parsed.duplicates
        result.dropped_echoes += parsed.echoes
        rows.append(
            {
                "id": p.id,
                "queries": parsed.queries,
                "raw": raw,
                "model": gen.name,
                "prompt_hash": prompt.hash,
                "temperature": sampling.temperature,
                "top_p": sampling.top_p,
                "top_k": sampling.top_k,
                "max_new_tokens": sampling.max_new_tokens,
                "seed": s,
            }
        )
    return rows
