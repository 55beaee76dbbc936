"""`dense-pt search`: exact top-k search of query embeddings over passage embeddings with faiss.

``metric="ip"`` is the inner product, ``"cosine"`` L2-normalises both sides first. The passage
embeddings are searched in chunks of at most ``max_memory_gb`` (as float32, what faiss needs),
one flat index per chunk, and the per-chunk top-k lists are merged; when everything fits, it is
one chunk. Results are ordered by score, ties by corpus row, so the chunked and one-shot paths
agree. A GPU index is used when faiss was built with GPU support and a GPU is visible.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from dense_pt.errors import InvalidArgumentError, MismatchError
from dense_pt.evaluation.trec import write_run
from dense_pt.retrieval.encode import Embeddings

METRICS = ("ip", "cosine")


def _gpu_resources():  # pragma: no cover - needs faiss-gpu and a GPU
    import faiss

    if hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0:
        return faiss.StandardGpuResources()
    return None


def _search_chunk(queries: np.ndarray, passages: np.ndarray, k: int, gpu) -> tuple[np.ndarray, np.ndarray]:
    import faiss

    index = faiss.IndexFlatIP(passages.shape[1])
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


def search_arrays(
    queries: np.ndarray,
    shards: list[np.ndarray],
    k: int,
    metric: str = "ip",
    max_memory_gb: float | None = None,
    use_gpu: bool | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k (scores, global row indices) of each query over the concatenated ``shards``."""
    if metric not in METRICS:
        raise InvalidArgumentError(f"metric must be one of {METRICS}, got {metric!r}")
    if k < 1:
        raise InvalidArgumentError(f"k must be >= 1, got {k}")
    q = _prep(queries, metric)
    dim = q.shape[1]
    for sh in shards:
        if sh.shape[1] != dim:
            raise MismatchError(f"query dim {dim} differs from passage dim {sh.shape[1]}")
    gpu = _gpu_resources() if use_gpu in (None, True) else None
    total = sum(len(s) for s in shards)
    budget = total if max_memory_gb is None else max(1, int(max_memory_gb * 1e9 // (4 * dim)))
    best_s = np.full((len(q), 0), -np.inf, dtype=np.float32)
    best_r = np.full((len(q), 0), -1, dtype=np.int64)
    base = 0
    for sh in shards:
        for a in range(0, len(sh), budget):
            chunk = _prep(sh[a : a + budget], metric)
            s, r = _search_chunk(q, chunk, k, gpu)
            r = np.where(r < 0, -1, r + base + a)
            best_s, best_r = merge_topk(best_s, best_r, s, r, k)
        base += len(sh)
    return best_s, best_r


def search(
    query_emb: str | Path,
    passage_emb: str | Path,
    out: str | Path | None,
    k: int = 1000,
    metric: str | None = None,
    max_memory_gb: float | None = None,
    tag: str = "dense-pt",
) -> dict[str, dict[str, float]]:
    """Search encode outputs; write a TREC run to ``out`` (if given) and return it."""
    qe, pe = Embeddings.open(query_emb), Embeddings.open(passage_emb)
    if qe.manifest["settings"]["model_hash"] != pe.manifest["settings"]["model_hash"]:
        raise MismatchError(f"{query_emb} and {passage_emb} were encoded by different models")
    if metric is None:
        metric = "cosine" if pe.normalized else "ip"
    qids, q = qe.load_all()
    pids: list[str] = []
    shards = []
    for i in range(pe.num_shards):
        ids, emb = pe.shard(i)
        pids.extend(ids)
        shards.append(emb)
    scores, rows = search_arrays(q, shards, k, metric, max_memory_gb)
    run: dict[str, dict[str, float]] = {}
    for i, qid in enumerate(qids):
        run[qid] = {pids[r]: float(s) for s, r in zip(scores[i], rows[i], strict=True) if r >= 0}
    if out is not None:
        write_run(out, run, tag)
    return run


def run_from_arrays(
    qids: list[str], pids: list[str], scores: np.ndarray, rows: np.ndarray
) -> Mapping[str, dict[str, float]]:
    return {
        q: {pids[r]: float(s) for s, r in zip(scores[i], rows[i], strict=True) if r >= 0}
        for i, q in enumerate(qids)
    }
