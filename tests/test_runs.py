"""Run files (dense_pt.data.runs): the Arrow format keeps every score bit and the tie order, the
TREC export equals the writer every earlier version used byte for byte, the chunked reader hands
out whole queries, and bad files are refused with the row or line."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pytest

from dense_pt.data import load_run, rank_hits, read_run, write_run
from dense_pt.data.runs import (
    RUN_SCHEMA,
    RunReader,
    RunWriter,
    convert_run,
    read_run_chunks,
    run_format,
)
from dense_pt.errors import FormatError, InvalidArgumentError


def reference_write_run(path: Path, run: dict[str, dict[str, float]], tag: str = "dense-pt") -> None:
    """write_run as it was before runs became columnar (commit 29880bb): the export must equal it."""
    with open(path, "w", encoding="utf-8") as f:
        for qid in run:
            ranked = sorted(run[qid].items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
            for rank, (pid, score) in enumerate(ranked, start=1):
                f.write(f"{qid} Q0 {pid} {rank} {float(score)!r} {tag}\n")


def tricky_run(seed: int = 0, queries: int = 40) -> dict[str, dict[str, float]]:
    """Ties (exact and -0.0 vs 0.0), non-ASCII ids whose code point order differs from a naive
    byte-per-char order, subnormal, huge and negative scores, a query without hits."""
    rng = random.Random(seed)
    pool = ["d1", "d10", "d2", "é1", "z", "Z", "ÿ", "中", "a_b", "0", "00", "9x"] + [
        f"p{i}" for i in range(60)
    ]
    values = [0.0, -0.0, 1.0, -1.0, 0.1 + 0.2, 5e-324, 1.7976931348623157e308, 1e-7, 123456789.123, -3.5]
    run: dict[str, dict[str, float]] = {}
    for i in range(queries):
        docs = rng.sample(pool, rng.randint(1, 25))
        run[f"q{i}"] = {d: rng.choice(values) if rng.random() < 0.6 else rng.uniform(-5, 5) for d in docs}
    run["empty"] = {}
    run["ü-query"] = {"b": 2.0, "a": 2.0, "c": 2.0}
    return run


def bits(x: npt.ArrayLike) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).view(np.uint64)


def test_trec_text_is_byte_identical_to_the_previous_writer(tmp_path):
    run = tricky_run()
    reference_write_run(tmp_path / "ref.trec", run)
    assert write_run(tmp_path / "new.trec", run) == sum(len(h) for h in run.values())
    assert (tmp_path / "new.trec").read_bytes() == (tmp_path / "ref.trec").read_bytes()


def test_arrow_keeps_scores_bit_for_bit_and_ranks_like_rank_hits(tmp_path):
    run = tricky_run(1)
    write_run(tmp_path / "r.arrow", run, tag="mine")
    assert run_format(tmp_path / "r.arrow") == "arrow"
    reader = RunReader(tmp_path / "r.arrow")
    assert reader.tag == "mine"
    seen = []
    for chunk in reader.chunks(chunk_rows=7):  # many chunks: whole queries each
        for i, q in enumerate(chunk.qids.to_pylist()):
            a, b = int(chunk.offsets[i]), int(chunk.offsets[i + 1])
            want = rank_hits(run[q])
            assert chunk.docids[a:b].to_pylist() == [d for d, _ in want]
            assert bits(chunk.scores[a:b]).tolist() == bits([s for _, s in want]).tolist()  # -0.0 kept
            assert chunk.ranks[a:b].tolist() == list(range(1, len(want) + 1))
            seen.append(q)
    assert seen == [q for q, h in run.items() if h]  # the given query order; no row for "empty"
    # the export equals what the previous writer wrote for the same run
    reference_write_run(tmp_path / "ref.trec", {q: h for q, h in run.items()}, tag="mine")
    assert convert_run(tmp_path / "r.arrow", tmp_path / "x.trec")["format"] == "trec"
    assert (tmp_path / "x.trec").read_bytes() == (tmp_path / "ref.trec").read_bytes()
    # and TREC -> Arrow -> TREC is the identity
    convert_run(tmp_path / "ref.trec", tmp_path / "back.arrow")
    convert_run(tmp_path / "back.arrow", tmp_path / "back.trec")
    assert (tmp_path / "back.trec").read_bytes() == (tmp_path / "ref.trec").read_bytes()
    back = load_run(tmp_path / "back.arrow")
    assert back == {q: h for q, h in run.items() if h}
    assert [list(h) for h in back.values()] == [[d for d, _ in rank_hits(run[q])] for q in back]


@pytest.mark.parametrize("tie_break", ["docno", "score-only"])
def test_writer_ranks_chunks_as_rank_hits_and_takes_id_rows(tmp_path, tie_break):
    rng = np.random.default_rng(3)
    ids = [f"doc{i}" for i in range(50)]
    path = tmp_path / "w.arrow"
    expected = {}
    with RunWriter(path, tag="t", tie_break=tie_break, ids=ids) as w:
        for c in range(3):
            qids, offsets, rows, scores = [], [0], [], []
            for j in range(5):
                q = f"c{c}q{j}"
                r = rng.choice(50, size=rng.integers(0, 12), replace=False)
                s = rng.integers(0, 3, size=len(r)).astype(np.float64)  # many ties
                qids.append(q)
                rows.extend(r.tolist())
                scores.extend(s.tolist())
                offsets.append(len(rows))
                expected[q] = dict(zip([ids[i] for i in r], s.tolist(), strict=True))
            w.write(qids, np.asarray(offsets), np.asarray(rows), np.asarray(scores))
    got = {}
    for chunk in read_run_chunks(path, chunk_rows=4):
        got.update({q: list(h.items()) for q, h in chunk.to_dict().items()})
    assert got == {q: rank_hits(h, tie_break) for q, h in expected.items() if h}
    assert w.rows == sum(len(h) for h in expected.values())


def test_writer_refuses_what_a_reader_would_refuse_and_leaves_no_file(tmp_path):
    path = tmp_path / "r.arrow"
    with pytest.raises(InvalidArgumentError, match="score of passage 'b' for query 'q' is nan"):
        with RunWriter(path) as w:
            w.write(["q"], [0, 2], ["a", "b"], [1.0, math.nan])
    assert not path.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(InvalidArgumentError, match="passage 'a' is given twice for query 'q'"):
        with RunWriter(path) as w:
            w.write(["q"], [0, 2], ["a", "a"], [1.0, 2.0])
    with pytest.raises(InvalidArgumentError, match="query 'q' is written twice"):
        with RunWriter(path) as w:
            w.write(["q"], [0, 1], ["a"], [1.0])
            w.write(["q"], [0, 1], ["b"], [1.0])
    # the ids rule (dense_pt.data.ids), in both formats: whitespace, control characters, non-ASCII
    # spaces; a non-ASCII id that is one word passes
    for name, bad in (("r.trec", "a b"), ("r.arrow", "a b"), ("r.arrow", "a\x1bb"), ("r.trec", "a\u00a0b")):
        with pytest.raises(InvalidArgumentError, match="an id must be one word"):
            with RunWriter(tmp_path / name) as w:
                w.write(["q"], [0, 1], [bad], [1.0])
    with pytest.raises(InvalidArgumentError, match=r"query id 'q\\tq'"):
        with RunWriter(tmp_path / "r.arrow") as w:
            w.write(["q\tq"], [0, 1], ["a"], [1.0])
    with RunWriter(tmp_path / "ok.arrow") as w:
        w.write(["q"], [0, 2], ["ü", "a"], [1.0, 0.5])
    assert [e.pid for e in read_run(tmp_path / "ok.arrow")] == ["ü", "a"]
    (tmp_path / "ok.arrow").unlink()
    with pytest.raises(InvalidArgumentError, match="offsets"):
        with RunWriter(path) as w:
            w.write(["q", "r"], [0, 1], ["a"], [1.0])
    assert list(tmp_path.iterdir()) == []


def write_arrow(path: Path, batches: list[dict], schema: pa.Schema = RUN_SCHEMA) -> None:
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, schema) as w:
        for b in batches:
            w.write_batch(
                pa.record_batch([pa.array(b[n], schema.field(n).type) for n in schema.names], schema)
            )


def test_foreign_arrow_file_with_queries_across_batches(tmp_path):
    """Another tool's Arrow file: record batches cut through a query; extra columns ignored."""
    schema = pa.schema([("rank", pa.int64()), ("qid", pa.large_string()), ("docid", pa.utf8()),
                        ("score", pa.float32()), ("extra", pa.utf8())])  # fmt: skip
    rows = [
        ("q1", "a", 3.0),
        ("q1", "b", 2.0),
        ("q1", "c", 1.0),
        ("q2", "a", 1.5),
        ("q2", "d", 0.5),
        ("q3", "x", 9.0),
    ]
    batches = []
    for a in range(0, len(rows), 2):
        part = rows[a : a + 2]
        batches.append({"rank": [1] * len(part), "qid": [r[0] for r in part], "docid": [r[1] for r in part],
                        "score": [r[2] for r in part], "extra": ["-"] * len(part)})  # fmt: skip
    path = tmp_path / "foreign.run"  # no Arrow suffix: sniffed
    write_arrow(path, batches, schema)
    for chunk_rows in (1, 2, 100):
        chunks = list(read_run_chunks(path, chunk_rows=chunk_rows))
        got = {}
        for c in chunks:
            got.update(c.to_dict())
        assert got == {"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"a": 1.5, "d": 0.5}, "q3": {"x": 9.0}}
    assert [e.pid for e in read_run(path)] == ["a", "b", "c", "a", "d", "x"]


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        ({"qid": ["q", "q"], "docid": ["a", "a"], "score": [1.0, 0.5], "rank": [1, 2]}, "row 2: passage 'a' is ranked twice"),
        ({"qid": ["q", "q"], "docid": ["a", "b"], "score": [1.0, math.inf], "rank": [1, 2]}, "row 2: score must be a finite"),
        ({"qid": ["q", "q"], "docid": ["a", "b"], "score": [1.0, 0.5], "rank": [1, -2]}, "row 2: rank must be >= 0"),
        ({"qid": ["q", "q"], "docid": ["a", ""], "score": [1.0, 0.5], "rank": [1, 2]}, "row 2: empty docid"),
        ({"qid": ["q", None], "docid": ["a", "b"], "score": [1.0, 0.5], "rank": [1, 2]}, "row 2: qid is missing"),
        ({"qid": ["q", "r", "q"], "docid": ["a", "b", "c"], "score": [1.0, 0.5, 0.2], "rank": [1, 1, 2]},
         "row 3: query 'q' is listed again"),
    ],
)  # fmt: skip
def test_bad_arrow_runs_are_refused_with_the_row(tmp_path, batch, message):
    write_arrow(tmp_path / "bad.arrow", [batch])
    with pytest.raises(FormatError, match=message):
        load_run(tmp_path / "bad.arrow")


def test_bad_arrow_schema_and_trec_order(tmp_path):
    write_arrow(
        tmp_path / "s.arrow",
        [{"qid": ["q"], "docid": ["a"]}],
        pa.schema([("qid", pa.utf8()), ("docid", pa.utf8())]),
    )
    with pytest.raises(FormatError, match="no 'score' column"):
        load_run(tmp_path / "s.arrow")
    (tmp_path / "t.trec").write_text("q Q0 a 1 1.0 x\nr Q0 b 1 1.0 x\nq Q0 c 2 0.5 x\n")
    with pytest.raises(FormatError, match=r"t.trec:3: query 'q' is listed again"):
        list(read_run_chunks(tmp_path / "t.trec"))
    (tmp_path / "d.trec").write_text("q Q0 a 1 1.0 x\nq Q0 a 2 0.5 x\n")
    with pytest.raises(
        FormatError, match=r"d.trec:2: passage 'a' is ranked twice for query 'q' \(first on line 1\)"
    ):
        list(read_run_chunks(tmp_path / "d.trec"))
    (tmp_path / "fake.arrow").write_bytes(b"ARROW1garbage")
    with pytest.raises(FormatError, match="not a readable Arrow IPC file"):
        load_run(tmp_path / "fake.arrow")


def test_entries_write_as_given_to_trec_only(tmp_path):
    from dense_pt.data import RunEntry

    entries = [RunEntry("q", "b", 1, 0.5, "x"), RunEntry("q", "a", 7, 0.25, "y")]
    assert write_run(tmp_path / "e.trec", entries) == 2
    assert (tmp_path / "e.trec").read_text() == "q Q0 b 1 0.5 x\nq Q0 a 7 0.25 y\n"
    with pytest.raises(InvalidArgumentError, match="only a TREC run holds"):
        write_run(tmp_path / "e.arrow", entries)
