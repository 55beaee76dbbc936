"""Building a corpus store from a corpus file, describing a store, training a tokenizer on a corpus.

These are the library functions behind ``dense-pt corpus build|info|train-tokenizer``.

A build is identified by (source sha256, tokenizer vocab hash, max length, title separator, format):
re-running with the same inputs finds the existing store and does nothing unless ``force``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from dense_pt.artifacts.checksums import file_digest
from dense_pt.config.corpus import CorpusSettings
from dense_pt.data.readers import (
    CORPUS_FORMATS,
    DEFAULT_TITLE_SEP,
    Passage,
    detect_format,
    passage_text,
    read_corpus,
    resolve_beir,
)
from dense_pt.data.store import MANIFEST_FILE, CorpusStore, write_store
from dense_pt.data.tokenizer import (
    encode_texts,
    known_max_length,
    load_tokenizer,
    train_wordpiece,
    vocab_hash,
    without_padding_or_truncation,
)
from dense_pt.errors import FormatError, InvalidArgumentError, already_exists, not_found
from dense_pt.fsutil import atomic_file

# Called after each tokenized batch with the number of passages done so far.
ProgressFn = Callable[[int], None]

# A batch is tokenized once it holds this many characters of text, whatever its passage count:
# with the maximum record size, this bounds the text in memory at once.
BATCH_TEXT_CHARS = 32 << 20


@dataclass
class BuildResult:
    store: CorpusStore
    built: bool  # False: an up-to-date store was already there (no-op)
    seconds: float
    passages: int
    truncated: int

    @property
    def passages_per_s(self) -> float:
        return self.passages / self.seconds if self.seconds > 0 else float("nan")


def set_tokenizer_threads(threads: int | None) -> None:
    """Thread count of ``encode_batch``. The tokenizers library reads ``RAYON_NUM_THREADS`` when its
    thread pool starts (the first parallel call in the process), and ``TOKENIZERS_PARALLELISM`` at
    every call; 1 thread switches parallelism off."""
    if threads is None:
        return
    if threads < 1:
        raise InvalidArgumentError(f"threads must be at least 1, got {threads}")
    if threads == 1:
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    else:
        os.environ["TOKENIZERS_PARALLELISM"] = "true"
        os.environ["RAYON_NUM_THREADS"] = str(threads)


def _identity(
    source: Path, fmt: str, tok: Tokenizer, max_length: int | None, title_sep: str
) -> dict[str, Any]:
    return {
        "source_sha256": file_digest(source, "sha256"),
        "vocab_hash": vocab_hash(tok),
        "max_length": max_length,
        "title_sep": title_sep,
        "format": fmt,
    }


def _existing_identity(out: Path) -> dict[str, Any] | None:
    if not (out / MANIFEST_FILE).exists():
        return None
    try:
        m = CorpusStore.open(out).manifest
    except FormatError:
        return None
    src = m.get("source") or {}
    return {
        "source_sha256": src.get("sha256"),
        "vocab_hash": m["tokenizer"].get("vocab_hash"),
        "max_length": m.get("max_length"),
        "title_sep": src.get("title_sep"),
        "format": src.get("format"),
    }


def resolve_max_length(
    max_length: int | str | None, tokenizer: str | Path | Tokenizer
) -> tuple[int | None, str]:
    """The max length a build uses and why: an int as given; ``None`` for no limit; ``"auto"``
    (the default) the model's or tokenizer's own limit when one is known (``known_max_length``),
    else no limit."""
    if max_length == "auto":
        if isinstance(tokenizer, Tokenizer):
            return None, "default: no limit known"
        value, where = known_max_length(tokenizer)
        return value, f"default: {where}"
    if max_length is None:
        return None, "given"
    if isinstance(max_length, bool) or not isinstance(max_length, int):
        raise InvalidArgumentError(f"max_length must be an integer, None or 'auto', got {max_length!r}")
    if max_length < 3:
        raise InvalidArgumentError(
            f"max_length must be at least 3 ([CLS] + 1 token + [SEP]), got {max_length}"
        )
    return max_length, "given"


def build_corpus_store(
    corpus: str | Path,
    tokenizer: str | Path | Tokenizer,
    out: str | Path,
    settings: CorpusSettings | None = None,
    *,
    force: bool = False,
    progress: ProgressFn | None = None,
) -> BuildResult:
    """Tokenize a corpus file (BEIR jsonl, MS MARCO tsv, Parquet, Arrow, or a BEIR folder) into a
    store at ``out``, atomically, with ``settings`` (default: ``CorpusSettings()``; e.g.
    ``CorpusSettings(max_length=128, threads=4)``).

    ``settings.max_length`` counts [CLS] and [SEP] (at most ``max_length - 2`` content tokens are
    kept); None (the default) takes the model's or tokenizer's limit when it is known (the
    manifest's ``max_length_source`` says which), 0 keeps whole passages. ``tokenizer`` is a
    tokenizer.json, a local HF model folder or a loaded Tokenizer. When ``out`` already holds a
    store built from the same inputs the call returns it with ``built=False``; a store built from
    other inputs is replaced only with ``force``. A corpus without passages is refused unless
    ``allow_empty``; a record longer than ``max_record_mb`` (default
    ``dense_pt.data.lines.max_record_bytes()``) is refused naming its line. The manifest records
    the settings (``"settings"``).
    """
    s = CorpusSettings() if settings is None else settings
    fmt: str | None = s.format
    source = resolve_beir(corpus, "corpus")
    if not source.exists():
        raise not_found(source, "no such corpus file")
    if fmt is None and source.stat().st_size == 0:
        fmt = "jsonl"  # nothing to sniff: read as jsonl, i.e. no passages (refused below)
    fmt = fmt or detect_format(source, CORPUS_FORMATS)
    max_length, length_source = resolve_max_length(
        "auto" if s.max_length is None else (s.max_length or None), tokenizer
    )
    title_sep = s.title_sep
    if isinstance(tokenizer, Tokenizer):
        tok, tok_name = tokenizer, "<in-memory>"
    else:
        tok, tok_name = load_tokenizer(tokenizer), str(Path(tokenizer).resolve())
    encoder = without_padding_or_truncation(tok)  # once, not per batch
    out = Path(out)
    t0 = time.perf_counter()
    ident = _identity(source, fmt, tok, max_length, title_sep)
    if out.exists() and not force:
        store = _up_to_date(out, ident)
        truncated = int((store.manifest.get("build") or {}).get("truncated", 0))
        return BuildResult(store, False, time.perf_counter() - t0, len(store), truncated)

    set_tokenizer_threads(s.threads)
    counts = {"passages": 0, "truncated": 0}
    record = None if s.max_record_mb is None else max(1, int(s.max_record_mb * (1 << 20)))
    batches = _batches(read_corpus(source, fmt, record), s.batch_size)
    rows = _token_rows(batches, encoder, title_sep, max_length, counts, progress, source)
    rows = _refuse_empty(rows, counts, s.allow_empty, source)
    meta = {
        "source": {
            "path": str(source.resolve()),
            "sha256": ident["source_sha256"],
            "format": fmt,
            "title_sep": title_sep,
            "size_bytes": source.stat().st_size,
        },
        "tokenizer": {"name": tok_name},
        "max_length": max_length,
        "max_length_source": length_source,
        "settings": s.model_dump(),
    }

    # write_store copies ``meta`` shallowly before consuming the rows and writes the manifest after
    # the last row, so this nested dict, filled while rows stream through, lands in the manifest.
    meta["build"] = counts
    store = write_store(out, rows, encoder, meta=meta, force=force)
    return BuildResult(store, True, time.perf_counter() - t0, counts["passages"], counts["truncated"])


def _up_to_date(out: Path, ident: dict[str, Any]) -> CorpusStore:
    """The store at ``out`` when it was built from the same inputs; else why it cannot be reused."""
    old = _existing_identity(out)
    if old == ident:
        return CorpusStore.open(out)
    what = "another store" if old else "something that is not an up-to-date corpus store"
    if old:
        diff = [k for k in ident if ident[k] != old.get(k)]
        what = f"a store built from different inputs ({', '.join(diff)} differ)"
    raise already_exists(out, f"{out} already holds {what}; use --force (force=True) to replace it")


def _batches(passages: Iterator[Passage], batch_size: int) -> Iterator[list[Passage]]:
    """Batches of ``batch_size`` passages, or fewer once they hold ``BATCH_TEXT_CHARS`` of text."""
    batch: list[Passage] = []
    chars = 0
    for p in passages:
        batch.append(p)
        chars += len(p.text) + len(p.title)
        if len(batch) >= batch_size or chars >= BATCH_TEXT_CHARS:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def _token_rows(batches: Iterator[list[Passage]], encoder: Tokenizer, title_sep: str, max_length: int | None,
                counts: dict[str, int], progress: ProgressFn | None,
                source: Path) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:  # fmt: skip
    """(id, content token ids, word ids) per passage, cut to ``max_length - 2`` tokens; ``counts``
    tallies passages and truncations as they stream."""
    max_content = None if max_length is None else max_length - 2
    for batch in batches:
        texts = [passage_text(p, title_sep) for p in batch]
        # one extra token tells truncated passages apart without a second encode
        encoded = encode_texts(encoder, texts, None if max_content is None else max_content + 1)
        for p, (ids, words) in zip(batch, encoded, strict=True):
            if max_content is not None and len(ids) > max_content:
                ids, words = ids[:max_content], words[:max_content]
                counts["truncated"] += 1
            if len(ids) == 0:
                raise FormatError(f"passage {p.id!r} produces no tokens with this tokenizer", path=source)
            yield p.id, ids, words
        counts["passages"] += len(batch)
        if progress is not None:
            progress(counts["passages"])


def _refuse_empty(
    rows: Iterator[Any], counts: dict[str, int], allow_empty: bool, source: Path
) -> Iterator[Any]:
    yield from rows
    if counts["passages"] == 0 and not allow_empty:
        raise FormatError(
            "the corpus has no passages; pass --allow-empty (allow_empty=True) to build an empty store",
            path=source,
        )


def corpus_info(store: CorpusStore | str | Path) -> dict[str, Any]:
    """A summary of a store: rows, tokens, length percentiles, columns, provenance."""
    if not isinstance(store, CorpusStore):
        store = CorpusStore.open(store)
    m = store.manifest
    lengths = store.lengths()
    pct = (
        {f"p{q}": float(np.percentile(lengths, q)) for q in (50, 90, 99)}
        if len(lengths)
        else {"p50": 0.0, "p90": 0.0, "p99": 0.0}
    )
    columns = {"input_ids": "uint32", "word_ids": "uint32"}
    columns.update({name: meta.get("dtype", "?") for name, meta in sorted(m["columns"].items())})
    return {
        "path": str(store.path),
        "rows": len(store),
        "tokens": int(lengths.sum()),
        "length": {
            "min": int(lengths.min()) if len(lengths) else 0,
            "mean": float(lengths.mean()) if len(lengths) else 0.0,
            **pct,
            "max": int(lengths.max()) if len(lengths) else 0,
        },
        "max_length": m.get("max_length"),
        "max_length_source": m.get("max_length_source"),
        "truncated": (m.get("build") or {}).get("truncated"),
        "checksums": sorted(m.get("files") or {}),
        "columns": columns,
        "vocab_size": store.vocab_size,
        "vocab_hash": store.vocab_hash,
        "tokenizer": m["tokenizer"].get("name"),
        "source": (m.get("source") or {}).get("path"),
        "source_sha256": (m.get("source") or {}).get("sha256"),
        "created": m.get("created"),
        "dense_pt_version": m["written_by"]["version"],
    }


def train_tokenizer_on_corpus(
    corpus: str | Path,
    out: str | Path | None = None,
    *,
    vocab_size: int = 8000,
    format: str | None = None,
    title_sep: str = DEFAULT_TITLE_SEP,
    lowercase: bool = True,
    min_frequency: int = 2,
    force: bool = False,
) -> Tokenizer:
    """Train a BERT-style WordPiece tokenizer on a corpus (streamed) and, with ``out``, save it
    atomically as a tokenizer.json."""
    if out is not None:
        out = Path(out)
        if out.exists() and not force:
            raise already_exists(out, f"{out} already exists (use --force to replace it)")
    if vocab_size < 50:
        raise InvalidArgumentError(f"vocab_size must be at least 50, got {vocab_size}")
    texts = (passage_text(p, title_sep) for p in read_corpus(corpus, format))
    tok = train_wordpiece(texts, vocab_size=vocab_size, lowercase=lowercase, min_frequency=min_frequency)
    if out is not None:
        with atomic_file(out, "w", encoding="utf-8") as f:
            f.write(tok.to_str())
    return tok
