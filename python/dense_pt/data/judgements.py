"""Streaming readers for relevance judgements (qrels) and ranked runs, and a run writer.

Qrels formats (auto-detected from the first line; ``format=`` overrides):
- ``trec``: ``qid 0 pid rel`` (whitespace-separated, 4 columns; the second column is ignored, "0" or
  "Q0" in practice). TREC DL graded judgements (0-3) are kept as they are, zeros included.
- ``beir``: ``query-id<TAB>corpus-id<TAB>score`` with that header line (a headerless 3-column tsv is
  read the same way).

Runs: the TREC run format ``qid Q0 pid rank score tag`` (6 whitespace-separated columns) or an
Arrow run; ``dense_pt.data.runs`` holds both formats and the chunked reader and writer the stages
use; ``read_run`` / ``load_run`` / ``write_run`` here are built on it.

Judgements naming an id that is not among ``query_ids`` / ``corpus_ids`` (when given) are kept and
counted; at the end a ``DataWarning`` reports the count. With ``strict=True`` the first such line is a
FormatError instead.
"""

from __future__ import annotations

import errno
import math
import warnings
from collections.abc import Container, Iterable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from dense_pt.config.choices import DEFAULT_TIE_BREAK, TIE_BREAKS
from dense_pt.data.ids import check_id, id_problem
from dense_pt.data.lines import first_line, iter_lines
from dense_pt.data.unique import UniqueIds
from dense_pt.errors import DataWarning, FormatError, InvalidArgumentError, io_error
from dense_pt.fsutil import atomic_file

QREL_FORMATS = ("trec", "beir")
BEIR_HEADER = ("query-id", "corpus-id", "score")


class Judgement(NamedTuple):
    qid: str
    pid: str
    rel: int


class RunEntry(NamedTuple):
    qid: str
    pid: str
    rank: int
    score: float
    tag: str


def detect_qrels_format(path: str | Path) -> str:
    head = first_line(path)
    if head is None:
        raise FormatError("file is empty", path=path)
    cols = head.split("\t") if "\t" in head else head.split()
    if tuple(c.strip().lower() for c in cols) == BEIR_HEADER or len(cols) == 3:
        return "beir"
    if len(cols) == 4:
        return "trec"
    raise FormatError(
        f"cannot tell the qrels format from the first line ({len(cols)} columns); expected TREC "
        "'qid 0 pid rel' (4 columns) or BEIR 'query-id<TAB>corpus-id<TAB>score'",
        path=path,
        line=1,
    )


# Relevance grades and ranks are 32-bit integers (trec_eval's, pytrec_eval's): 1e20 is not a grade.
INT32 = (-(2**31), 2**31 - 1)


def _int(value: str, what: str, path: Path, lineno: int, low: int = INT32[0]) -> int:
    try:
        number = int(value)
    except ValueError:
        raise FormatError(f"{what} must be an integer, found {value!r}", path=path, line=lineno) from None
    if not low <= number <= INT32[1]:
        raise FormatError(
            f"{what} must be an integer from {low:,} to {INT32[1]:,}, found {value!r}", path=path, line=lineno
        )
    return number


def read_qrels(
    path: str | Path,
    format: str | None = None,
    query_ids: Container[str] | None = None,
    corpus_ids: Container[str] | None = None,
    strict: bool = False,
    max_record_bytes: int | None = None,
) -> Iterator[Judgement]:
    """Stream judgements. Errors: wrong column count, non-integer relevance, a repeated (qid, pid)
    pair, invalid UTF-8; unknown ids warn (or fail with ``strict``)."""
    path = Path(path)
    if path.is_dir():
        raise io_error(
            errno.EISDIR, f"{path}: expected a qrels file (e.g. <beir>/qrels/test.tsv), found a folder", path
        )
    if format is not None and format not in QREL_FORMATS:
        raise InvalidArgumentError(
            f"unknown qrels format {format!r}; expected one of {', '.join(QREL_FORMATS)}"
        )
    fmt = format or detect_qrels_format(path)
    seen: dict[tuple[str, str], int] = {}
    unknown = 0
    first = True
    for lineno, line in iter_lines(path, max_record_bytes):
        if fmt == "beir":
            cols = line.split("\t")
            if first and tuple(c.strip().lower() for c in cols) == BEIR_HEADER:
                first = False
                continue
            if len(cols) != 3:
                raise FormatError(
                    f"expected 3 tab-separated columns (query-id, corpus-id, score), found {len(cols)}",
                    path=path,
                    line=lineno,
                )
            qid, pid, rel_s = (c.strip() for c in cols)
        else:
            cols = line.split()
            if len(cols) != 4:
                raise FormatError(
                    f"expected 4 whitespace-separated columns (qid 0 pid rel), found {len(cols)}",
                    path=path,
                    line=lineno,
                )
            qid, _, pid, rel_s = cols
        first = False
        if not qid or not pid:
            raise FormatError("empty query or passage id", path=path, line=lineno)
        check_id(qid, "query id", path, lineno)
        check_id(pid, "passage id", path, lineno)
        rel = _int(rel_s, "relevance", path, lineno)
        prev = seen.setdefault((qid, pid), lineno)
        if prev != lineno:
            raise FormatError(
                f"duplicate judgement for query {qid!r} and passage {pid!r} (first on line {prev})",
                path=path,
                line=lineno,
            )
        bad_q = query_ids is not None and qid not in query_ids
        bad_p = corpus_ids is not None and pid not in corpus_ids
        if bad_q or bad_p:
            if strict:
                what = f"query id {qid!r}" if bad_q else f"passage id {pid!r}"
                raise FormatError(f"judgement for an unknown {what}", path=path, line=lineno)
            unknown += 1
        yield Judgement(qid, pid, rel)
    if unknown:
        warnings.warn(
            DataWarning(
                f"{path}: {unknown} judgement(s) name a query or passage id that is not in the given "
                "queries/corpus (kept; use strict to refuse them)"
            ),
            stacklevel=2,
        )


def load_qrels(
    path: str | Path,
    format: str | None = None,
    query_ids: Container[str] | None = None,
    corpus_ids: Container[str] | None = None,
    strict: bool = False,
    max_record_bytes: int | None = None,
) -> dict[str, dict[str, int]]:
    """All judgements as ``{qid: {pid: rel}}`` (the shape pytrec_eval and ir_measures take)."""
    out: dict[str, dict[str, int]] = {}
    for j in read_qrels(path, format, query_ids, corpus_ids, strict, max_record_bytes):
        out.setdefault(j.qid, {})[j.pid] = j.rel
    return out


def read_run(path: str | Path, max_record_bytes: int | None = None) -> Iterator[RunEntry]:
    """Stream a run entry by entry: a TREC run file ``qid Q0 pid rank score tag``, or an Arrow run
    (``dense_pt.data.runs``; each entry carries the run's tag). Errors: wrong column count, a
    non-integer rank, a score that is not a finite number, a passage listed twice for one query
    (reported when the stream ends; 8 bytes per line are kept, so 7M-line runs stream too). Stages
    read runs in query chunks instead (``dense_pt.data.runs.read_run_chunks``)."""
    from dense_pt.data.runs import RunReader

    path = Path(path)
    reader = RunReader(path, max_record_bytes)
    if reader.format == "arrow":
        tag = reader.tag
        for chunk in reader.chunks():
            qids, docs = chunk.qids.to_pylist(), chunk.docids.to_pylist()
            rows = zip(
                chunk.query_of_row.tolist(), docs, chunk.ranks.tolist(), chunk.scores.tolist(), strict=True
            )
            for qi, pid, rank, score in rows:
                yield RunEntry(qids[qi], pid, rank, score, tag)
        return
    pairs = UniqueIds()
    for _, e in _run_entries(path, max_record_bytes):
        pairs.add(e.qid + "\0" + e.pid)
        yield e
    dup = pairs.first_duplicate(
        lambda: ((w, e.qid + "\0" + e.pid) for w, e in _run_entries(path, max_record_bytes))
    )
    if dup is not None:
        qid, pid = dup[0].split("\0")
        raise FormatError(
            f"passage {pid!r} is ranked twice for query {qid!r} (first on line {dup[1]})",
            path=path,
            line=dup[2],
        )


def _run_entries(path: Path, max_record_bytes: int | None = None) -> Iterator[tuple[int, RunEntry]]:
    for lineno, line in iter_lines(path, max_record_bytes):
        cols = line.split()
        if len(cols) != 6:
            raise FormatError(
                f"expected 6 whitespace-separated columns (qid Q0 pid rank score tag), found {len(cols)}",
                path=path,
                line=lineno,
            )
        qid, _, pid, rank_s, score_s, tag = cols
        check_id(qid, "query id", path, lineno)  # split() leaves no whitespace: a control character
        check_id(pid, "passage id", path, lineno)
        rank = _int(rank_s, "rank", path, lineno, low=0)
        try:
            score = float(score_s)
        except ValueError:
            raise FormatError(f"score must be a number, found {score_s!r}", path=path, line=lineno) from None
        if not math.isfinite(score):
            # inf would rank above every real score (and -inf below), silently: refused like NaN.
            raise FormatError(f"score must be a finite number, found {score_s!r}", path=path, line=lineno)
        yield lineno, RunEntry(qid, pid, rank, score, tag)


def load_run(path: str | Path, max_record_bytes: int | None = None) -> dict[str, dict[str, float]]:
    """A run (TREC or Arrow) as ``{qid: {pid: score}}``, each query's hits in the file's order.
    For small runs: a stage streams ``dense_pt.data.runs.read_run_chunks`` instead."""
    from dense_pt.data.runs import read_run_chunks

    out: dict[str, dict[str, float]] = {}
    for chunk in read_run_chunks(path, max_record_bytes=max_record_bytes):
        out.update(chunk.to_dict())
    return out


def rank_hits(hits: Mapping[str, float], tie_break: str = DEFAULT_TIE_BREAK) -> list[tuple[str, float]]:
    """One query's hits best first. Equal scores are ordered as trec_eval orders them, by passage id
    descending (``"docno"``, the default), or kept in the mapping's order, i.e. a run file's line
    order (``"score-only"``). The evaluation and the run writer both rank through here."""
    if tie_break == "docno":
        return sorted(hits.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    if tie_break == "score-only":
        return sorted(hits.items(), key=lambda kv: -kv[1])  # stable: file order among ties
    raise InvalidArgumentError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")


def format_score(score: float) -> str:
    """The shortest text that reads back as the same float64 (``repr``): a written run keeps every
    score bit for bit, so no ties appear that the scores in memory did not have."""
    return repr(float(score))


def write_run(
    path: str | Path, run: Mapping[str, Mapping[str, float]] | Iterable[RunEntry], tag: str = "dense-pt"
) -> int:
    """Write a run atomically, TREC text or Arrow by the name (``dense_pt.data.runs.run_format``).
    A ``{qid: {pid: score}}`` mapping is ranked by ``rank_hits``' rule (descending score, ties by
    passage id descending as the evaluation's default), so the rank column is the order the
    evaluation uses and the file does not depend on dict order; scores are kept exactly
    (``format_score`` in text). ``RunEntry`` items are written as given (ranks and tags
    included), to a TREC file only. Returns the line (row) count."""
    from dense_pt.data.runs import RunWriter, chunks_of_mapping, run_format

    if any(c.isspace() for c in tag) or not tag:
        raise InvalidArgumentError(f"run tag must be one word, got {tag!r}")
    if isinstance(run, Mapping):
        with RunWriter(path, tag=tag) as w:
            for c in chunks_of_mapping(run):
                w.write(c.qids, c.offsets, c.docids, c.scores)
        return w.rows
    if run_format(path, write=True) != "trec":
        raise InvalidArgumentError(
            f"{path}: RunEntry items carry their own ranks and tags, which only a TREC run holds; write "
            "them to a .trec file, or write a {qid: {pid: score}} mapping"
        )
    n = 0

    def line(e: RunEntry) -> str:
        if not math.isfinite(e.score):  # read_run refuses it: never write it
            raise InvalidArgumentError(f"{path}: score of passage {e.pid!r} for query {e.qid!r} is {e.score}")
        for what, value in (("query id", e.qid), ("passage id", e.pid)):
            problem = id_problem(value)  # read_run would refuse it: never write it either
            if problem is not None:
                raise InvalidArgumentError(f"{path}: {what} {value!r} {problem}")
        return f"{e.qid} Q0 {e.pid} {e.rank} {format_score(e.score)} {e.tag}\n"

    with atomic_file(path, "w", encoding="utf-8") as f:
        for e in run:
            f.write(line(e))
            n += 1
    return n
