"""`dense-pt bm25`: BM25 runs from our engine (rust/core/src/bm25), with bm25s's Lucene variant's
scores (k1 0.9 and b 0.4 by default: ``BM25Settings``) and tokenization.

``bm25`` streams: the corpus is read in batches into an index kept on disk (``bm25_index``: built
once per corpus and settings, reused after), the queries are searched in chunks on ``threads``
threads (MaxScore: exact top-k without scoring every posting), and the run is written as it goes.
``query_shard="i/n"`` searches only the i-th of n contiguous slices of the queries file, for
arrays of jobs whose runs are merged afterwards. ``bm25_run`` returns a ``{qid: {pid: score}}``
dict, for small inputs held in memory.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path

from dense_pt.config.retrieval import BM25Command, BM25Settings
from dense_pt.config.shard import parse_shard
from dense_pt.errors import InvalidArgumentError
from dense_pt.progress import Progress
from dense_pt.retrieval.bm25_index import (
    Analysis,
    BM25Index,
    build_index,
    index_folder,
    index_for,
    index_key,
    stopword_list,
)
from dense_pt.runs import RunChunk, RunWriter

TAG = "bm25"
HITS_PER_CHUNK = 400_000  # queries are searched in chunks of about this many hits


def default_threads() -> int:
    """All the cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def parse_query_shard(shard: str | tuple[int, int] | None) -> tuple[int, int]:
    """``"i/n"`` (0-based) -> ``(i, n)``; None -> ``(0, 1)``."""
    return parse_shard(shard, "query shard")


def shard_range(count: int, shard: tuple[int, int]) -> range:
    """Shard i of n: queries ``[i * count // n, (i + 1) * count // n)`` (in file order), so the
    shards' runs concatenated in shard order are the unsharded run."""
    i, n = shard
    return range(i * count // n, (i + 1) * count // n)


def retrieve(
    index: BM25Index,
    queries: Iterable[tuple[str, str]],
    k: int,
    threads: int = 1,
    progress: Progress | None = None,
) -> Iterator[RunChunk]:
    """The run of ``(qid, text)`` queries, chunk by chunk: each query's hits best first, ranked 1,
    2, ... (a query without any matching term has none)."""
    chunk = max(1, min(4096, HITS_PER_CHUNK // k))
    it, done = iter(queries), 0
    while batch := list(islice(it, chunk)):
        docs, scores, offsets = index.search([t for _, t in batch], k, threads)
        yield RunChunk.best_first([q for q, _ in batch], offsets, index.pids(docs), scores)
        done += len(batch)
        if progress is not None:
            progress.update("retrieving", done, progress.total, unit="queries")


def write_hits(out: str | Path, chunks: Iterable[RunChunk], k: int | None = None) -> int:
    """Write a run as it is produced, a chunk of queries at a time, through ``RunWriter`` (Arrow
    for an ``.arrow`` name, TREC text otherwise; tied scores in trec_eval's order, as every run);
    returns the row count. ``k``: the depth the hits were cut to, recorded in an Arrow run."""
    with RunWriter(out, tag=TAG, depth=k) as w:
        for c in chunks:
            w.write(c.qids, c.offsets, c.docids, c.scores)
    return w.rows


def _analysis(stopwords: str | Iterable[str] | None, stem: bool) -> Analysis:
    return Analysis(stopword_list(stopwords), stem)


def bm25_index(
    corpus_path: str | Path,
    index: str | Path | None = None,
    settings: BM25Settings | None = None,
    *,
    stopwords: str | Iterable[str] | None = "en",
    progress: Progress | None = None,
) -> BM25Index:
    """The index of a corpus file (built, or opened when one with the same key exists at
    ``index``; default: in dense-pt's cache, see ``bm25_index.index_folder``) for ``settings``
    (default: ``BM25Settings()``; its ``k1``, ``b`` and ``stem`` shape the index)."""
    s = BM25Settings() if settings is None else settings
    analysis = _analysis(stopwords, s.stem)
    with index_folder(corpus_path, index) as where:  # never a temporary folder without an output
        if progress is not None:
            return index_for(corpus_path, index=where, analysis=analysis, k1=s.k1, b=s.b, progress=progress)
        with Progress("bm25", "passages") as own:
            return index_for(corpus_path, index=where, analysis=analysis, k1=s.k1, b=s.b, progress=own)


def _queries(path: str | Path, shard: tuple[int, int]) -> tuple[Iterator[tuple[str, str]], int]:
    from dense_pt.data.readers import read_queries

    count = sum(1 for _ in read_queries(path))
    part = shard_range(count, shard)
    return ((q.id, q.text) for q in islice(read_queries(path), part.start, part.stop)), len(part)


def bm25(
    corpus_path: str | Path,
    queries_path: str | Path,
    out: str | Path,
    settings: BM25Command | None = None,
    *,
    index: str | Path | None = None,
) -> Path:
    """The BM25 run of a queries file over a corpus file, written to ``out`` (Arrow for an
    ``.arrow`` name, TREC text otherwise) as it is searched, with ``settings`` (default:
    ``BM25Command()``; e.g. ``BM25Command(k=100, threads=4, query_shard="0/8")``). The index is
    ``index`` when given, else in dense-pt's cache (``bm25_index.index_folder``)."""
    s = BM25Command() if settings is None else settings
    shard = parse_query_shard(s.query_shard)
    threads = default_threads() if s.threads is None else s.threads
    with Progress("bm25", "passages") as progress, index_folder(corpus_path, index, out) as where:
        idx = bm25_index(corpus_path, where, s, progress=progress)
        queries, count = _queries(queries_path, shard)
        progress.update("retrieving", 0, count, unit="queries")
        write_hits(out, retrieve(idx, queries, s.k, threads, progress), s.k)
        del idx  # its maps, before a temporary folder is removed
    return Path(out)


def bm25_run(
    corpus: Iterable[tuple[str, str]],
    queries: dict[str, str],
    settings: BM25Settings | None = None,
    *,
    method: str = "lucene",
    stopwords: str | Iterable[str] | None = "en",
) -> dict[str, dict[str, float]]:
    """BM25 top-k of each query over (id, text) passages, as ``{qid: {pid: score}}`` (every query
    a key), with ``settings`` (default: ``BM25Settings()``; e.g. ``BM25Settings(k=10)``). The index
    lives in a temporary folder: for corpora that fit in memory and are searched once (``bm25``
    keeps it on disk and streams the run)."""
    s = BM25Settings() if settings is None else settings
    if method != "lucene":
        raise InvalidArgumentError(f"method must be 'lucene' (bm25s's Lucene variant), got {method!r}")
    analysis = _analysis(stopwords, s.stem)
    run: dict[str, dict[str, float]] = {q: {} for q in queries}
    with tempfile.TemporaryDirectory(prefix="dense-pt-bm25-") as tmp:
        with Progress("bm25", "passages") as progress:
            key = index_key(None, analysis, s.k1, s.b)
            idx = build_index(
                corpus, Path(tmp) / "index", analysis=analysis, k1=s.k1, b=s.b, key=key, progress=progress
            )
            progress.update("retrieving", 0, len(queries), unit="queries")
            for chunk in retrieve(idx, queries.items(), s.k, 1, progress):
                run.update(chunk.to_dict())
        del idx
    return run
