"""Hard-negative mining from a run, and the negatives file (binary, read and written in Rust).

Mining, per judged query (the options carry sentence-transformers' ``mine_hard_negatives`` names
where the meaning is the same; docs/finetune.md maps every option):

1. the run's hits ordered by score (ties by docid);
2. the **pool**: ``"rank"`` keeps the hits ranked 1..``depth`` (the SimLM authors' code takes the
   retriever's top ``depth``, then drops the positives; the default), ``"rank+positives"`` the hits
   ranked 1..``depth + P`` with P the largest number of positives a query has, of which at most
   ``depth`` survive the steps below (sentence-transformers' ``range_max``), ``"filtered"`` the
   whole run, of which the first ``depth`` survivors are kept;
3. every judged positive (relevance > 0) removed **by id**;
4. optional false-negative filters against the query's positive score ``s+`` (the lowest score
   among its judged positives; given by ``positive_scores``, else the run, else computed by
   ``scorer`` when the positive is not in the run): ``absolute_margin`` keeps a candidate only if
   ``score + absolute_margin <= s+``; ``relative_margin`` only if ``score <= s+ - |s+| * R``
   (``relative_form="magnitude"``: sentence-transformers since the fix of its issue #3819, as in
   the 6.2 installed here) or ``score <= s+ * (1 - R)`` (``"signed"``: sentence-transformers before
   that fix, and NV-Retriever's TopK-PercPos; for s+ < 0 it keeps candidates scoring above the
   positive); the two agree when s+ >= 0; ``max_score`` / ``min_score`` drop candidates above /
   below them;
5. the first ``depth`` survivors, minus the first ``skip_top`` of them (``range_min``);
6. ``num`` of those (0: all): the top ones (``sampling="top"``) or a uniform sample without
   replacement drawn from a stream seeded by (seed, query id) (``"random"``), kept in rank order.

A query with a margin filter whose positive is missing from the run needs that positive's score:
with no ``scorer`` (``PairScorer`` over the run's embeddings) mining stops with an error rather than
skip the filter.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dense_pt import artifacts
from dense_pt.artifacts.checksums import file_digest
from dense_pt.config.choices import POOLS, RELATIVE_FORMS, SAMPLINGS  # noqa: F401  (the miner's choices, re-exported)
from dense_pt.config.retrieval import MineCommand
from dense_pt.errors import MismatchError
from dense_pt.progress import Progress
from dense_pt.retrieval.miner import MinedNegatives, Miner, Scorer, mined_query_ids
from dense_pt.runs import RunSource, read_run


@dataclass
class NegativesTable:
    """Negatives of each query: ``rows[qid] = [(pid, score), ...]`` in rank order (Python objects:
    for small tables; mining and training at scale use ``MinedNegatives``, the same in CSR arrays)."""

    rows: dict[str, list[tuple[str, float]]]
    stats: dict[str, Any] = field(default_factory=dict)

    def pids(self, qid: str) -> list[str]:
        return [p for p, _ in self.rows.get(qid, [])]


def mine_negatives(
    run: RunSource,
    qrels: Mapping[str, Mapping[str, int]],
    settings: MineCommand | None = None,
    *,
    positive_scores: Mapping[str, Mapping[str, float]] | None = None,
    scorer: Scorer | None = None,
    known_ids: Collection[str] | pa.Array | None = None,
) -> NegativesTable:
    """Mine negatives (see the module docstring) with ``settings`` (default: ``MineCommand()``;
    e.g. ``MineCommand(depth=100, num=30, absolute_margin=0.1)``) as a ``NegativesTable``. ``run``:
    a run file (TREC or Arrow), a ``{qid: {pid: score}}`` mapping or ``RunChunk`` s, read a chunk
    of queries at a time; ``known_ids``: the corpus ids (a set, or an Arrow array such as
    ``CorpusStore.ids``); a run naming any other id is refused. ``mine`` returns the same as
    arrays (what a 500k-query run needs)."""
    mined = mine(run, qrels, settings, positive_scores=positive_scores, scorer=scorer, known_ids=known_ids)
    return NegativesTable(mined.rows(), mined.stats)


def mine(
    run: RunSource,
    qrels: Mapping[str, Mapping[str, int]],
    settings: MineCommand | None = None,
    *,
    positive_scores: Mapping[str, Mapping[str, float]] | None = None,
    scorer: Scorer | None = None,
    known_ids: Collection[str] | pa.Array | None = None,
) -> MinedNegatives:
    """``mine_negatives`` returning ``MinedNegatives`` (CSR arrays; ``write_negatives`` writes
    them): the one miner of ``dense-pt negatives mine``, the pipeline and the ANCE refresh. Streams
    ``run``; memory: a chunk of the run, the judgements, and 8 bytes per negative kept."""
    s = MineCommand() if settings is None else settings
    if known_ids is not None:
        _check_qrels_corpus(qrels, known_ids)
    widen = 0
    if s.pool == "rank+positives":
        # sentence-transformers widens its pool by the largest positive count (of a mined query) so
        # that range_max non-positives remain even where the positives rank first: one pass first
        run = run if isinstance(run, str | Path | Mapping) else list(run)
        mined = mined_query_ids(read_run(run), qrels)
        widen = max((sum(1 for r in qrels[q].values() if r > 0) for q in mined), default=0)
    miner = Miner(s, qrels, widen, positive_scores, scorer, known_ids)
    done = 0
    with Progress("negatives mine", "queries") as progress:
        progress.update("mining", 0)
        for chunk in read_run(run):
            miner.add(chunk)
            done += len(chunk)
            progress.update("mining", done)
    if not miner.any_shared:
        raise MismatchError("the run and the qrels share no query id (qrels for another collection?)")
    return miner.finish()


def _check_qrels_corpus(
    qrels: Mapping[str, Mapping[str, int]], known_ids: Collection[str] | pa.Array
) -> None:
    """A qrels file none of whose judged documents is in the corpus is for another corpus."""
    docs = [d for q in qrels for d in qrels[q]]
    if not docs:
        return
    if isinstance(known_ids, pa.Array | pa.ChunkedArray):
        known = pc.is_in(pa.array(docs, pa.utf8()), value_set=known_ids).to_numpy(zero_copy_only=False)
    else:
        known = np.array([d in known_ids for d in docs], dtype=bool)
    if not known.any():
        raise MismatchError(
            f"no judged document of the qrels is in the corpus (e.g. {docs[0]!r}): is the qrels file for another corpus?"
        )


def write_negatives(path: str | Path, table: NegativesTable | MinedNegatives) -> None:
    """Write the binary negatives file (Rust writer: versioned header, CRC32, atomic)."""
    from dense_pt import _native

    if isinstance(table, MinedNegatives):
        _native.negatives_write_buffers(str(path), *_buffers(pa.array(table.qids, pa.utf8())), *_buffers(table.pids),
                                        table.offsets.astype(np.uint64), table.negatives.astype(np.uint32),
                                        None if table.scores is None else table.scores.astype(np.float32))  # fmt: skip
        return
    qids = list(table.rows)
    pid_index: dict[str, int] = {}
    negs: list[int] = []
    scores: list[float] = []
    offsets = [0]
    for q in qids:
        for p, sc in table.rows[q]:
            negs.append(pid_index.setdefault(p, len(pid_index)))
            scores.append(sc)
        offsets.append(len(negs))
    _native.negatives_write(
        str(path),
        qids,
        list(pid_index),
        np.asarray(offsets, dtype=np.uint64),
        np.asarray(negs, dtype=np.uint32),
        np.asarray(scores, dtype=np.float32),
    )


def read_mined(path: str | Path) -> MinedNegatives:
    """A negatives file as ``MinedNegatives`` (CSR arrays; what the training data path reads)."""
    from dense_pt import _native

    qo, qb, po, pb, offsets, negs, scores = _native.negatives_read_buffers(str(path))
    return MinedNegatives(_strings(qo, qb).to_pylist(), offsets, _strings(po, pb), negs, scores)


def _buffers(ids: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """An Arrow string array as (int64 offsets from 0, UTF-8 bytes), what the Rust side reads."""
    arr = ids.cast(pa.large_string())
    if len(arr) == 0:
        return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.uint8)
    _, off_buf, data = arr.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data_np = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
    return np.ascontiguousarray(offsets - offsets[0]), np.ascontiguousarray(data_np[offsets[0] : offsets[-1]])


def _strings(offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    """The inverse of ``_buffers``: a utf8 Arrow array over the Rust side's buffers."""
    n = len(offsets) - 1
    arr = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))
    return arr.cast(pa.utf8()) if len(data) < (1 << 31) else arr


def read_negatives(path: str | Path, known_ids: Collection[str] | Any | None = None) -> NegativesTable:
    """Read a negatives file (refuses corrupt files); with ``known_ids`` (a set of ids, or a
    ``CorpusStore``, checked in one vectorised lookup), refuse unknown passage ids."""
    from dense_pt import _native

    qids, pids, offsets, negs, scores = _native.negatives_read(str(path))
    if known_ids is not None:
        if hasattr(known_ids, "rows_of"):
            unknown = [p for p, r in zip(pids, known_ids.rows_of(pids).tolist(), strict=True) if r < 0]
        else:
            unknown = [p for p in pids if p not in known_ids]
        if unknown:
            raise MismatchError(f"{path}: names passage {unknown[0]!r}, which is not in the corpus")
    rows = {}
    for i, q in enumerate(qids):
        a, b = int(offsets[i]), int(offsets[i + 1])
        rows[q] = [
            (pids[int(negs[j])], float(scores[j]) if scores is not None else float("nan"))
            for j in range(a, b)
        ]
    return NegativesTable(rows)


def export_text(path: str | Path, out: str | Path) -> None:
    from dense_pt import _native
    from dense_pt.fsutil import atomic_file

    text = _native.negatives_to_text(str(path))
    with atomic_file(out, "w", encoding="utf-8") as f:
        f.write(text)


def write_manifest(
    path: str | Path, run_path: str | Path | None, qrels_path: str | Path | None, params: dict, stats: dict
) -> None:
    """The manifest of negatives file ``path`` (``dense_pt.artifacts.write_beside``): the run and
    qrels it was mined from (their SHA-256, as older manifests recorded them), the settings and
    the counts."""
    head = artifacts.header("negatives", "negatives mine", settings=params, complete=True)
    artifacts.manifest.write_beside(path, head, {
        "run": None if run_path is None else str(run_path),
        "run_sha256": None if run_path is None else file_digest(run_path, "sha256"),
        "qrels": None if qrels_path is None else str(qrels_path),
        "qrels_sha256": None if qrels_path is None else file_digest(qrels_path, "sha256"),
        "stats": stats,
        "file_format": "dense-pt negatives v1 (rust/core/src/negatives.rs)",
    })  # fmt: skip
