"""Data: streaming readers for corpora, queries, judgements and runs, and the tokenized corpus store."""

from dense_pt.data.store import CorpusStore, build_store_from_texts, write_store
from dense_pt.data.tokenizer import load_tokenizer, train_wordpiece

__all__ = ["CorpusStore", "build_store_from_texts", "load_tokenizer", "train_wordpiece", "write_store"]
