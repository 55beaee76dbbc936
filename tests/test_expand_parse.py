"""The query parser on messy LLM outputs, the prompts and the deterministic sample (no torch)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dense_pt.errors import FormatError, InvalidArgumentError
from dense_pt.expansion.parse import is_copy, parse_queries, parse_queries_detailed, words
from dense_pt.expansion.prompts import ALPACA_TEMPLATE, load_prompt, parse_template
from dense_pt.expansion.select import check_selection, in_sample, passage_seed

PASSAGE = (
    "Aspirin reduces the risk of heart attack by inhibiting platelet aggregation in patients "
    "with coronary artery disease."
)


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (
            "1. aspirin heart attack\n2. how does aspirin work\n3. platelet inhibitors",
            ["aspirin heart attack", "how does aspirin work", "platelet inhibitors"],
        ),
        ("1) a b\n2) c d", ["a b", "c d"]),
        ("(1) a b\n(2) c d\n[3] e f", ["a b", "c d", "e f"]),
        ("Query 1: a b\nQuery 2. c d\nQ3: e f\nQuestion 4) g h", ["a b", "c d", "e f", "g h"]),
        ("- a b\n* c d\n• e f\n– g h", ["a b", "c d", "e f", "g h"]),
        # preamble and closing remarks go when the list is numbered
        (
            "Here are ten search queries for the passage:\n\n1. a b\n2. c d\n\nI hope this helps!",
            ["a b", "c d"],
        ),
        # all on one line
        ("1. first query 2. second query 3. third query", ["first query", "second query", "third query"]),
        # a number inside a query is not an enumerator when the numbers do not count up
        ("1. covid 19. symptoms\n2. flu 2020 season", ["covid 19. symptoms", "flu 2020 season"]),
        # quotes and markdown
        ('1. "quoted query"\n2. **bold query**\n3. “curly”', ["quoted query", "bold query", "curly"]),
        # the model continues the prompt format: cut there
        ("1. a b\n2. c d\n### Instruction:\n1. never", ["a b", "c d"]),
        ("1. a b<|im_end|>\n2. after end", ["a b"]),
        ("1. a b\nInput: some other passage\n1. x", ["a b"]),
        # unnumbered lines; a header ending in ':' goes
        ("Queries:\nfirst plain query\n\nsecond plain query\n", ["first plain query", "second plain query"]),
        ("", []),
        ("   \n\n", []),
    ],
)
def test_parse_messy_outputs(output, expected):
    assert parse_queries(output, PASSAGE) == expected


def test_drops_empty_duplicates_and_copies_and_caps():
    out = (
        "1. aspirin heart attack\n2.\n3. Aspirin, heart-attack!\n"
        "4. reduces the risk of heart attack by inhibiting platelet aggregation\n"
        f"5. {PASSAGE.upper()}\n6. platelet aggregation\n7. q7\n8. q8"
    )
    r = parse_queries_detailed(out, PASSAGE, max_queries=3)
    assert r.queries == ["aspirin heart attack", "platelet aggregation", "q7"]
    assert (r.empty, r.duplicates, r.copies) == (1, 1, 2)


def test_copy_definition():
    # the whole passage, whatever the case and punctuation
    assert is_copy(PASSAGE.lower().replace(",", ""), PASSAGE)
    # >= 8 words found contiguously in the passage
    assert is_copy("the risk of heart attack by inhibiting platelet", PASSAGE)
    # 7 contiguous words: a legitimate (if lazy) query
    assert not is_copy("risk of heart attack by inhibiting platelet", PASSAGE)
    # 8 words, not contiguous in the passage
    assert not is_copy("aspirin reduces heart attack risk by inhibiting platelets", PASSAGE)
    assert not is_copy("", PASSAGE)
    assert is_copy("short", "Short.")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=30), max_size=12))
def test_parser_invariants(lines):
    out = "\n".join(f"{i + 1}. {t}" for i, t in enumerate(lines))
    qs = parse_queries(out, PASSAGE, max_queries=5)
    assert len(qs) <= 5
    keys = [tuple(words(q)) for q in qs]
    assert all(keys) and len(set(keys)) == len(keys)
    assert not any(is_copy(q, PASSAGE) for q in qs)
    assert all("\n" not in q and q == q.strip() for q in qs)


def test_builtin_prompts_render_the_paper_instruction():
    alpaca = load_prompt("alpaca")
    text = alpaca.render("Some text here.", title="A title", num_queries=10)
    assert "### Instruction:\nGenerate ten search queries for the following passage\n" in text
    assert "### Input:\nA title Some text here.\n" in text and text.endswith("### Response:\n")
    tk = load_prompt("tk-instruct").render("Body.", num_queries=3)
    assert tk.startswith("Definition:") and "three different search queries" in tk
    assert tk.count("Positive Example") == 2 and tk.endswith("Input: Body.\nOutput:\n")
    assert alpaca.hash != load_prompt("tk-instruct").hash and len(alpaca.hash) == 16
    assert parse_template(ALPACA_TEMPLATE, "x").hash == alpaca.hash


def test_passage_truncated_to_max_words():
    p = load_prompt("alpaca").render(" ".join(f"w{i}" for i in range(1000)), max_passage_words=5)
    assert "w0 w1 w2 w3 w4\n" in p and "w5" not in p


def test_prompt_file(tmp_path):
    f = tmp_path / "p.txt"
    f.write_text("Give {num_queries} ({num_queries_word}) queries as {{json}} for:\n{title}|{text}\n")
    p = load_prompt(str(f))
    assert p.render("body", title="T", num_queries=4) == "Give 4 (four) queries as {json} for:\nT|body\n"
    f.write_text("line one\nQueries for {pasage}\n")
    with pytest.raises(FormatError, match=r"p.txt:2: unknown placeholder \{pasage\}"):
        load_prompt(str(f))
    f.write_text("no placeholder at all")
    with pytest.raises(FormatError, match=r"no \{passage\} or \{text\}"):
        load_prompt(str(f))
    f.write_text("{passage} and a stray }")
    with pytest.raises(FormatError, match="unbalanced"):
        load_prompt(str(f))
    with pytest.raises(InvalidArgumentError, match="neither a built-in prompt"):
        load_prompt(str(tmp_path / "missing.txt"))


def test_sample_is_deterministic_nested_and_close_to_fraction():
    ids = [f"doc{i}" for i in range(4000)]
    s25 = {p for p in ids if in_sample(7, p, 0.25)}
    assert s25 == {p for p in reversed(ids) if in_sample(7, p, 0.25)}  # order does not matter
    s10 = {p for p in ids if in_sample(7, p, 0.10)}
    assert s10 <= s25
    assert abs(len(s25) / len(ids) - 0.25) < 0.03
    assert s25 != {p for p in ids if in_sample(8, p, 0.25)}  # the seed matters
    assert all(in_sample(0, p, 1.0) for p in ids)
    assert passage_seed(0, "a") == passage_seed(0, "a") != passage_seed(1, "a")
    assert 0 <= passage_seed(3, "x") < 2**31


@pytest.mark.parametrize(("limit", "sample"), [(1, 0.5), (-1, None), (None, 0.0), (None, 1.5)])
def test_bad_selection(limit, sample):
    with pytest.raises(InvalidArgumentError):
        check_selection(limit, sample)


def test_echoes_of_the_few_shot_examples_are_dropped():
    from dense_pt.expansion.parse import prompt_echoes

    echoes = prompt_echoes(load_prompt("tk-instruct").template)
    out = "1. largest coral reef in the world\n2. Where is the Great Barrier Reef?\n3. aspirin dose for heart attack"
    r = parse_queries_detailed(out, PASSAGE, echoes=echoes)
    assert r.queries == ["aspirin dose for heart attack"] and r.echoes == 2
    assert parse_queries(out, PASSAGE) == [q.split(". ", 1)[1] for q in out.splitlines()]  # off by default
