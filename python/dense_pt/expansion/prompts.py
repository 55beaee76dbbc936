"""The prompts that turn a passage into an LLM request for pseudo-queries.

Two built-in prompts follow the paper ("Pre-training with Large Language Model-based Document
Expansion for Dense Passage Retrieval"):

- ``alpaca``: zero-shot, in the Alpaca instruction format, with the instruction "Generate ten search
  queries for the following passage" and the passage as the input;
- ``tk-instruct``: few-shot, in the tk-Instruct format: a task definition and two positive examples
  (written for dense-pt), then the passage.

A prompt file (any other ``--prompt`` value is a path) is a UTF-8 text template with placeholders:

=====================  ============================================================
``{passage}``          the passage (title and text joined by a space), truncated to
                       ``max_passage_words`` whitespace-separated words
``{title}``            the passage title ("" when there is none)
``{text}``             the passage text without the title (truncated likewise)
``{num_queries}``      the number of queries asked for, as digits ("10")
``{num_queries_word}`` the same number in words ("ten"; digits above twenty)
``{{`` and ``}}``      literal ``{`` and ``}``
=====================  ============================================================

A template must contain ``{passage}`` or ``{text}``; any other ``{name}`` is an error naming the file
and line, so a typo never silently sends the literal placeholder to the model.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from dense_pt.errors import FormatError, InvalidArgumentError

PLACEHOLDERS = ("passage", "title", "text", "num_queries", "num_queries_word")
_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")

_NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty"
).split()

ALPACA_TEMPLATE = (
    "Below is an instruction that describes a task, paired with an input that provides further "
    "context. Write a response that appropriately completes the request.\n\n"
    "### Instruction:\nGenerate {num_queries_word} search queries for the following passage\n\n"
    "### Input:\n{passage}\n\n"
    "### Response:\n"
)

TK_INSTRUCT_TEMPLATE = (
    "Definition: In this task you are given a passage. Your job is to write {num_queries_word} "
    "different search queries that a person could type into a search engine and for which the "
    "passage is a good answer. Write one query per line, numbered. Queries are short, use words a "
    "searcher would use, and do not copy sentences from the passage.\n\n"
    "Positive Example 1 -\n"
    "Input: The Great Barrier Reef, off the coast of Queensland, Australia, is the world's largest "
    "coral reef system. Rising sea temperatures have caused mass coral bleaching events in 2016, "
    "2017 and 2020.\n"
    "Output:\n1. largest coral reef in the world\n2. where is the great barrier reef\n"
    "3. why is the great barrier reef bleaching\n4. great barrier reef bleaching years\n"
    "5. effect of ocean warming on coral\n\n"
    "Positive Example 2 -\n"
    "Input: Metformin is a first-line medication for type 2 diabetes. It lowers blood glucose "
    "mainly by reducing glucose production in the liver, and rarely causes hypoglycemia on its own.\n"
    "Output:\n1. first line drug for type 2 diabetes\n2. how does metformin lower blood sugar\n"
    "3. does metformin cause low blood sugar\n4. metformin mechanism of action liver\n"
    "5. metformin side effects hypoglycemia\n\n"
    "Now complete the following example -\n"
    "Input: {passage}\n"
    "Output:\n"
)

BUILTIN = {"alpaca": ALPACA_TEMPLATE, "tk-instruct": TK_INSTRUCT_TEMPLATE}


def number_word(n: int) -> str:
    return _NUMBER_WORDS[n] if 0 <= n < len(_NUMBER_WORDS) else str(n)


def truncate_words(text: str, max_words: int | None) -> str:
    """At most ``max_words`` whitespace-separated words (whitespace runs collapse to one space)."""
    words = text.split()
    if max_words is not None and len(words) > max_words:
        words = words[:max_words]
    return " ".join(words)


@dataclass(frozen=True)
class Prompt:
    """A validated template. ``hash`` identifies it in every output row (first 16 hex of sha256)."""

    name: str
    template: str

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.template.encode("utf-8")).hexdigest()[:16]

    def render(
        self, text: str, title: str = "", num_queries: int = 10, max_passage_words: int | None = 256
    ) -> str:
        text = truncate_words(text, max_passage_words)
        title = " ".join(title.split())
        passage = truncate_words(f"{title} {text}" if title and text else (title or text), max_passage_words)
        values = {
            "passage": passage,
            "title": title,
            "text": text,
            "num_queries": str(num_queries),
            "num_queries_word": number_word(num_queries),
        }
        return _substitute(self.template, values)


def _substitute(template: str, values: dict[str, str]) -> str:
    def repl(m: re.Match[str]) -> str:
        tok = m.group(0)
        if tok == "{{":
            return "{"
        if tok == "}}":
            return "}"
        return values[m.group(1)]

    return _TOKEN.sub(repl, template)


def parse_template(template: str, name: str, source: str | None = None) -> Prompt:
    """Check the placeholders of ``template`` (errors name ``source`` and the line)."""
    seen = set()
    for m in _TOKEN.finditer(template):
        tok = m.group(0)
        if tok in ("{{", "}}"):
            continue
        line = template.count("\n", 0, m.start()) + 1
        if m.group(1) is None:
            raise FormatError(
                f"unbalanced {tok!r} in prompt template (write {tok * 2} for a literal)", source, line
            )
        if m.group(1) not in PLACEHOLDERS:
            raise FormatError(
                f"unknown placeholder {{{m.group(1)}}} in prompt template; known: "
                + ", ".join("{" + p + "}" for p in PLACEHOLDERS),
                source,
                line,
            )
        seen.add(m.group(1))
    if not seen & {"passage", "text"}:
        raise FormatError("prompt template has no {passage} or {text} placeholder", source)
    return Prompt(name=name, template=template)


def load_prompt(spec: str | Path) -> Prompt:
    """``alpaca``, ``tk-instruct``, or the path of a template file."""
    if isinstance(spec, str) and spec in BUILTIN:
        return parse_template(BUILTIN[spec], spec)
    path = Path(spec)
    if not path.is_file():
        raise InvalidArgumentError(
            f"--prompt {spec!s}: neither a built-in prompt ({', '.join(BUILTIN)}) nor an existing file"
        )
    try:
        template = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"prompt file is not UTF-8 ({exc.reason})", path) from exc
    return parse_template(template, name=str(path), source=str(path))
