"""Answer-string recall@k for open-domain QA data (NQ / TriviaQA style, as in DPR).

A query counts as answered at k when one of its top-k passages contains one of its answer strings
as a contiguous sequence of tokens, where both sides are lower-cased, accent-stripped and split
into alphanumeric tokens (DPR's ``has_answer`` with its simple tokenizer, re-implemented).

Inputs: a run, the passage texts (any ``{pid: text}`` mapping, e.g. from a BEIR ``corpus.jsonl``)
and the answers, a JSON-lines file of ``{"_id": qid, "answers": ["...", ...]}``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path

from dense_pt.errors import FormatError, MismatchError

_TOKEN = re.compile(r"\w+", re.UNICODE)


def normalize_tokens(text: str) -> list[str]:
    text = unicodedata.normalize("NFD", text)
    text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    return _TOKEN.findall(text.lower())


def has_answer(passage: str, answers: Sequence[str]) -> bool:
    tokens = normalize_tokens(passage)
    for ans in answers:
        a = normalize_tokens(ans)
        if not a:
            continue
        n = len(a)
        for i in range(len(tokens) - n + 1):
            if tokens[i : i + n] == a:
                return True
    return False


def read_answers(path: str | Path) -> dict[str, list[str]]:
    path = Path(path)
    out: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                qid = str(obj["_id"])
                answers = obj["answers"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise FormatError(f"bad answers record ({exc})", path, lineno) from None
            if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
                raise FormatError("'answers' must be a list of strings", path, lineno)
            out[qid] = answers
    return out


def answer_recall(
    run: Mapping[str, Mapping[str, float]],
    passages: Mapping[str, str],
    answers: Mapping[str, Sequence[str]],
    ks: Sequence[int] = (1, 5, 20, 100),
) -> dict[str, float]:
    """``{"AnswerRecall@k": fraction of answered queries}`` over the queries that have answers."""
    qids = [q for q in answers if q in run]
    if not qids:
        raise MismatchError("the run and the answers file share no query id")
    hits_at = dict.fromkeys(ks, 0)
    for q in qids:
        ranked = sorted(run[q].items(), key=lambda kv: (-kv[1], kv[0]))
        first = None
        for rank, (pid, _) in enumerate(ranked[: max(ks)], 1):
            if pid not in passages:
                raise MismatchError(f"run names passage {pid!r}, which is not in the corpus")
            if has_answer(passages[pid], answers[q]):
                first = rank
                break
        for k in ks:
            if first is not None and first <= k:
                hits_at[k] += 1
    return {f"AnswerRecall@{k}": hits_at[k] / len(qids) for k in ks}


def answer_recall_files(
    run: str | Path,
    corpus: str | Path,
    answers: Mapping[str, Sequence[str]],
    ks: Sequence[int] = (1, 5, 20, 100),
) -> dict[str, float]:
    """``answer_recall`` of a run file over a corpus file, holding only what it reads: the top
    ``max(ks)`` hits of the queries with answers (the run streamed a chunk of queries at a time)
    and the texts of those passages (the corpus streamed once)."""
    from dense_pt.data.readers import corpus_texts
    from dense_pt.runs import read_run

    depth = max(ks)
    top: dict[str, dict[str, float]] = {}
    for chunk in read_run(run):
        for q, hits in chunk.select(answers).to_dict().items():
            top[q] = dict(sorted(hits.items(), key=lambda kv: (-kv[1], kv[0]))[:depth])
    needed = {p for hits in top.values() for p in hits}
    passages = {p: t for p, t in corpus_texts(corpus) if p in needed}
    return answer_recall(top, passages, answers, ks)
