"""Passages to expand, from a corpus file or a tokenized corpus store.

Files are read by :func:`dense_pt.data.readers.read_corpus` (BEIR jsonl or folder, MS MARCO tsv,
Parquet, Arrow; ``.gz`` too), with its file:line errors.

A store keeps token ids, not text: its passages are decoded with the store's own tokenizer, which
for an uncased WordPiece vocabulary gives lowercased text with normalised spacing. Prefer the
original corpus file when it is at hand.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from dense_pt.errors import InvalidArgumentError


class SourcePassage(NamedTuple):
    id: str
    title: str
    text: str


def is_store(path: Path) -> bool:
    return path.is_dir() and (path / "manifest.json").is_file() and (path / "tokens.arrow").is_file()


def iter_passages(path: str | Path, decode_batch: int = 1024) -> Iterator[SourcePassage]:
    path = Path(path)
    if not path.exists():
        raise InvalidArgumentError(f"--corpus {path}: no such file or folder")
    if is_store(path):
        yield from _iter_store(path, decode_batch)
    else:
        yield from _iter_file(path)


def _iter_store(path: Path, batch: int) -> Iterator[SourcePassage]:
    from dense_pt.data.store import CorpusStore

    store = CorpusStore.open(path)
    tok = store.tokenizer()
    ids = store.ids.to_pylist()
    for start in range(0, len(ids), batch):
        rows = range(start, min(start + batch, len(ids)))
        texts = tok.decode_batch([store.tokens(i).tolist() for i in rows], skip_special_tokens=True)
        for i, text in zip(rows, texts, strict=True):
            yield SourcePassage(ids[i], "", text)


def _iter_file(path: Path) -> Iterator[SourcePassage]:
    from dense_pt.data.readers import read_corpus

    for p in read_corpus(path):
        yield SourcePassage(p.id, p.title, p.text)
