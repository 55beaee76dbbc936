"""TREC run text, ``qid Q0 docid rank score tag``: the export every evaluation tool reads.

Scores are written with ``format_score`` (``repr``), which reads back as the same float64. The
reader checks each line (6 columns, the ids rule, an integer rank >= 0, a finite score) and a
passage listed twice for one query, naming the line."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from dense_pt.data.ids import check_id
from dense_pt.data.lines import first_line, int_field, iter_lines
from dense_pt.errors import FormatError
from dense_pt.runs.chunk import Locate, RunChunk

DEFAULT_TAG = "dense-pt"


def format_score(score: float) -> str:
    """The shortest text that reads back as the same float64 (``repr``): a written run keeps every
    score bit for bit, so no ties appear that the scores in memory did not have."""
    return repr(float(score))


def trec_lines(qids: pa.Array, docids: pa.Array, scores: np.ndarray, ranks: np.ndarray, tag: str) -> str:
    """Rows (one query id per row) as TREC run lines, scores by ``format_score``."""
    tail = f" {tag}\n"
    return "".join(
        f"{q} Q0 {d} {r} {s!r}{tail}"
        for q, d, r, s in zip(
            qids.to_pylist(), docids.to_pylist(), ranks.tolist(), scores.tolist(), strict=True
        )
    )


def trec_tag(path: Path) -> str:
    """The first line's last column (``DEFAULT_TAG`` when the file has no such line)."""
    head = first_line(path)
    cols = head.split() if head else []
    return cols[5] if len(cols) == 6 else DEFAULT_TAG


def trec_rows(path: Path, max_record_bytes: int | None = None) -> Iterator[tuple[int, str, str, int, float]]:
    """``(line, qid, docid, rank, score)`` of each line, every field checked."""
    for lineno, line in iter_lines(path, max_record_bytes):
        cols = line.split()
        if len(cols) != 6:
            raise FormatError(
                f"expected 6 whitespace-separated columns (qid Q0 pid rank score tag), found {len(cols)}",
                path=path,
                line=lineno,
            )
        qid, _, pid, rank_s, score_s, _tag = cols
        check_id(qid, "query id", path, lineno)  # split() leaves no whitespace: a control character
        check_id(pid, "passage id", path, lineno)
        rank = int_field(rank_s, "rank", path, lineno, low=0)
        try:
            score = float(score_s)
        except ValueError:
            raise FormatError(f"score must be a number, found {score_s!r}", path=path, line=lineno) from None
        if not math.isfinite(score):
            # inf would rank above every real score (and -inf below), silently: refused like NaN.
            raise FormatError(f"score must be a finite number, found {score_s!r}", path=path, line=lineno)
        yield lineno, qid, pid, rank, score


class _Pending:
    """The rows of the queries read since the last chunk."""

    def __init__(self) -> None:
        self.qids: list[str] = []
        self.offsets = [0]
        self.docs: list[str] = []
        self.scores: list[float] = []
        self.ranks: list[int] = []
        self.lines: list[int] = []

    def chunk(self) -> tuple[RunChunk, Locate]:
        chunk = RunChunk(pa.array(self.qids, pa.utf8()), np.asarray(self.offsets, dtype=np.int64),
                         pa.array(self.docs, pa.utf8()), np.asarray(self.scores, dtype=np.float64),
                         np.asarray(self.ranks, dtype=np.int64))  # fmt: skip
        at = np.asarray(self.lines, dtype=np.int64)
        return chunk, lambda row: (int(at[row]), "")


def trec_chunks(
    path: Path, chunk_rows: int, max_record_bytes: int | None = None
) -> Iterator[tuple[RunChunk, Locate]]:
    """A TREC run in chunks of whole queries (about ``chunk_rows`` rows), each with where its
    rows are in the file; a passage listed twice for one query is refused here (a query listed
    again later is the caller's check: it spans chunks)."""
    p = _Pending()
    in_query: dict[str, int] = {}  # the current query's passages and their lines
    for lineno, qid, pid, rank, score in trec_rows(path, max_record_bytes):
        if not p.qids or qid != p.qids[-1]:
            if p.qids:
                p.offsets.append(len(p.docs))
                if len(p.docs) >= chunk_rows:
                    yield p.chunk()
                    p = _Pending()
            p.qids.append(qid)
            in_query = {}
        first = in_query.setdefault(pid, lineno)
        if first != lineno:
            raise FormatError(
                f"passage {pid!r} is ranked twice for query {qid!r} (first on line {first})",
                path=path,
                line=lineno,
            )
        p.docs.append(pid)
        p.scores.append(score)
        p.ranks.append(rank)
        p.lines.append(lineno)
    if p.qids:
        p.offsets.append(len(p.docs))
        yield p.chunk()
