"""Streaming readers for relevance judgements (qrels).

Qrels formats (auto-detected from the first line; ``format=`` overrides):
- ``trec``: ``qid 0 pid rel`` (whitespace-separated, 4 columns; the second column is ignored, "0" or
  "Q0" in practice). TREC DL graded judgements (0-3) are kept as they are, zeros included.
- ``beir``: ``query-id<TAB>corpus-id<TAB>score`` with that header line (a headerless 3-column tsv is
  read the same way).

Runs are ``dense_pt.runs``' (both formats, the reader and the writer).

Judgements naming an id that is not among ``query_ids`` / ``corpus_ids`` (when given) are kept and
counted; at the end a ``DataWarning`` reports the count. With ``strict=True`` the first such line is a
FormatError instead.
"""

from __future__ import annotations

import errno
import warnings
from collections.abc import Container, Iterator
from pathlib import Path
from typing import NamedTuple

from dense_pt.data.ids import check_id
from dense_pt.data.lines import first_line, int_field, iter_lines
from dense_pt.errors import DataWarning, FormatError, InvalidArgumentError, io_error

QREL_FORMATS = ("trec", "beir")
BEIR_HEADER = ("query-id", "corpus-id", "score")


class Judgement(NamedTuple):
    qid: str
    pid: str
    rel: int


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
        rel = int_field(rel_s, "relevance", path, lineno)
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
