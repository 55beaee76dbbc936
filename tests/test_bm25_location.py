"""Where `dense-pt bm25` keeps its index (``dense_pt.retrieval.bm25_index.index_folder``): the
folder given with ``--index``, else dense-pt's cache, never beside the corpus (an input's folder may
be shared, read-only or under version control); with the cache off, a temporary folder beside the
run, removed after. An index of the previous format is rebuilt by a search and refused, saying
so, when opened as it is."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import CHILD, one_line, run_cli
from dense_pt import logs
from dense_pt.artifacts import file_checksum
from dense_pt.config.retrieval import BM25Command
from dense_pt.errors import FormatError
from dense_pt.retrieval import bm25_index as bi
from dense_pt.retrieval.bm25 import bm25

CORPUS = "".join(f"p{i}\tvaccine trial {'immune ' * (i % 3)}cell{i % 4}\n" for i in range(40))


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """An input folder: the corpus and the queries, and nothing else."""
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "c.tsv").write_text(CORPUS)
    (folder / "q.tsv").write_text("q1\tvaccine\nq2\timmune cell2\n")
    return folder


def _unchanged(data: Path) -> None:
    assert sorted(p.name for p in data.iterdir()) == ["c.tsv", "q.tsv"]


def test_the_cli_keeps_the_index_in_the_cache_and_writes_nothing_beside_the_corpus(
    data, tmp_path, capsys, monkeypatch
):
    cache = tmp_path / "cache"
    argv = ["bm25", str(data / "c.tsv"), "--queries", str(data / "q.tsv"), "-o", str(tmp_path / "r.trec")]
    code, _, err = run_cli(argv, capsys, monkeypatch, env={"DENSE_PT_CACHE_DIR": str(cache)})
    assert code == 0 and "building the index" in err, err
    _unchanged(data)
    index = cache / "bm25" / f"{file_checksum(data / 'c.tsv')[:16]}-c.tsv.bm25"
    assert json.loads((index / bi.MANIFEST).read_text())["kind"] == bi.KIND
    assert [p.name for p in (cache / "bm25").iterdir()] == [index.name]
    code, _, err = run_cli([*argv, "--force"], capsys, monkeypatch, env={"DENSE_PT_CACHE_DIR": str(cache)})
    assert code == 0 and "building" not in err, err  # found there again: reused


def test_with_the_cache_off_a_search_builds_a_temporary_index_and_leaves_nothing(
    data, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("DENSE_PT_CACHE_DIR", "")
    logs.configure()
    out = tmp_path / "out"  # not there yet: made for the run, as the run's writer would
    bm25(data / "c.tsv", data / "q.tsv", out / "r.trec", BM25Command(k=3, threads=1))
    assert "built for this run only" in capsys.readouterr().err
    _unchanged(data)
    assert [p.name for p in out.iterdir()] == ["r.trec"]
    assert len((out / "r.trec").read_text().splitlines()) == 6


def test_with_the_cache_off_building_an_index_alone_needs_a_folder(data, capsys, monkeypatch):
    monkeypatch.setenv("DENSE_PT_CACHE_DIR", "")
    code, line = one_line(["bm25", str(data / "c.tsv")], capsys, monkeypatch)
    assert (code, line) == (2, f"error: {bi.CACHE_OFF}")
    _unchanged(data)


def _as_previous_format(index: Path) -> None:
    """What dense-pt wrote before the bit-packed blocks, as far as its readers look: manifest key
    format 1 and header version 1."""
    manifest = json.loads((index / bi.MANIFEST).read_text())
    manifest["key"]["format"] = 1
    (index / bi.MANIFEST).write_text(json.dumps(manifest))
    head = bytearray((index / "header.bin").read_bytes())
    head[8:12] = (1).to_bytes(4, "little")
    (index / "header.bin").write_bytes(bytes(head))


def test_an_index_of_the_previous_format_is_refused_when_opened_and_rebuilt_by_a_search(
    data, tmp_path, capsys
):
    logs.configure()
    index = tmp_path / "idx"
    args = (data / "c.tsv", data / "q.tsv", tmp_path / "r.trec")
    bm25(*args, BM25Command(k=3, threads=1), index=index)
    want = (tmp_path / "r.trec").read_bytes()
    _as_previous_format(index)
    with pytest.raises(FormatError) as e:
        bi.open_index(index)
    assert str(e.value) == (
        f"{index / bi.MANIFEST}: BM25 index format version 1 is not supported (this dense-pt reads "
        "version 2); rebuild it (dense-pt bm25 CORPUS --index DIR)"
    )
    capsys.readouterr()
    bm25(*args, BM25Command(k=3, threads=1), index=index)
    assert f"rebuilding the index at {index}: it was built for another format" in capsys.readouterr().err
    assert json.loads((index / bi.MANIFEST).read_text())["key"]["format"] == bi.FORMAT_VERSION == 2
    assert (tmp_path / "r.trec").read_bytes() == want


def test_an_index_left_beside_the_corpus_by_an_earlier_version_is_named_and_not_used(data, tmp_path, caplog):
    old = data / "c.tsv.bm25"
    old.mkdir()
    (old / bi.MANIFEST).write_text(json.dumps({"kind": bi.KIND, "key": {"format": 1}}))
    bm25(data / "c.tsv", data / "q.tsv", tmp_path / "r.trec", BM25Command(k=3, threads=1))
    said = [r.getMessage() for r in caplog.records if "no longer used" in r.getMessage()]
    assert len(said) == 1 and str(old) in said[0] and "--index" in said[0], said
    assert [p.name for p in old.iterdir()] == [bi.MANIFEST]  # untouched


def test_a_full_disk_while_building_at_index_names_that_folder_not_a_temporary(tmp_path):
    corpus = tmp_path / "c.tsv"
    corpus.write_text("".join(f"p{i}\tvaccine trial word{i} cell{i % 7}\n" for i in range(2000)))

    def limit() -> None:  # a 4 KB file size limit, its signal ignored: writes fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    r = subprocess.run(
        [sys.executable, "-c", CHILD, "-q", "bm25", str(corpus), "--index", str(tmp_path / "idx")],
        preexec_fn=limit, capture_output=True, text=True, timeout=120,
        env={**os.environ, "DENSE_PT_CACHE_DIR": "", "DENSE_PT_LOG": "warning"},
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip() == f"error: cannot write {tmp_path / 'idx'}: File too large"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.tsv"]  # no temporary left
