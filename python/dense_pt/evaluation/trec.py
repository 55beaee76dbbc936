"""Readers and writers for the plain-text exchange formats of IR evaluation.

* run files, TREC format: ``qid Q0 docid rank score tag`` (whitespace separated, one hit a line);
* qrels, either TREC format ``qid 0 docid rel`` or BEIR's tab-separated file with a header line
  ``query-id<TAB>corpus-id<TAB>score`` (detected from the first line);
* queries, BEIR ``queries.jsonl`` (``{"_id", "text"}``) or MS MARCO ``qid<TAB>text``.

Every reader reports the file and line of malformed input. Pure Python, no torch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from dense_pt.errors import FormatError
from dense_pt.fsutil import atomic_file

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, int]]


def read_run(path: str | Path) -> Run:
    """A TREC run as ``{qid: {docid: score}}``. A docid listed twice for one query is an error."""
    path = Path(path)
    run: Run = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 6:
                raise FormatError(
                    f"expected 6 fields 'qid Q0 docid rank score tag', got {len(parts)}", path, lineno
                )
            qid, _, docid, _rank, score, _tag = parts
            try:
                value = float(score)
            except ValueError:
                raise FormatError(f"score {score!r} is not a number", path, lineno) from None
            hits = run.setdefault(qid, {})
            if docid in hits:
                raise FormatError(f"document {docid!r} listed twice for query {qid!r}", path, lineno)
            hits[docid] = value
    return run


def write_run(path: str | Path, run: Mapping[str, Mapping[str, float]], tag: str = "dense-pt") -> None:
    """Write a run atomically, each query's hits by descending score (ties by docid ascending)."""
    with atomic_file(path, "w", encoding="utf-8") as f:
        for qid in run:
            hits = sorted(run[qid].items(), key=lambda kv: (-kv[1], kv[0]))
            for rank, (docid, score) in enumerate(hits, 1):
                f.write(f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n")


def read_qrels(path: str | Path) -> Qrels:
    """Judgements as ``{qid: {docid: relevance}}`` from a TREC or BEIR (header + tsv) qrels file."""
    path = Path(path)
    qrels: Qrels = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if lineno == 1 and parts[0].lower() in ("query-id", "query_id", "qid"):
                continue  # BEIR header
            if len(parts) == 4:
                qid, _, docid, rel = parts
            elif len(parts) == 3:
                qid, docid, rel = parts
            else:
                raise FormatError(
                    f"expected 'qid 0 docid rel' or 'query-id corpus-id score', got {len(parts)} fields",
                    path,
                    lineno,
                )
            try:
                value = int(float(rel))
            except ValueError:
                raise FormatError(f"relevance {rel!r} is not a number", path, lineno) from None
            qrels.setdefault(qid, {})[docid] = value
    if not qrels:
        raise FormatError("no judgements in the file", path)
    return qrels


def read_queries(path: str | Path) -> dict[str, str]:
    """Queries from BEIR jsonl (``_id``/``text``) or a ``qid<TAB>text`` file. Empty text is an error."""
    path = Path(path)
    queries: dict[str, str] = {}
    jsonl = path.suffix in (".jsonl", ".json")
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            if jsonl:
                try:
                    obj = json.loads(line)
                    qid, text = str(obj["_id"]), obj["text"]
                except (json.JSONDecodeError, KeyError, TypeError) as exc:
                    raise FormatError(f"bad query record ({exc})", path, lineno) from None
            else:
                qid, sep, text = line.rstrip("\n").partition("\t")
                if not sep:
                    raise FormatError("expected 'qid<TAB>text'", path, lineno)
            if not isinstance(text, str) or not text.strip():
                raise FormatError(f"query {qid!r} is empty", path, lineno)
            queries[qid] = text
    return queries


def read_beir_corpus(path: str | Path) -> Iterable[tuple[str, str]]:
    """(id, "title text") pairs from a BEIR ``corpus.jsonl``; title and text joined by a space."""
    path = Path(path)
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                pid = str(obj["_id"])
                text = " ".join(t for t in (obj.get("title") or "", obj.get("text") or "") if t)
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise FormatError(f"bad corpus record ({exc})", path, lineno) from None
            yield pid, text
