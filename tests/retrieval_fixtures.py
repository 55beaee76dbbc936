"""Tiny, deterministic retrieval fixtures: a synthetic corpus with queries and qrels, a WordPiece
tokenizer trained on it, a random-init BERT saved as a local HF folder, and its corpus store."""

from __future__ import annotations

from pathlib import Path

# One definition of the synthetic corpus and tiny model for every test.
from pipeline_fixtures import synthetic_corpus, tiny_model, write_beir


def tiny_setup(tmp: Path):
    """(beir folder, model folder, store folder, queries, qrels)."""
    from tokenizers import Tokenizer

    from dense_pt.data.store import build_store_from_texts

    docs, queries, qrels = synthetic_corpus()
    beir = write_beir(tmp / "beir", docs, queries, qrels)
    model = tiny_model(tmp / "model", [t for _, t in docs] + list(queries.values()))
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    store = tmp / "store"
    build_store_from_texts(store, docs, tok, max_length=64)
    return beir, model, store, queries, qrels
