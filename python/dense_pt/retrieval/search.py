"""`dense-pt search`: exact top-k search of query embeddings over passage embeddings with faiss.

``metric="ip"`` is the inner product, ``"cosine"`` L2-normalises both sides first. The passage
embeddings are searched in chunks of at most ``max_memory_gb`` (as float32, what faiss needs),
one flat index per chunk, and the per-chunk top-k lists are merged; when everything fits, it is
one chunk. A GPU index is used when faiss was built with GPU support and a GPU is visible.

faiss scores in float32, and its rounding depends on the kernel it picks for a chunk's shape (and
on the CPU or GPU), so two near-equal passages can swap places between a chunked and a one-shot
search. The result must not depend on the memory budget or the machine, so faiss only proposes
candidates (``k`` plus a margin per chunk) and the final candidates are rescored in float64 from the
stored vectors, one fixed-order dot product per pair, then ranked by (score desc, corpus row asc)
in ``search_arrays``; ``search`` / ``search_file`` break ties by passage id descending instead (the
run file's rule), so that searches of passage shards merge into exactly the whole corpus's top-k.
Without faiss (a machine with torch but not the retrieval extra, as the lent GPU machines), NumPy's
float32 products propose the candidates instead; the float64 rescoring makes the result the same.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from dense_pt.config.retrieval import SearchSettings
from dense_pt.errors import InvalidArgumentError, MismatchError
from dense_pt.progress import Progress
from dense_pt.retrieval.encode import Embeddings

METRICS = ("ip", "cosine")


def _faiss() -> Any:
    """faiss, or None where it is not installed (a machine with torch but not the retrieval extra:
    the exact products are then taken with NumPy, ``_numpy_top``)."""
    try:
        import faiss
    except ImportError:
        return None
    return faiss


def _gpu_resources():  # pragma: no cover - needs faiss-gpu and a GPU
    faiss = _faiss()
    if faiss is not None and hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0:
        return faiss.StandardGpuResources()
    return None


def _numpy_top(queries: np.ndarray, passages: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """faiss's flat inner-product search without faiss: the float32 products of a block of queries
    at a time, the ``k`` best of each row (unordered ties are settled by ``rescore`` later)."""
    k = min(k, passages.shape[0])
    scores = np.empty((len(queries), k), dtype=np.float32)
    rows = np.empty((len(queries), k), dtype=np.int64)
    for a in range(0, len(queries), 1024):
        prod = queries[a : a + 1024] @ passages.T
        top = np.argpartition(-prod, k - 1, axis=1)[:, :k]
        part = np.take_along_axis(prod, top, axis=1)
        order = np.argsort(-part, axis=1, kind="stable")
        rows[a : a + 1024] = np.take_along_axis(top, order, axis=1)
        scores[a : a + 1024] = np.take_along_axis(part, order, axis=1)
    return scores, rows


def _search_chunk(queries: np.ndarray, passages: np.ndarray, k: int, gpu) -> tuple[np.ndarray, np.ndarray]:
    faiss = _faiss()
    if faiss is None:
        return _numpy_top(queries, passages, k)
    index: Any = faiss.IndexFlatIP(passages.shape[1])  # a GPU index when gpu is given
    if gpu is not None:  # pragma: no cover
        index = faiss.index_cpu_to_gpu(gpu, 0, index)
    index.add(passages)
    return index.search(queries, min(k, passages.shape[0]))


def _prep(x: np.ndarray, metric: str) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    if metric == "cosine":
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        x = x / np.maximum(norms, 1e-12)
    return x


def merge_topk(
    scores: np.ndarray, rows: np.ndarray, new_scores: np.ndarray, new_rows: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Merge two [nq, *] candidate lists into the top k by (score desc, row asc)."""
    s = np.concatenate([scores, new_scores], axis=1)
    r = np.concatenate([rows, new_rows], axis=1)
    r_key = np.where(r < 0, np.iinfo(np.int64).max, r)
    order = np.lexsort((r_key, -s), axis=-1) if s.size else np.zeros_like(r)
    order = order[:, :k]
    return np.take_along_axis(s, order, 1), np.take_along_axis(r, order, 1)


def candidate_margin(k: int) -> int:
    """Extra candidates taken from faiss beyond ``k``: room for float32 near-ties at the cut-off."""
    return max(16, k // 10)


def _gather(shards: list[np.ndarray], offsets: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """float64 vectors of the (unique, sorted) global ``rows``."""
    out = np.empty((len(rows), shards[0].shape[1]), dtype=np.float64)
    which = np.searchsorted(offsets, rows, side="right") - 1
    for s in np.unique(which):
        sel = which == s
        out[sel] = shards[s][rows[sel] - offsets[s]]
    return out


def _dot_pairs(cands: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Scores [nq, m] of candidate vectors [nq, m, d] against their queries [nq, d]. einsum
    (optimize off) runs one contiguous loop over d per pair, so a pair's result depends on neither
    its position nor the array's shape, unlike BLAS kernels, which pick their accumulation order
    by shape (tests/test_retrieval.py checks it)."""
    return np.einsum("qmd,qd->qm", cands, queries, optimize=False)


def _norms(x: np.ndarray) -> np.ndarray:
    return np.sqrt(np.einsum("nd,nd->n", x, x, optimize=False))[:, None]


def rescore(
    queries: np.ndarray,
    shards: list[np.ndarray],
    rows: np.ndarray,
    k: int,
    metric: str = "ip",
    max_block_bytes: int = 1 << 27,
    tie_key: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of the candidate ``rows`` [nq, m] (-1 = none) by exact float64 scores, ties by row
    (or by ``tie_key[row]`` ascending).

    Each score is one dot product over the dimension in a fixed order, so it depends only on the
    two vectors, not on how the candidates were found."""
    offsets = np.cumsum([0] + [len(s) for s in shards])
    dim = queries.shape[1]
    q = queries.astype(np.float64)
    if metric == "cosine":
        q /= np.maximum(_norms(q), 1e-12)
    out_s = np.full((len(q), min(k, rows.shape[1])), -np.inf)
    out_r = np.full(out_s.shape, -1, dtype=np.int64)
    if rows.size == 0:
        return out_s, out_r
    block = max(1, max_block_bytes // max(1, rows.shape[1] * dim * 8))
    for a in range(0, len(q), block):
        r = rows[a : a + block]
        valid = r >= 0
        uniq, inv = np.unique(np.where(valid, r, 0), return_inverse=True)
        vecs = _gather(shards, offsets, uniq)
        if metric == "cosine":
            vecs /= np.maximum(_norms(vecs), 1e-12)
        s = np.where(valid, _dot_pairs(vecs[inv.reshape(r.shape)], q[a : a + block]), -np.inf)
        tie = r if tie_key is None else tie_key[np.where(valid, r, 0)]
        key = np.where(valid, tie, np.iinfo(np.int64).max)
        order = np.lexsort((key, -s), axis=-1)[:, : out_s.shape[1]]
        out_s[a : a + block] = np.take_along_axis(s, order, 1)
        out_r[a : a + block] = np.take_along_axis(np.where(valid, r, -1), order, 1)
    return out_s, out_r


def search_arrays(
    queries: np.ndarray,
    shards: list[np.ndarray],
    k: int,
    metric: str = "ip",
    max_memory_gb: float | None = None,
    use_gpu: bool | None = None,
    tie_key: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k (float64 scores, global row indices) of each query over the concatenated ``shards``;
    equal scores are ordered by row, or by ``tie_key[row]`` ascending (``id_tie_key``: by passage
    id descending, the evaluation's rule, which makes the top-k of passage shards merge exactly)."""
    if metric not in METRICS:
        raise InvalidArgumentError(f"metric must be one of {METRICS}, got {metric!r}")
    if k < 1:
        raise InvalidArgumentError(f"k must be >= 1, got {k}")
    check_memory(max_memory_gb)
    q = _prep(queries, metric)
    dim = q.shape[1]
    for sh in shards:
        if sh.shape[1] != dim:
            raise MismatchError(f"query dim {dim} differs from passage dim {sh.shape[1]}")
    gpu = _gpu_resources() if use_gpu in (None, True) else None
    total = sum(len(s) for s in shards)
    budget = max(1, total) if max_memory_gb is None else max(1, int(max_memory_gb * 1e9 // (4 * dim)))
    best_s = np.full((len(q), 0), -np.inf, dtype=np.float32)
    best_r = np.full((len(q), 0), -1, dtype=np.int64)
    m = k + candidate_margin(k)
    base = 0
    with Progress("search", "passages") as progress:
        progress.update("searching", 0, total)
        for sh in shards:
            for a in range(0, len(sh), budget):
                chunk = _prep(sh[a : a + budget], metric)
                s, r = _search_chunk(q, chunk, m, gpu)
                r = np.where(r < 0, -1, r + base + a)
                best_s, best_r = merge_topk(best_s, best_r, s, r, m)
                progress.update("searching", base + a + len(chunk), total)
            base += len(sh)
        progress.update("rescoring", 0, len(q), unit="queries")
        result = rescore(queries, shards, best_r, k, metric, tie_key=tie_key)
        progress.update("rescoring", len(q), len(q))
    return result


def check_memory(max_memory_gb: float | None) -> None:
    if max_memory_gb is not None and not (math.isfinite(max_memory_gb) and max_memory_gb > 0):
        raise InvalidArgumentError(
            f"max_memory_gb (--max-memory-gb) must be a positive number of GB, got {max_memory_gb}"
        )


def _searched(
    query_emb: str | Path, passage_emb: str | Path, s: SearchSettings
) -> tuple[list[str], pa.Array, np.ndarray, np.ndarray]:
    """(query ids, passage ids, scores [nq, k], passage rows [nq, k]) of a search of two encode
    folders."""
    metric = s.metric
    qe = Embeddings.open(query_emb, "queries", "the first argument (query embeddings)")
    pe = Embeddings.open(passage_emb, "passages", "the second argument (passage embeddings)")
    if qe.manifest["settings"]["model_hash"] != pe.manifest["settings"]["model_hash"]:
        raise MismatchError(f"{query_emb} and {passage_emb} were encoded by different models")
    if metric is None:
        metric = "cosine" if pe.normalized else "ip"
    qids, q = qe.load_all()
    pids: list[pa.Array] = []
    shards = []
    for i in range(pe.num_shards):
        ids, emb = pe.shard(i)
        pids.append(pa.array(ids, pa.utf8()))
        shards.append(emb)
    ids = pa.concat_arrays(pids) if pids else pa.array([], pa.utf8())
    scores, rows = search_arrays(q, shards, s.k, metric, s.max_memory_gb, tie_key=id_tie_key(ids))
    return qids, ids, scores, rows


def id_tie_key(ids: pa.Array) -> np.ndarray:
    """Per row, a key that orders rows by passage id descending (``rank_hits``' rule): a search cut
    at k this way keeps, among passages tied at the cut, the ones a run file ranks first, so the
    top-k of passage shards merged (``dense-pt runs merge``) is the top-k of the whole corpus."""
    import pyarrow.compute as pc

    key = np.empty(len(ids), dtype=np.int64)
    key[pc.sort_indices(ids).to_numpy()] = -np.arange(len(ids), dtype=np.int64)
    return key


def search(
    query_emb: str | Path,
    passage_emb: str | Path,
    out: str | Path | None,
    settings: SearchSettings | None = None,
    *,
    tag: str = "dense-pt",
) -> dict[str, dict[str, float]]:
    """Search encode outputs with ``settings`` (default: ``SearchSettings()``; e.g.
    ``SearchSettings(k=100)``); write the run to ``out`` (if given: Arrow or TREC by its name) and
    return it as ``{qid: {pid: score}}`` (for small runs: ``search_file`` writes without building
    the dict)."""
    s = SearchSettings() if settings is None else settings
    qids, pids, scores, rows = _searched(query_emb, passage_emb, s)
    if out is not None:
        write_arrays(out, qids, pids, scores, rows, tag, depth=s.k)
    return run_from_arrays(qids, pids.to_pylist(), scores, rows)


def search_file(
    query_emb: str | Path,
    passage_emb: str | Path,
    out: str | Path,
    settings: SearchSettings | None = None,
    *,
    tag: str = "dense-pt",
) -> WrittenRun:
    """``search`` that only writes the run (``dense-pt search``, the pipeline): the hits go from
    the score arrays to the file a chunk of queries at a time, never through Python objects."""
    s = SearchSettings() if settings is None else settings
    qids, pids, scores, rows = _searched(query_emb, passage_emb, s)
    hits = write_arrays(out, qids, pids, scores, rows, tag, depth=s.k)
    return WrittenRun(Path(out), len(qids), hits)


class WrittenRun(NamedTuple):
    """A run ``search_file`` wrote: where, how many queries were searched, how many rows."""

    out: Path
    queries: int
    hits: int


def write_arrays(out: str | Path, qids: list[str], pids: pa.Array, scores: np.ndarray, rows: np.ndarray,
                 tag: str = "dense-pt", chunk_queries: int = 4096, depth: int | None = None) -> int:  # fmt: skip
    """``search_arrays``' output written as a run (rows of -1 dropped; ranked as ``rank_hits``).
    ``depth``: the k searched for (default: the arrays' width), recorded in an Arrow run: a shard
    with fewer passages than k lists them all, so its merge is exact to k."""
    from dense_pt.runs import RunWriter

    if depth is None and rows.ndim == 2:
        depth = int(rows.shape[1])
    with RunWriter(out, tag=tag, ids=pids, depth=depth) as w:
        for a in range(0, len(qids), chunk_queries):
            r, sc = rows[a : a + chunk_queries], scores[a : a + chunk_queries]
            valid = r >= 0
            offsets = np.concatenate([[0], np.cumsum(valid.sum(axis=1))])
            w.write(qids[a : a + chunk_queries], offsets, r[valid], sc[valid])
    return w.rows


def run_from_arrays(
    qids: list[str], pids: Sequence[str], scores: np.ndarray, rows: np.ndarray
) -> dict[str, dict[str, float]]:
    """``{qid: {pid: score}}`` from search_arrays' output (rows of -1 dropped)."""
    return {
        q: {pids[r]: float(s) for s, r in zip(scores[i], rows[i], strict=True) if r >= 0}
        for i, q in enumerate(qids)
    }


class PairScorer:
    """Scores of (query id, passage id) pairs, computed exactly as ``search`` scores its hits
    (float64, one fixed-order dot product per pair, both sides normalised for ``cosine``), so a
    pair the search returned gets the same score, to the bit. Mining uses it for the positives a
    run does not contain. A pair naming an unknown id scores NaN."""

    def __init__(
        self, qids: list[str], queries: np.ndarray, pids: list[str], passages: list[np.ndarray], metric: str
    ):
        if metric not in METRICS:
            raise InvalidArgumentError(f"metric must be one of {METRICS}, got {metric!r}")
        self.metric, self.queries, self.shards = metric, queries, passages
        self.offsets = np.cumsum([0] + [len(s) for s in passages])
        self.q_index = {q: i for i, q in enumerate(qids)}
        self.p_index = {p: i for i, p in enumerate(pids)}

    @classmethod
    def open(cls, query_emb: str | Path, passage_emb: str | Path, metric: str | None = None) -> PairScorer:
        """Over two ``dense-pt encode`` folders; ``metric`` as in ``search`` (default: cosine if the
        passages are normalised, else ip)."""
        qe = Embeddings.open(query_emb, "queries", "--query-embeddings")
        pe = Embeddings.open(passage_emb, "passages", "--passage-embeddings")
        if qe.manifest["settings"]["model_hash"] != pe.manifest["settings"]["model_hash"]:
            raise MismatchError(f"{query_emb} and {passage_emb} were encoded by different models")
        qids, q = qe.load_all()
        pids: list[str] = []
        shards = []
        for i in range(pe.num_shards):
            ids, emb = pe.shard(i)
            pids.extend(ids)
            shards.append(emb)
        return cls(qids, q, pids, shards, metric or ("cosine" if pe.normalized else "ip"))

    def __call__(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        out = np.full(len(pairs), np.nan)
        known = [
            (i, self.q_index[q], self.p_index[p])
            for i, (q, p) in enumerate(pairs)
            if q in self.q_index and p in self.p_index
        ]
        if not known:
            return out
        at, qi, pi = (np.asarray(x, dtype=np.int64) for x in zip(*known, strict=True))
        q = self.queries[qi].astype(np.float64)
        uniq, inv = np.unique(pi, return_inverse=True)
        p = _gather(self.shards, self.offsets, uniq)[inv]
        if self.metric == "cosine":
            q /= np.maximum(_norms(q), 1e-12)
            p /= np.maximum(_norms(p), 1e-12)
        out[at] = _dot_pairs(p[:, None, :], q)[:, 0]
        return out
