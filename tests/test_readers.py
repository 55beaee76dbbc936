"""Readers: every crafted bad file fails with a FormatError naming the file and the line; good
variants (CRLF, leading BOM, gzip, Parquet, Arrow, format override) read the same records."""

from __future__ import annotations

import gzip
import json
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dense_pt.data import (
    Judgement,
    Passage,
    Query,
    detect_format,
    load_qrels,
    load_queries,
    passage_text,
    read_corpus,
    read_qrels,
    read_queries,
)
from dense_pt.errors import DataWarning, FormatError, InvalidArgumentError
from dense_pt.runs import load_run, read_run, write_run

BAD = Path(__file__).parent / "data" / "bad"


def _read(kind: str, path: Path) -> list:
    readers: dict[str, Callable[[Path], Iterable[Any]]] = {
        "corpus": read_corpus,
        "queries": read_queries,
        "qrels": read_qrels,
        "run": read_run,
    }
    return list(readers[kind](path))


# (file, reader, line of the error, what the message must say)
BAD_FILES = [
    ("corpus_invalid_json.jsonl", "corpus", 3, "invalid JSON"),
    ("corpus_missing_text.jsonl", "corpus", 2, 'missing field "text"'),
    ("corpus_duplicate_id.jsonl", "corpus", 4, "duplicate passage id 'd1' (first seen on line 1)"),
    ("corpus_empty_text.jsonl", "corpus", 2, "empty text"),
    ("corpus_invalid_utf8.jsonl", "corpus", 3, "invalid UTF-8 at byte"),
    ("corpus_bom_inside.jsonl", "corpus", 3, "byte-order mark inside the file"),
    ("corpus_wrong_columns.tsv", "corpus", 2, "expected 2 tab-separated columns (pid, text), found 3"),
    ("corpus_not_object.jsonl", "corpus", 1, "expected a JSON object, found list"),
    ("corpus_id_not_string.jsonl", "corpus", 2, 'field "_id" must be a string'),
    ("corpus_crlf_missing_field.jsonl", "corpus", 4, 'missing field "text"'),
    ("queries_empty_text.tsv", "queries", 3, "query 'q3' has empty text"),
    ("queries_missing_id.jsonl", "queries", 2, 'missing field "_id"'),
    ("queries_duplicate_id.tsv", "queries", 3, "duplicate query id 'q1'"),
    ("qrels_non_integer.tsv", "qrels", 3, "relevance must be an integer, found '1.5'"),
    ("qrels_wrong_columns.txt", "qrels", 2, "expected 4 whitespace-separated columns"),
    ("qrels_duplicate.txt", "qrels", 3, "duplicate judgement for query 'q1' and passage 'd1'"),
    ("run_bad_score.trec", "run", 2, "score must be a number, found 'high'"),
    ("run_wrong_columns.trec", "run", 3, "expected 6 whitespace-separated columns"),
]


def test_there_are_at_least_ten_bad_files():
    assert len(BAD_FILES) >= 10
    assert sorted(f for f, *_ in BAD_FILES) == sorted(p.name for p in BAD.iterdir() if p.name != "README.md")


@pytest.mark.parametrize(("name", "kind", "line", "message"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_file_names_file_and_line(name, kind, line, message):
    with pytest.raises(FormatError) as info:
        _read(kind, BAD / name)
    err = info.value
    assert err.path is not None
    assert Path(err.path).name == name
    assert err.line == line
    assert message in err.message
    assert str(err).startswith(f"{err.path}:{line}: ")


# ---- accepted variants -----------------------------------------------------------------------
DOCS = [
    {"_id": "d1", "title": "Varn river", "text": "The Varn floods every spring."},
    {"_id": "d2", "title": "", "text": "Owls hunt at night."},
    {"_id": "d3", "title": "Glaciers", "text": "Ice carved the valley."},
]
EXPECTED = [Passage(d["_id"], d["title"], d["text"]) for d in DOCS]


def _jsonl_bytes(newline: bytes = b"\n") -> bytes:
    return b"".join(json.dumps(d).encode() + newline for d in DOCS)


def test_crlf_blank_lines_and_gzip_read_the_same(tmp_path):
    (tmp_path / "lf.jsonl").write_bytes(_jsonl_bytes())
    (tmp_path / "crlf.jsonl").write_bytes(_jsonl_bytes(b"\r\n") + b"\r\n\n")
    with gzip.open(tmp_path / "z.jsonl.gz", "wb") as f:
        f.write(_jsonl_bytes())
    for name in ("lf.jsonl", "crlf.jsonl", "z.jsonl.gz"):
        assert list(read_corpus(tmp_path / name)) == EXPECTED, name


def test_leading_bom_is_accepted_with_a_warning(tmp_path):
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + _jsonl_bytes())
    with pytest.warns(DataWarning, match="byte-order mark"):
        assert list(read_corpus(tmp_path / "bom.jsonl")) == EXPECTED


def test_beir_folder_and_msmarco_tsv(tmp_path):
    (tmp_path / "corpus.jsonl").write_bytes(_jsonl_bytes())
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "when does the Varn flood"}\n')
    assert list(read_corpus(tmp_path)) == EXPECTED
    assert list(read_queries(tmp_path)) == [Query("q1", "when does the Varn flood")]
    (tmp_path / "collection.tsv").write_text("7\tThe Varn floods.\n8\t Owls hunt. \n")
    assert detect_format(tmp_path / "collection.tsv", ("jsonl", "tsv")) == "tsv"
    assert list(read_corpus(tmp_path / "collection.tsv")) == [
        Passage("7", "", "The Varn floods."),
        Passage("8", "", "Owls hunt."),
    ]


def test_format_override_and_unknown_format(tmp_path):
    (tmp_path / "corpus.txt").write_bytes(_jsonl_bytes())
    assert list(read_corpus(tmp_path / "corpus.txt", format="jsonl")) == EXPECTED
    assert list(read_corpus(tmp_path / "corpus.txt")) == EXPECTED  # sniffed from the first line
    with pytest.raises(FormatError, match="expected 2 tab-separated columns"):
        list(read_corpus(tmp_path / "corpus.txt", format="tsv"))
    with pytest.raises(InvalidArgumentError, match="unknown format"):
        list(read_corpus(tmp_path / "corpus.txt", format="xml"))
    (tmp_path / "empty.txt").write_text("\n")
    with pytest.raises(FormatError, match="empty"):
        list(read_corpus(tmp_path / "empty.txt"))
    with pytest.raises(FileNotFoundError):
        list(read_corpus(tmp_path / "nope.jsonl"))


def test_parquet_and_arrow_in_record_batches(tmp_path):
    table = pa.table(
        {
            "id": [d["_id"] for d in DOCS],
            "title": [d["title"] or None for d in DOCS],
            "text": [d["text"] for d in DOCS],
        }
    )
    pq.write_table(table, tmp_path / "c.parquet", row_group_size=2)
    assert list(read_corpus(tmp_path / "c.parquet")) == EXPECTED
    with pa.OSFile(str(tmp_path / "c.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        for b in table.to_batches(max_chunksize=1):
            w.write_batch(b)
    assert list(read_corpus(tmp_path / "c.arrow")) == EXPECTED
    with (
        pa.OSFile(str(tmp_path / "s.feather.stream"), "wb") as sink,
        pa.ipc.new_stream(sink, table.schema) as w,
    ):
        w.write_table(table)
    assert list(read_corpus(tmp_path / "s.feather.stream", format="arrow")) == EXPECTED
    # missing column, duplicate id and empty text are reported with the row number
    pq.write_table(table.drop_columns(["text"]), tmp_path / "notext.parquet")
    with pytest.raises(FormatError, match="expected columns 'id'"):
        list(read_corpus(tmp_path / "notext.parquet"))
    dup = pa.table({"id": ["a", "b", "a"], "text": ["x", "y", "z"]})
    pq.write_table(dup, tmp_path / "dup.parquet")
    with pytest.raises(FormatError, match=r"row 3: duplicate passage id 'a' \(first seen on row 1\)"):
        list(read_corpus(tmp_path / "dup.parquet"))
    empty = pa.table({"id": ["a", "b"], "text": ["x", None]})
    pq.write_table(empty, tmp_path / "empty.parquet")
    with pytest.raises(FormatError, match="row 2: passage 'b' has empty text"):
        list(read_corpus(tmp_path / "empty.parquet"))


def test_readers_stream(tmp_path):
    # A generator: the first record arrives before a bad line further down is even read.
    (tmp_path / "c.jsonl").write_bytes(_jsonl_bytes() + b"{broken\n")
    it = read_corpus(tmp_path / "c.jsonl")
    assert next(it) == EXPECTED[0]
    with pytest.raises(FormatError) as info:
        list(it)
    assert info.value.line == 4


def test_passage_text_joins_title_and_text():
    assert passage_text(Passage("a", "Title", "Body.")) == "Title Body."
    assert passage_text(Passage("a", "Title", "Body."), sep=" [SEP] ") == "Title [SEP] Body."
    assert passage_text(Passage("a", "", "Body.")) == "Body."
    assert passage_text(Passage("a", "Title", "")) == "Title"


# ---- judgements and runs ---------------------------------------------------------------------
def test_qrels_formats_and_unknown_ids(tmp_path):
    (tmp_path / "beir.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq2\tdX\t2\n")
    (tmp_path / "trec.txt").write_text("q1 0 d1 1\nq1 Q0 d2 0\nq2 0 dX 2\n")
    expect = {"q1": {"d1": 1, "d2": 0}, "q2": {"dX": 2}}
    assert load_qrels(tmp_path / "beir.tsv") == expect
    assert load_qrels(tmp_path / "trec.txt") == expect
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning without id sets
        list(read_qrels(tmp_path / "trec.txt"))
    with pytest.warns(DataWarning, match="1 judgement"):
        got = list(read_qrels(tmp_path / "trec.txt", corpus_ids={"d1", "d2"}, query_ids={"q1", "q2"}))
    assert Judgement("q2", "dX", 2) in got  # kept, only counted
    with pytest.raises(FormatError, match="unknown passage id 'dX'") as info:
        list(read_qrels(tmp_path / "beir.tsv", corpus_ids={"d1", "d2"}, strict=True))
    assert info.value.line == 4
    with pytest.raises(FormatError, match="unknown query id 'q2'"):
        list(read_qrels(tmp_path / "beir.tsv", query_ids={"q1"}, strict=True))


def test_run_roundtrip_with_ties_broken_by_id(tmp_path):
    # ties in trec_eval's (and the evaluation's default) order, passage id descending; exact scores
    run = {"q1": {"d2": 1.0, "d1": 1.0, "d3": 3.5}, "q2": {"d9": -0.25}}
    assert write_run(tmp_path / "r.trec", run, tag="test") == 4
    lines = (tmp_path / "r.trec").read_text().splitlines()
    assert lines[:3] == ["q1 Q0 d3 1 3.5 test", "q1 Q0 d2 2 1.0 test", "q1 Q0 d1 3 1.0 test"]
    assert load_run(tmp_path / "r.trec") == run
    assert next(read_run(tmp_path / "r.trec")).ranks.tolist() == [1, 2, 3, 1]
    with pytest.raises(InvalidArgumentError):
        write_run(tmp_path / "x.trec", run, tag="two words")
    (tmp_path / "dup.trec").write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d1 2 1.0 t\n")
    with pytest.raises(FormatError, match="ranked twice") as info:
        list(read_run(tmp_path / "dup.trec"))
    assert info.value.line == 2


# ---- the real files in ../shared/data --------------------------------------------------------
def test_scifact_files(shared_data):
    sci = shared_data / "beir-scifact"
    n = 0
    ids = set()
    for p in read_corpus(sci / "corpus.jsonl"):
        n += 1
        ids.add(p.id)
        assert p.text
    assert n == len(ids) == 5183
    queries = load_queries(sci / "queries.jsonl")
    assert len(queries) == 1109
    qrels = load_qrels(sci / "qrels" / "train.tsv", query_ids=queries, corpus_ids=ids, strict=True)
    assert len(qrels) == 809 and sum(map(len, qrels.values())) == 919


def test_msmarco_and_trec_dl_files(shared_data):
    ms = shared_data / "msmarco-qrels"
    dev_q = load_queries(ms / "queries.dev.small.tsv")
    assert len(dev_q) == 6980 and all(t == t.strip() and t for t in dev_q.values())
    dev = load_qrels(ms / "qrels.dev.small.tsv", query_ids=dev_q, strict=True)
    assert sum(map(len, dev.values())) == 7437
    for year, n_q in (("2019", 43), ("2020", 54)):
        queries = load_queries(ms / f"msmarco-test{year}-queries.tsv")
        assert len(queries) == 200
        qrels = load_qrels(ms / f"{year}qrels-pass.txt", query_ids=queries, strict=True)
        assert len(qrels) == n_q
        rels = {r for q in qrels.values() for r in q.values()}
        assert rels == {0, 1, 2, 3}  # graded judgements kept as they are


def test_qrels_checked_against_a_corpus_store(tmp_path):
    from dense_pt.data import build_store_from_texts, train_wordpiece

    docs = [("d1", "the river floods"), ("d2", "owls hunt at night")]
    store = build_store_from_texts(
        tmp_path / "s", docs, train_wordpiece([t for _, t in docs], 60, min_frequency=1)
    )
    assert "d1" in store and "dX" not in store
    (tmp_path / "q.txt").write_text("q1 0 d1 1\nq1 0 dX 1\n")
    with pytest.raises(FormatError, match="unknown passage id 'dX'"):
        list(read_qrels(tmp_path / "q.txt", corpus_ids=store, strict=True))


# ---- round trips on arbitrary text -----------------------------------------------------------
_text = st.text(min_size=1, max_size=40).filter(lambda t: t.strip() != "")
_ids = st.lists(st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True), min_size=1, max_size=8, unique=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=_ids, data=st.data())
def test_jsonl_roundtrip_arbitrary_unicode(tmp_path, ids, data):
    rows = [(pid, data.draw(st.text(max_size=10)), data.draw(_text)) for pid in ids]
    path = tmp_path / "c.jsonl"
    with open(path, "w", encoding="utf-8", newline="") as f:  # raw U+2028, NEL, \r inside strings
        for pid, title, text in rows:
            f.write(json.dumps({"_id": pid, "title": title, "text": text}, ensure_ascii=False) + "\n")
    assert list(read_corpus(path)) == [Passage(p, ti.strip(), te.strip()) for p, ti, te in rows]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=_ids, data=st.data())
def test_tsv_roundtrip(tmp_path, ids, data):
    clean = _text.filter(lambda t: not ({"\t", "\n", "\r"} & set(t)))
    rows = [(pid, data.draw(clean)) for pid in ids]
    path = tmp_path / "q.tsv"
    path.write_bytes("".join(f"{p}\t{t}\r\n" for p, t in rows).encode("utf-8"))
    assert list(read_queries(path)) == [Query(p, t.strip()) for p, t in rows]


# ---- the id rule (dense_pt/data/ids.py): one printable word, or refused where it enters ----------
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.text(min_size=1, max_size=12))
def test_every_id_round_trips_through_our_own_files_or_is_refused_naming_the_line(tmp_path, raw):
    """Any text as an id (whitespace, control characters, no-break spaces included): the corpus
    reader takes it (stripped) and a run with it reads back identical, or both refuse it."""
    from dense_pt.data.ids import id_problem

    pid = raw.strip()
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"_id": raw, "text": "some text"}) + "\n", encoding="utf-8")
    if not pid:
        return  # an empty id has its own message (test_bad_files)
    if id_problem(pid) is None:
        assert [p.id for p in read_corpus(path)] == [pid]
        write_run(tmp_path / "r.trec", {pid: {pid: 1.5}})
        assert load_run(tmp_path / "r.trec") == {pid: {pid: 1.5}}
        assert load_qrels_of(tmp_path, pid) == {pid: {pid: 1}}
    else:
        with pytest.raises(FormatError, match=r"c\.jsonl:1: field \"_id\": .* an id must be one word"):
            list(read_corpus(path))
        with pytest.raises(InvalidArgumentError, match="an id must be one word"):
            write_run(tmp_path / "r.trec", {pid: {pid: 1.5}})


def load_qrels_of(tmp_path: Path, pid: str) -> dict:
    (tmp_path / "q.tsv").write_text(f"query-id\tcorpus-id\tscore\n{pid}\t{pid}\t1\n", encoding="utf-8")
    return load_qrels(tmp_path / "q.tsv")
