"""`dense-pt bm25`: a BM25 run with the bm25s package (Lucene's BM25 variant by default)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dense_pt.config.retrieval import BM25Settings
from dense_pt.data.judgements import write_run
from dense_pt.errors import InvalidArgumentError
from dense_pt.progress import Progress


def bm25_run(
    corpus: Iterable[tuple[str, str]],
    queries: dict[str, str],
    method: str = "lucene",
    stopwords: str | None = "en",
    **settings: Any,
) -> dict[str, dict[str, float]]:
    """BM25 top-k of each query over (id, text) passages, as ``{qid: {pid: score}}``; ``settings``
    are ``BM25Settings``' fields (``k``, ``k1``, ``b``, ``stem``: defaults and checks there)."""
    import bm25s

    s = BM25Settings(**settings)
    k, k1, b, stem = s.k, s.k1, s.b, s.stem
    progress = Progress("bm25", "passages")
    progress.update("reading", 0)
    try:
        pairs = list(corpus)
    except BaseException:
        progress.close()
        raise
    if not pairs:
        progress.close()
        raise InvalidArgumentError("the corpus is empty")
    progress.update("reading", len(pairs))
    pids = [p for p, _ in pairs]
    stemmer = None
    if stem:
        try:
            import Stemmer

            stemmer = Stemmer.Stemmer("english")
        except ImportError:
            stemmer = None
    qids = list(queries)
    with progress:
        progress.update("indexing", 0, len(pairs))
        tok = bm25s.tokenize([t for _, t in pairs], stopwords=stopwords, stemmer=stemmer, show_progress=False)
        retriever = bm25s.BM25(k1=k1, b=b, method=method)
        retriever.index(tok, show_progress=False)
        progress.update("indexing", len(pairs), len(pairs))
        progress.update("retrieving", 0, len(qids), unit="queries")
        qtok = bm25s.tokenize(
            [queries[q] for q in qids], stopwords=stopwords, stemmer=stemmer, show_progress=False
        )
        kk = min(k, len(pids))
        docs, scores = retriever.retrieve(qtok, k=kk, show_progress=False, n_threads=1)
        progress.update("retrieving", len(qids), len(qids))
    run: dict[str, dict[str, float]] = {}
    for i, q in enumerate(qids):
        run[q] = {pids[int(d)]: float(s) for d, s in zip(docs[i], scores[i], strict=True) if s > 0}
    return run


def bm25(corpus_path: str | Path, queries_path: str | Path, out: str | Path, **settings: Any) -> Path:
    """``bm25_run`` over a corpus file and a queries file, written as a TREC run to ``out``."""
    from dense_pt.data.readers import corpus_texts, load_queries

    run = bm25_run(corpus_texts(corpus_path), load_queries(queries_path), **settings)
    write_run(out, run, tag="bm25s")
    return Path(out)
