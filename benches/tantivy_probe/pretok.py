"""bm25s's analysis (lower-case, its token pattern, English stopwords, PyStemmer) of a synthetic
MS MARCO folder written as space-joined stems, so that tantivy indexes exactly the terms that bm25s
and dense-pt index: ``python benches/tantivy_probe/pretok.py DATA OUT``."""

from __future__ import annotations

import sys
from pathlib import Path

import bm25s
import Stemmer

from dense_pt.data import corpus_texts, load_queries


def main() -> None:
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    dst.mkdir(parents=True, exist_ok=True)
    stem = Stemmer.Stemmer("english")
    docs = list(corpus_texts(src / "collection.tsv"))
    toks = bm25s.tokenize(
        [t for _, t in docs], stopwords="en", stemmer=stem, return_ids=False, show_progress=False
    )
    with open(dst / "collection.stems", "w", encoding="utf-8") as f:
        f.writelines(f"{p}\t{' '.join(t)}\n" for (p, _), t in zip(docs, toks, strict=True))
    queries = load_queries(src / "queries.train.tsv")
    qtok = bm25s.tokenize(
        list(queries.values()), stopwords="en", stemmer=stem, return_ids=False, show_progress=False
    )
    with open(dst / "queries.stems", "w", encoding="utf-8") as f:
        f.writelines(f"{q}\t{' '.join(t)}\n" for q, t in zip(queries, qtok, strict=True))


if __name__ == "__main__":
    main()
