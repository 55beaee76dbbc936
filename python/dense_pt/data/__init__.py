"""Data: streaming readers for corpora, queries and judgements, and the tokenized corpus store (runs: ``dense_pt.runs``)."""

from dense_pt.data.build import BuildResult, build_corpus_store, corpus_info, train_tokenizer_on_corpus
from dense_pt.data.judgements import Judgement, load_qrels, read_qrels
from dense_pt.data.readers import (
    Passage,
    Query,
    corpus_texts,
    detect_format,
    load_queries,
    passage_text,
    read_corpus,
    read_queries,
)
from dense_pt.data.store import CorpusStore, build_store_from_texts, write_store
from dense_pt.data.tokenizer import load_tokenizer, train_wordpiece

__all__ = [
    "BuildResult",
    "CorpusStore",
    "Judgement",
    "Passage",
    "Query",
    "build_corpus_store",
    "build_store_from_texts",
    "corpus_info",
    "corpus_texts",
    "detect_format",
    "load_qrels",
    "load_queries",
    "load_tokenizer",
    "passage_text",
    "read_corpus",
    "read_qrels",
    "read_queries",
    "train_tokenizer_on_corpus",
    "train_wordpiece",
    "write_store",
]
