"""Passages to expand, from a corpus file (BEIR jsonl, ...) or a tokenized corpus store.

A store keeps token ids, not text: its passages are decoded with the store's own tokenizer, which
for an uncased WordPiece vocabulary gives lowercased text with normalised spacing. Prefer the
original corpus file when it is at hand.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from dense_pt.errors import FormatError, InvalidArgumentError


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
    # Minimal BEIR jsonl reader until dense_pt.data.readers is in main.
    if path.is_dir():
        path = path / "corpus.jsonl"
    if not path.name.endswith(".jsonl"):
        raise InvalidArgumentError(f"--corpus {path}: expected a BEIR corpus.jsonl or a corpus store")
    seen: set[str] = set()
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise FormatError(f"invalid JSON ({exc.msg})", path, lineno) from exc
            pid = obj.get("_id", obj.get("id"))
            if not isinstance(pid, str | int):
                raise FormatError("missing passage id field '_id'", path, lineno)
            pid = str(pid)
            if pid in seen:
                raise FormatError(f"duplicate passage id {pid!r}", path, lineno)
            seen.add(pid)
            yield SourcePassage(pid, str(obj.get("title") or ""), str(obj.get("text") or ""))
