"""Turn a raw LLM output into a clean list of search queries.

LLM outputs come numbered ("1. ...", "2) ...", "(3) ...", "Query 4: ..."), bulleted ("- ", "* ",
"• "), all on one line ("1. a 2. b 3. c"), wrapped in quotes or markdown bold, preceded by a
preamble ("Here are ten search queries:") and followed by the model continuing the prompt format
("### Instruction:", "Input:", a chat end token). The parser:

1. cuts the output at the first continuation marker (:data:`STOP_MARKERS` anywhere, or a line starting
   with one of :data:`STOP_LINE_PREFIXES`);
2. splits lines, and splits a line holding two or more consecutive inline enumerators ("1. a 2. b");
3. if any line carries an enumerator or bullet, keeps only such lines (the preamble and closing
   remarks go); otherwise keeps every line except headers ending in ":";
4. strips enumerators, bullets, surrounding quotes and ``**``;
5. drops empty queries, duplicates, copies of the passage and echoes of the prompt (a line of the
   prompt template, such as a few-shot example's query), and keeps at most ``max_queries``.

Normalisation (used for empty, duplicate and copy checks): lowercase, the sequence of ``\\w+`` word
tokens. A query is **empty** when it has no word token. Two queries are **duplicates** when their
normalised token sequences are equal (the first is kept). A query **copies the passage** when its
normalised tokens equal the passage's, or when it has at least ``copy_min_words`` (default 8) word
tokens and they occur as one contiguous run in the passage's tokens: a long verbatim sentence is
not a search query, while a short exact phrase ("aspirin heart attack") is a legitimate one.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

STOP_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "</s>", "<|end|>")
STOP_LINE_PREFIXES = (
    "###",
    "Input:",
    "Definition:",
    "Positive Example",
    "Negative Example",
    "Now complete the following",
    "Passage:",
)
COPY_MIN_WORDS = 8

_WORD = re.compile(r"\w+")
_STOP_LINE = re.compile(r"^[ \t]*(?:" + "|".join(re.escape(p) for p in STOP_LINE_PREFIXES) + ")", re.M)
# Enumerator or bullet at the start of a line: "1.", "1)", "(1)", "[1]", "1:", "1 -", "Q1:",
# "Query 1.", "Question 2)", "-", "*", "•", "–", "—", "+" (a bullet needs a space after it).
_PREFIX = re.compile(
    r"^\s*(?:"
    r"(?:q|query|question|search query)\s*#?\d{0,3}\s*[:.)\-]"
    r"|\(\d{1,3}\)|\[\d{1,3}\]"
    r"|\d{1,3}\s*[.):\]]|\d{1,3}\s+-"
    r"|[-*•·–—+](?=\s)"
    r")\s*",
    re.I,
)
_INLINE_ENUM = re.compile(r"(?:(?<=\s)|^)(\d{1,2})[.)]\s+")
_QUOTES = "\"'“”‘’`"


@dataclass
class ParsedQueries:
    queries: list[str] = field(default_factory=list)
    empty: int = 0
    duplicates: int = 0
    copies: int = 0
    echoes: int = 0


def words(text: str) -> list[str]:
    """The normalised word tokens used for empty, duplicate and copy checks."""
    return _WORD.findall(text.lower())


def _contains_run(hay: list[str], needle: list[str]) -> bool:
    n = len(needle)
    first = needle[0]
    return any(hay[i] == first and hay[i : i + n] == needle for i in range(len(hay) - n + 1))


def is_copy(query: str, passage: str, copy_min_words: int = COPY_MIN_WORDS) -> bool:
    q, p = words(query), words(passage)
    if not q:
        return False
    if q == p:
        return True
    return len(q) >= copy_min_words and _contains_run(p, q)


def _cut(text: str) -> str:
    for marker in STOP_MARKERS:
        i = text.find(marker)
        if i >= 0:
            text = text[:i]
    m = _STOP_LINE.search(text)
    return text[: m.start()] if m else text


def _split_inline(line: str) -> list[str]:
    """Split "1. a 2. b 3. c" when the inline numbers count up by one (so "covid 19. cases" stays)."""
    hits = list(_INLINE_ENUM.finditer(line))
    if len(hits) < 2:
        return [line]
    nums = [int(h.group(1)) for h in hits]
    if any(b != a + 1 for a, b in itertools.pairwise(nums)):
        return [line]
    parts = [line[: hits[0].start()]] if line[: hits[0].start()].strip() else []
    for h, nxt in zip(hits, [*hits[1:], None], strict=True):
        parts.append(line[h.start() : nxt.start() if nxt else len(line)])
    return parts


def _clean(text: str) -> str:
    text = text.replace("**", "").replace("__", "")
    text = " ".join(text.split())
    while len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:
        text = text[1:-1].strip()
    return text.strip(_QUOTES + " ") if text.count('"') == 1 else text


def split_candidates(output: str) -> list[str]:
    """Steps 1-4: the candidate queries of a raw output, before filtering."""
    lines: list[str] = []
    for raw in _cut(output).splitlines():
        lines.extend(_split_inline(raw))
    marked = [(bool(_PREFIX.match(line)), line) for line in lines if line.strip()]
    if any(m for m, _ in marked):
        kept = [_PREFIX.sub("", line, count=1) for m, line in marked if m]
    else:
        kept = [line for _, line in marked if not line.rstrip().endswith(":")]
    return [_clean(k) for k in kept]


def prompt_echoes(template: str) -> frozenset[tuple[str, ...]]:
    """Normalised lines of a prompt template (such as the few-shot examples' queries): a small
    model often repeats them instead of writing queries for the passage."""
    return frozenset(
        k for line in template.splitlines() if (k := tuple(words(_PREFIX.sub("", line, count=1))))
    )


def parse_queries_detailed(
    output: str,
    passage: str,
    max_queries: int | None = None,
    copy_min_words: int = COPY_MIN_WORDS,
    echoes: frozenset[tuple[str, ...]] = frozenset(),
) -> ParsedQueries:
    result = ParsedQueries()
    seen: set[tuple[str, ...]] = set()
    passage_words = words(passage)
    for cand in split_candidates(output):
        key = tuple(words(cand))
        if not key:
            result.empty += 1
        elif key in seen:
            result.duplicates += 1
        elif key in echoes:
            result.echoes += 1
        elif list(key) == passage_words or (
            len(key) >= copy_min_words and _contains_run(passage_words, list(key))
        ):
            result.copies += 1
        else:
            seen.add(key)
            result.queries.append(cand)
    if max_queries is not None:
        result.queries = result.queries[:max_queries]
    return result


def parse_queries(
    output: str, passage: str, max_queries: int | None = None, copy_min_words: int = COPY_MIN_WORDS
) -> list[str]:
    """The clean queries of one LLM output for ``passage`` (see the module docstring)."""
    return parse_queries_detailed(output, passage, max_queries, copy_min_words).queries
