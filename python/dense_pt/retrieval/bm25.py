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
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from dense_pt.config.retrieval import BM25Settings
from dense_pt.data.judgements import RunEntry
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
    if shard is None:
        return 0, 1
    if isinstance(shard, str):
        parts = shard.split("/")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise InvalidArgumentError(f"--query-shard must look like I/N (e.g. 0/8), got {shard!r}")
        shard = (int(parts[0]), int(parts[1]))
    i, n = shard
    if not 0 <= i < n:
        raise InvalidArgumentError(f"query shard {i}/{n} is not valid: need 0 <= I < N")
    return i, n


def shard_range(count: int, shard: tuple[int, int]) -> range:
    """Shard i of n: queries ``[i * count // n, (i + 1) * count // n)`` (in file order), so the
    shards' runs concatenated in shard order are the unsharded run."""
    i, n = shard
    return range(i * count // n, (i + 1) * count // n)


@dataclass
class HitChunk:
    """The hits of a chunk of queries, column by column: query ``qids[i]``'s are
    ``pids[offsets[i]:offsets[i + 1]]`` with their ``scores``, best first."""

    qids: list[str]
    pids: list[str]
    scores: np.ndarray
    offsets: np.ndarray

    def entries(self) -> Iterator[RunEntry]:
        scores, bounds = self.scores.tolist(), self.offsets.tolist()
        for i, qid in enumerate(self.qids):
            for rank, j in enumerate(range(bounds[i], bounds[i + 1]), start=1):
                yield RunEntry(qid, self.pids[j], rank, scores[j], TAG)


def retrieve(
    index: BM25Index,
    queries: Iterable[tuple[str, str]],
    k: int,
    threads: int = 1,
    progress: Progress | None = None,
) -> Iterator[HitChunk]:
    """The run of ``(qid, text)`` queries, chunk by chunk: each query's hits best first (a query
    without any matching term has none)."""
    chunk = max(1, min(4096, HITS_PER_CHUNK // k))
    it, done = iter(queries), 0
    while batch := list(islice(it, chunk)):
        docs, scores, offsets = index.search([t for _, t in batch], k, threads)
        yield HitChunk([q for q, _ in batch], index.pids(docs), scores, offsets)
        done += len(batch)
        if progress is not None:
            progress.update("retrieving", done, progress.total, unit="queries")


def write_hits(out: str | Path, chunks: Iterable[HitChunk], k: int | None = None) -> int:
    """Write a run as it is produced, a chunk of queries at a time, through ``RunWriter`` (Arrow
    for an ``.arrow`` name, TREC text otherwise; tied scores in trec_eval's order, as every run);
    returns the row count. ``k``: the depth the hits were cut to, recorded in an Arrow run."""
    from dense_pt.data.runs import RunWriter

    with RunWriter(out, tag=TAG, depth=k) as w:
        for c in chunks:
            w.write(c.qids, c.offsets, c.pids, c.scores)
    return w.rows


def _analysis(stopwords: str | Iterable[str] | None, stem: bool) -> Analysis:
    return Analysis(stopword_list(stopwords), stem)


def bm25_index(
    corpus_path: str | Path,
    index: str | Path | None = None,
    stopwords: str | Iterable[str] | None = "en",
    progress: Progress | None = None,
    **settings: Any,
) -> BM25Index:
    """The index of a corpus file (built, or opened when one with the same key exists at
    ``index``; default: in dense-pt's cache, see ``bm25_index.index_folder``); ``settings`` are
    ``BM25Settings``' fields."""
    s = BM25Settings(**settings)
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
    *,
    index: str | Path | None = None,
    threads: int | None = None,
    query_shard: str | tuple[int, int] | None = None,
    **settings: Any,
) -> Path:
    """The BM25 run of a queries file over a corpus file, written to ``out`` (Arrow for an
    ``.arrow`` name, TREC text otherwise) as it is searched; ``settings`` are ``BM25Settings``' fields."""
    s = BM25Settings(**settings)
    shard = parse_query_shard(query_shard)
    threads = default_threads() if threads is None else threads
    if threads < 1:
        raise InvalidArgumentError(f"threads must be >= 1, got {threads}")
    with Progress("bm25", "passages") as progress, index_folder(corpus_path, index, out) as where:
        idx = bm25_index(corpus_path, where, progress=progress, **s.model_dump())
        queries, count = _queries(queries_path, shard)
        progress.update("retrieving", 0, count, unit="queries")
        write_hits(out, retrieve(idx, queries, s.k, threads, progress), s.k)
        del idx  # its maps, before a temporary folder is removed
    return Path(out)


def bm25_run(
    corpus: Iterable[tuple[str, str]],
    queries: dict[str, str],
    method: str = "lucene",
    stopwords: str | Iterable[str] | None = "en",
    **settings: Any,
) -> dict[str, dict[str, float]]:
    """BM25 top-k of each query over (id, text) passages, as ``{qid: {pid: score}}`` (every query
    a key); ``settings`` are ``BM25Settings``' fields (``k``, ``k1``, ``b``, ``stem``: defaults and
    checks there). The index lives in a temporary folder: for corpora that fit in memory and are
    searched once (``bm25`` keeps it on disk and streams the run)."""
    s = BM25Settings(**settings)
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
                for e in chunk.entries():
                    run[e.qid][e.pid] = e.score
        del idx
    return run
