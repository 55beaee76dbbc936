"""Runs that prove they are intact (``dense_pt.runs.checksum``): an Arrow run dense-pt wrote
carries a checksum of every record batch, verified as it is read. One byte flipped in its data, a
damaged end marker, a 0-byte file: each is one line naming the file through the real command line
(exit 1, no traceback), never a run read with other ids. Runs of other tools (no checksum) still
read, under the ids rule that the TREC reader applies."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from cli_helpers import run_cli
from dense_pt.errors import FormatError
from dense_pt.runs import RunWriter, load_run
from dense_pt.runs.arrow import RUN_SCHEMA

HITS = {"q1": {"1338283": 3.0, "1338284": 2.5, "7": 1.0}, "q2": {"8": 3.0, "9": 2.0, "10": 1.0}}


def written(path: Path) -> Path:
    with RunWriter(path, tag="bm25") as w:
        for q, hits in HITS.items():
            w.write([q], [0, len(hits)], list(hits), list(hits.values()))
    return path


def flipped(path: Path, at: int, xor: int) -> Path:
    data = bytearray(path.read_bytes())
    data[at] ^= xor
    path.write_bytes(bytes(data))
    return path


@pytest.fixture()
def qrels(tmp_path: Path) -> Path:
    path = tmp_path / "qrels.tsv"
    path.write_text("q1\t0\t1338283\t1\nq2\t0\t8\t1\n")
    return path


def one_line_error(code: int, err: str) -> str:
    assert code == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_a_run_dense_pt_wrote_reads_back_and_carries_its_checksums(tmp_path):
    run = written(tmp_path / "run.arrow")
    assert load_run(run) == HITS
    with pa.OSFile(str(run)) as f:
        reader = pa.ipc.open_file(f)
        assert reader.schema.metadata[b"dense_pt.checksum"] == b"blake2b-128"
        for i in range(reader.num_record_batches):
            assert len(reader.get_batch_with_custom_metadata(i)[1][b"dense_pt.checksum"]) == 32


@pytest.mark.parametrize("command", ["evaluate", "runs convert", "corpus check"])
def test_one_digit_changed_in_a_passage_id_is_refused(command, tmp_path, qrels, capsys, monkeypatch):
    """The issue's case: 1338283 read as 1338253 with exit 0. The id's bytes lie uncompressed in
    the file (a small buffer is not compressed), so the flip leaves a readable file."""
    run = written(tmp_path / "run.arrow")
    at = run.read_bytes().index(b"1338283") + 5
    flipped(run, at, ord("8") ^ ord("5"))
    argv = {"evaluate": ["evaluate", str(run), "--qrels", str(qrels)],
            "runs convert": ["runs", "convert", str(run), str(tmp_path / "out.trec")],
            "corpus check": ["corpus", "check", str(run), "--kind", "run"]}[command]  # fmt: skip
    code, out, err = run_cli(argv, capsys, monkeypatch)
    line = one_line_error(code, err)
    assert line.startswith(f"error: {run}: record batch 0 (rows 1 to 3) does not match its checksum"), line
    assert "1338253" not in out and not (tmp_path / "out.trec").exists()


def test_every_byte_flipped_in_the_data_is_refused_or_harmless(tmp_path):
    """Each byte of the first batch's columns (the passage ids' offsets and bytes, the scores, the
    ranks) flipped in turn: the run is refused naming the file, or (a padding byte) reads back
    exactly as written; never other ids or scores."""
    run = written(tmp_path / "run.arrow")
    data = run.read_bytes()
    start = data.index(b"1338283") - 24
    for at in range(start, start + 96):
        bad = tmp_path / f"bad{at}.arrow"
        bad.write_bytes(data)
        flipped(bad, at, 0x04)
        try:
            got = load_run(bad)
        except FormatError as exc:
            assert str(bad) in str(exc)
            continue
        assert got == HITS, at


def test_a_damaged_end_marker_is_one_line(tmp_path, capsys, monkeypatch):
    run = written(tmp_path / "run.arrow")
    flipped(run, len(run.read_bytes()) - 2, 0xFF)  # inside the closing ARROW1
    code, _, err = run_cli(["runs", "convert", str(run), str(tmp_path / "out.trec")], capsys, monkeypatch)
    line = one_line_error(code, err)
    assert line.startswith(f"error: {run}: not a readable Arrow IPC file ("), line
    assert line.endswith("the file is damaged or was cut short; write it again"), line


@pytest.mark.parametrize("command", ["evaluate", "runs convert"])
def test_a_zero_byte_arrow_run_is_refused(command, tmp_path, qrels, capsys, monkeypatch):
    run = tmp_path / "run.arrow"
    run.write_bytes(b"")
    argv = (["evaluate", str(run), "--qrels", str(qrels)] if command == "evaluate"
            else ["runs", "convert", str(run), str(tmp_path / "out.trec")])  # fmt: skip
    code, _, err = run_cli(argv, capsys, monkeypatch)
    line = one_line_error(code, err)
    assert line == f"error: {run}: empty file (0 bytes): not an Arrow run; it was cut short or never written"
    assert not (tmp_path / "out.trec").exists()


def other_tools_run(path: Path, docids: list[str]) -> Path:
    """An Arrow run as pandas or polars would write it: no dense-pt metadata, no checksum."""
    table = pa.table({"query_id": ["q1"] * len(docids), "doc_id": docids,
                      "score": [float(-i) for i in range(len(docids))],
                      "rank": list(range(1, len(docids) + 1))}, schema=RUN_SCHEMA)  # fmt: skip
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    return path


def test_a_run_without_checksum_still_reads(tmp_path):
    run = other_tools_run(tmp_path / "theirs.arrow", ["a", "b"])
    assert load_run(run) == {"q1": {"a": 0.0, "b": -1.0}}


@pytest.mark.parametrize("command", ["corpus check", "evaluate"])
def test_the_id_rule_applies_to_arrow_runs(command, tmp_path, qrels, capsys, monkeypatch):
    run = other_tools_run(tmp_path / "theirs.arrow", ["a", "doc one"])
    argv = (["corpus", "check", str(run), "--kind", "run"] if command == "corpus check"
            else ["evaluate", str(run), "--qrels", str(qrels)])  # fmt: skip
    code, _, err = run_cli(argv, capsys, monkeypatch)
    line = one_line_error(code, err)
    assert line.startswith(f"error: {run}: row 2: passage id 'doc one' contains whitespace"), line


def test_a_batch_without_its_checksum_is_refused(tmp_path):
    """A run that declares checksums, one of whose batches has none (altered by another tool)."""
    run = tmp_path / "run.arrow"
    table = pa.table({"query_id": ["q1"], "doc_id": ["a"], "score": [1.0], "rank": [1]}, schema=RUN_SCHEMA)
    schema = RUN_SCHEMA.with_metadata({"dense_pt.checksum": "blake2b-128"})
    with pa.OSFile(str(run), "wb") as sink, pa.ipc.new_file(sink, schema) as w:
        w.write_batch(table.to_batches()[0])
    with pytest.raises(
        FormatError, match=r"record batch 0 \(rows 1 to 1\) has no checksum though the run declares"
    ):
        load_run(run)
