"""``expand``: passages in, parsed pseudo-queries out, resumably (the library side of `dense-pt expand`)."""

from __future__ import annotations

import functools
import os
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dense_pt import artifacts
from dense_pt.config.expand import ExpandSettings, SamplingSettings
from dense_pt.errors import InvalidArgumentError
from dense_pt.expansion.corpus import SourcePassage, iter_passages
from dense_pt.expansion.generate import QueryGenerator, SamplingParams, describe_generator, open_generator
from dense_pt.expansion.parse import parse_queries_detailed, prompt_echoes
from dense_pt.expansion.prompts import Prompt, load_prompt
from dense_pt.expansion.select import check_selection, in_sample, passage_seed
from dense_pt.expansion.writer import QueryWriter

API_KEY_VARIABLE = "DENSE_PT_API_KEY"  # an endpoint's API key: never a setting (a manifest records those)
# ``chat`` as the generators take it: auto, or on / off as a bool
CHAT: dict[str, str | bool] = {"auto": "auto", "on": True, "off": False}


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


# expand's keywords before it took ExpandSettings whole (the README's example used them): still
# accepted, with a DeprecationWarning, and read into the settings.
LEGACY_KEYWORDS = frozenset({*ExpandSettings.model_fields, "sampling"})


def _legacy_keywords(fn: Callable[..., ExpandResult]) -> Callable[..., ExpandResult]:
    """``expand(corpus, out, model, seed=0, sampling=SamplingParams(...), ...)``, the old keyword
    form, as ``expand(corpus, out, model, ExpandSettings(seed=0, ...))`` with a DeprecationWarning."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> ExpandResult:
        old = {k: kwargs.pop(k) for k in list(kwargs) if k in LEGACY_KEYWORDS}
        if not old:
            return fn(*args, **kwargs)
        warnings.warn(
            f"expand({', '.join(f'{k}=' for k in old)}...) is deprecated: pass settings=ExpandSettings(...) "
            "(dense_pt.config.expand)",
            DeprecationWarning,
            stacklevel=2,
        )
        if kwargs.get("settings") is not None or len(args) > 3:
            raise InvalidArgumentError("give settings or the old keywords, not both")
        sampling = old.pop("sampling", None)
        if isinstance(old.get("chat"), bool):
            old["chat"] = "on" if old["chat"] else "off"
        given = {**(sampling.to_dict() if sampling is not None else {}), **old}
        return fn(*args, settings=ExpandSettings(**given), **kwargs)

    return wrapper


@_legacy_keywords
def expand(
    corpus: str | Path,
    out: str | Path,
    model: str | Path | None = None,
    settings: ExpandSettings | None = None,
    *,
    generator: QueryGenerator | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ExpandResult:
    """Generate ``settings.num_queries`` pseudo-queries for each selected passage of ``corpus`` into
    ``out``, with ``settings`` (default: the paper's prompt and sampling; ``dense-pt expand``'s model).

    Give ``model`` (a local HF folder / .gguf file, or with ``settings.endpoint`` the server's model
    name; its API key is read from ``$DENSE_PT_API_KEY``) or a ready ``generator``. Passages already
    in ``out`` are skipped; the model is loaded only when something is left to generate.
    ``progress(done, total)`` is called after every batch.
    """
    if generator is None and model is None:
        raise InvalidArgumentError("give --model (and --endpoint for an HTTP server)")
    s = ExpandSettings() if settings is None else settings
    sampling = SamplingParams(**s.model_dump(include=set(SamplingSettings.model_fields)))
    prompt = load_prompt(s.prompt)
    chat = CHAT[s.chat]
    out = Path(out)
    # The manifest names the model before it is loaded, so a finished folder is checked without loading.
    manifest: dict[str, Any] = {
        **_model_ident(generator, model, s.endpoint, chat),
        "prompt": prompt.name,
        "prompt_hash": prompt.hash,
        "prompt_template": prompt.template,
        "num_queries": s.num_queries,
        "sampling": sampling.to_dict(),
        "seed": s.seed,
        "max_passage_words": s.max_passage_words,
        "corpus": str(corpus),
    }
    writer = QueryWriter(out, manifest)
    done = writer.done_ids()

    selected = already = 0
    for p in select_passages(iter_passages(corpus), s.limit, s.sample, s.seed):
        selected += 1
        already += p.id in done
    todo_total = selected - already
    result = ExpandResult(out, selected, already, 0, 0, 0, 0, 0, 0, 0.0)
    if todo_total == 0:
        artifacts.finish(out)
        return result
    if generator is None:
        assert model is not None  # checked above: a model or a generator
        generator = open_generator(
            model, endpoint=s.endpoint, chat=chat, device=s.device, dtype=s.dtype, timeout=s.timeout,
            retries=s.retries, concurrency=s.batch_size, api_key=os.environ.get(API_KEY_VARIABLE),
        )  # fmt: skip
    todo = (p for p in select_passages(iter_passages(corpus), s.limit, s.sample, s.seed) if p.id not in done)
    for chunk in _chunks(todo, s.shard_size):
        rows = _generate_chunk(generator, chunk, prompt, s, sampling, result, todo_total, progress)
        writer.write(rows)
    artifacts.finish(out)  # every selected passage has its shard: the folder is complete
    return result


def _model_ident(
    generator: QueryGenerator | None, model: str | Path | None, endpoint: str | None, chat: str | bool
) -> dict[str, Any]:
    """What the manifest records of the model (a local model resolved to its file, not loaded)."""
    if generator is not None:
        return describe_generator(generator)
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
    gen: QueryGenerator,
    chunk: list[SourcePassage],
    prompt: Prompt,
    settings: ExpandSettings,
    sampling: SamplingParams,
    result: ExpandResult,
    total: int,
    progress: Callable[[int, int], None] | None,
) -> list[dict[str, Any]]:
    num_queries, seed, batch_size = settings.num_queries, settings.seed, settings.batch_size
    prompts = [prompt.render(p.text, p.title, num_queries, settings.max_passage_words) for p in chunk]
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
