"""Run files (dense_pt.runs): the Arrow format keeps every score bit and the tie order, the
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

from dense_pt.errors import FormatError, InvalidArgumentError
from dense_pt.runs import RunWriter, convert_run, load_run, rank_hits, read_run, run_format, write_run
from dense_pt.runs.arrow import RUN_SCHEMA
from dense_pt.runs.read import RunReader


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
    for chunk in read_run(path, chunk_rows=4):
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
    assert docids_of(tmp_path / "ok.arrow") == ["ü", "a"]
    (tmp_path / "ok.arrow").unlink()
    with pytest.raises(InvalidArgumentError, match="offsets"):
        with RunWriter(path) as w:
            w.write(["q", "r"], [0, 1], ["a"], [1.0])
    assert list(tmp_path.iterdir()) == []


# the layout dense-pt wrote before its columns took ir-measures' names: still read
LEGACY_SCHEMA = pa.schema(
    [("qid", pa.utf8()), ("docid", pa.utf8()), ("score", pa.float64()), ("rank", pa.int32())]
)
NEW_NAMES = {"qid": "query_id", "docid": "doc_id"}


def docids_of(path: Path) -> list[str]:
    return [d for c in read_run(path) for d in c.docids.to_pylist()]


def write_arrow(path: Path, batches: list[dict], schema: pa.Schema = LEGACY_SCHEMA) -> None:
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
        chunks = list(read_run(path, chunk_rows=chunk_rows))
        got = {}
        for c in chunks:
            got.update(c.to_dict())
        assert got == {"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"a": 1.5, "d": 0.5}, "q3": {"x": 9.0}}
    assert docids_of(path) == ["a", "b", "c", "a", "d", "x"]


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
@pytest.mark.parametrize("layout", ["legacy", "today"])
def test_bad_arrow_runs_are_refused_with_the_row(tmp_path, batch, message, layout):
    if layout == "today":  # the same file under today's names: the message names the file's column
        batch = {NEW_NAMES.get(k, k): v for k, v in batch.items()}
        for old, new in NEW_NAMES.items():
            message = message.replace(f"{old} is", f"{new} is").replace(f"empty {old}", f"empty {new}")
    write_arrow(tmp_path / "bad.arrow", [batch], LEGACY_SCHEMA if layout == "legacy" else RUN_SCHEMA)
    with pytest.raises(FormatError, match=message):
        load_run(tmp_path / "bad.arrow")


def test_bad_arrow_schema_and_trec_order(tmp_path):
    write_arrow(
        tmp_path / "s.arrow",
        [{"qid": ["q"], "docid": ["a"]}],
        pa.schema([("qid", pa.utf8()), ("docid", pa.utf8())]),
    )
    with pytest.raises(
        FormatError, match=r"no 'score' column .*a run has query_id, doc_id, score, rank \(or"
    ):
        load_run(tmp_path / "s.arrow")
    (tmp_path / "t.trec").write_text("q Q0 a 1 1.0 x\nr Q0 b 1 1.0 x\nq Q0 c 2 0.5 x\n")
    with pytest.raises(FormatError, match=r"t.trec:3: query 'q' is listed again"):
        list(read_run(tmp_path / "t.trec"))
    (tmp_path / "d.trec").write_text("q Q0 a 1 1.0 x\nq Q0 a 2 0.5 x\n")
    with pytest.raises(
        FormatError, match=r"d.trec:2: passage 'a' is ranked twice for query 'q' \(first on line 1\)"
    ):
        list(read_run(tmp_path / "d.trec"))
    (tmp_path / "fake.arrow").write_bytes(b"ARROW1garbage")
    with pytest.raises(FormatError, match="not a readable Arrow IPC file"):
        load_run(tmp_path / "fake.arrow")


# ---- the columns: ir-measures' names; the layout written before them still read --------------

LEGACY_RUN = Path(__file__).parent / "data" / "runs" / "legacy-qid-docid.arrow"
# what dense-pt 15f3021 wrote to LEGACY_RUN: two record batches, a tie ordered by passage id, a
# non-ASCII id, a subnormal-adjacent score; tag bm25, depth 3
LEGACY_HITS = {"q1": {"d2": 2.5, "d1": 2.5, "é": 0.125}, "q2": {"d9": -1.0}, "q3": {"d1": 3.0, "d2": 1e-300}}


def test_a_written_arrow_run_is_evaluated_by_ir_measures_without_renaming(tmp_path):
    pd = pytest.importorskip("pandas")
    import ir_measures
    from ir_measures import RR, nDCG

    run = tricky_run(seed=3)
    write_run(tmp_path / "r.arrow", run)
    frame = pd.read_feather(tmp_path / "r.arrow")
    assert list(frame.columns) == ["query_id", "doc_id", "score", "rank"]
    qrels = {q: {d: 1 for d in list(hits)[::3]} for q, hits in run.items() if hits}
    measures = [nDCG @ 10, RR]
    # the frame as read, against ir-measures' own dict input: the same numbers
    assert ir_measures.calc_aggregate(measures, qrels, frame) == ir_measures.calc_aggregate(
        measures, qrels, run
    )


def test_a_run_in_the_legacy_layout_reads_verifies_and_converts(tmp_path):
    with pa.OSFile(str(LEGACY_RUN)) as f:  # the fixture is what it claims: old names, checksums
        schema = pa.ipc.open_file(f).schema
    assert schema.names == ["qid", "docid", "score", "rank"] and b"dense_pt.checksum" in schema.metadata
    assert load_run(LEGACY_RUN) == LEGACY_HITS
    chunks = list(read_run(LEGACY_RUN, chunk_rows=1))
    assert [q for c in chunks for q in c.qids.to_pylist()] == ["q1", "q2", "q3"] and len(chunks) == 2
    assert np.concatenate([c.ranks for c in chunks]).tolist() == [1, 2, 3, 1, 1, 2]
    reader = RunReader(LEGACY_RUN)
    assert (reader.tag, reader.depth) == ("bm25", 3)
    # converted, it takes today's names and keeps every row, score bit and rank
    convert_run(LEGACY_RUN, tmp_path / "new.arrow")
    with pa.OSFile(str(tmp_path / "new.arrow")) as f:
        new = pa.ipc.open_file(f).read_all()
    with pa.OSFile(str(LEGACY_RUN)) as f:
        old = pa.ipc.open_file(f).read_all()
    assert new.schema.names == list(RUN_SCHEMA.names) == ["query_id", "doc_id", "score", "rank"]
    assert [new.column(i).to_pylist() for i in range(4)] == [old.column(i).to_pylist() for i in range(4)]
    assert new.column("score").to_numpy().tobytes() == old.column("score").to_numpy().tobytes()


def test_a_legacy_run_whose_values_changed_fails_its_old_checksum(tmp_path):
    """The old layout's per-batch checksums are verified, not skipped: the same batches with one
    score changed, written back under the old names with the old digests, are refused."""
    with pa.OSFile(str(LEGACY_RUN)) as f:
        reader = pa.ipc.open_file(f)
        batches = [reader.get_batch_with_custom_metadata(i) for i in range(reader.num_record_batches)]
        schema = reader.schema
    changed = tmp_path / "changed.arrow"
    with pa.OSFile(str(changed), "wb") as sink, pa.ipc.new_file(sink, schema) as w:
        for i, (batch, meta) in enumerate(batches):
            if i == 1:
                scores = batch.column("score").to_numpy().copy()
                scores[0] = np.nextafter(scores[0], 0.0)  # one bit
                columns = [batch.column(j) for j in range(batch.num_columns)]  # (no set_column in pyarrow 14)
                columns[2] = pa.array(scores)
                batch = pa.RecordBatch.from_arrays(columns, schema=batch.schema)
            w.write_batch(batch, custom_metadata=meta)
    with pytest.raises(FormatError, match=r"record batch 1 \(rows 4 to 6\) does not match its checksum"):
        load_run(changed)


def test_a_legacy_run_merges_and_indexes_beside_a_new_one(tmp_path):
    from dense_pt.runs import merge_runs
    from dense_pt.runs.index import RunIndex

    write_run(tmp_path / "more.arrow", {"q4": {"d1": 1.0}})
    got = merge_runs([LEGACY_RUN, tmp_path / "more.arrow"], tmp_path / "all.arrow")
    assert got["mode"] == "queries" and load_run(tmp_path / "all.arrow") == {**LEGACY_HITS, "q4": {"d1": 1.0}}
    with RunIndex(LEGACY_RUN) as ix:  # random access reads the old names too
        back = ix.get(["q3", "q1", "nope"])
    assert back.to_dict() == {"q3": LEGACY_HITS["q3"], "q1": LEGACY_HITS["q1"], "nope": {}}
    assert back.ranks.tolist() == [1, 2, 1, 2, 3]
