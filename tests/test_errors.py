"""One error map: a missing, forbidden or misplaced path is both a DensePtError and the builtin a
caller catches (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError,
FileExistsError), with the path printed once, whether the Rust core or Python raised it."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from dense_pt import errors as E
from dense_pt.errors import DensePtError, DensePtIOError

PAIRS = [
    (E.NotFoundError, FileNotFoundError, errno.ENOENT),
    (E.PermissionDeniedError, PermissionError, errno.EACCES),
    (E.IsDirectoryError, IsADirectoryError, errno.EISDIR),
    (E.NotDirectoryError, NotADirectoryError, errno.ENOTDIR),
    (E.AlreadyExistsError, FileExistsError, errno.EEXIST),
]


@pytest.mark.parametrize(("cls", "builtin", "code"), PAIRS)
def test_each_class_is_both_and_prints_the_path_once(cls, builtin, code):
    err = E.io_error(code, f"/data/x.jsonl: {os.strerror(code)}", "/data/x.jsonl")
    assert type(err) is cls
    assert isinstance(err, builtin) and isinstance(err, DensePtIOError) and isinstance(err, DensePtError)
    assert err.errno == code and err.filename == "/data/x.jsonl"
    assert str(err) == f"/data/x.jsonl: {os.strerror(code)}"


def test_other_errnos_stay_plain_io_errors():
    err = E.io_error(errno.ENOSPC, "cannot write out: No space left on device", "out")
    assert type(err) is DensePtIOError and str(err) == "cannot write out: No space left on device"


def test_builtin_os_errors_are_mapped():
    err = E.from_os_error(PermissionError(errno.EACCES, "Permission denied", "/root/x"))
    assert isinstance(err, E.PermissionDeniedError) and str(err) == "/root/x: Permission denied"
    assert str(E.from_os_error(OSError("something odd"))) == "something odd"


def test_python_readers_raise_the_same_classes(tmp_path):
    from dense_pt.data import load_qrels, load_queries
    from dense_pt.data.store import CorpusStore

    for load in (load_qrels, load_queries):
        with pytest.raises(E.NotFoundError) as info:
            load(tmp_path / "nope.tsv")
        assert isinstance(info.value, FileNotFoundError)
        assert str(info.value).count("nope.tsv") == 1
    with pytest.raises(E.IsDirectoryError):
        load_qrels(tmp_path)
    with pytest.raises(E.NotFoundError, match="no such corpus store"):
        CorpusStore.open(tmp_path / "nostore")
    (tmp_path / "empty").mkdir()
    with pytest.raises(E.FormatError, match="not a corpus store"):  # exists, but is something else
        CorpusStore.open(tmp_path / "empty")


def test_the_rust_core_raises_the_same_classes(tmp_path):
    from dense_pt.pmi import NgramTable

    with pytest.raises(E.NotFoundError) as info:
        NgramTable.open(tmp_path / "missing.pmi")
    assert isinstance(info.value, FileNotFoundError)
    text = str(info.value)
    assert text.count("missing.pmi") == 1 and "os error" not in text, text
    assert info.value.filename == str(tmp_path / "missing.pmi")


def test_an_existing_output_is_a_file_exists_error(tmp_path):
    from dense_pt.artifacts.replace import atomic_dir

    (tmp_path / "out").mkdir()
    with pytest.raises(E.AlreadyExistsError, match="use --force"), atomic_dir(tmp_path / "out"):
        pass
    assert isinstance(E.already_exists(Path("x"), "x exists"), FileExistsError)
