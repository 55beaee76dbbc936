"""A folder copied from someone else must not make dense-pt read (or write) outside it: every name
a manifest gives (a store's columns and checksummed files, an embeddings folder's shards, a BM25
index's files, a sentence-transformers model's modules) is refused, in one line naming the manifest
and the name, when it is absolute, holds ``..`` or is a symbolic link leading out
(``dense_pt.artifacts.inside``, one helper for every reader); an unknown format version is refused
naming the version; ``corpus info --verify`` checks every file the manifest names. Each case runs
the real command line and plants the name in a copy of a finished folder."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("faiss")

from cli_helpers import one_line, run_cli
from dense_pt import artifacts
from dense_pt.config.retrieval import EncodeSettings
from retrieval_fixtures import tiny_setup


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from dense_pt.data.store import CorpusStore
    from dense_pt.retrieval.bm25 import bm25_index
    from dense_pt.retrieval.encode import encode

    root = tmp_path_factory.mktemp("containment")
    beir, model, store, _, _ = tiny_setup(root)
    s = CorpusStore.open(store)
    lengths = s.lengths()
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    s.add_column("importance", np.linspace(0, 1, int(offsets[-1])).astype(np.float32), offsets)
    encode(model, store, root / "pemb", EncodeSettings(max_length=64), progress=False)
    encode(model, beir / "queries.jsonl", root / "qemb", progress=False)
    bm25_index(beir / "corpus.jsonl", root / "index")
    return root


def _copy(world: Path, tmp: Path, name: str) -> Path:
    shutil.copytree(world / name, tmp / name, symlinks=True)
    return tmp / name


def _edit(path: Path, change: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


# The names planted: a relative path out of the folder, and an absolute one (to a file that exists).
def _outside(tmp: Path) -> list[str]:
    victim = tmp / "victim.npy"
    np.save(victim, np.zeros((48, 32), np.float16))
    return ["../victim.npy", str(victim)]


def _refused(code: int, line: str, manifest: Path, name: str) -> None:
    assert code == 2, line
    assert line.startswith(f"error: {manifest}: names {name!r}, "), line
    assert "a manifest may name only files inside its own folder" in line, line


@pytest.mark.parametrize("where", ["column", "files"])
@pytest.mark.parametrize("how", [0, 1], ids=["dotdot", "absolute"])
def test_a_store_manifest_naming_a_file_outside_is_refused(world, tmp_path, capsys, monkeypatch, where, how):
    store = _copy(world, tmp_path, "store")
    name = _outside(tmp_path)[how]
    if where == "column":
        _edit(store / "manifest.json", lambda m: m["columns"]["importance"].update(file=name))
    else:
        _edit(store / "manifest.json", lambda m: m["files"].update({name: {"bytes": 1, "xxh3_128": "0"}}))
    for argv in (["corpus", "info", str(store)], ["corpus", "info", str(store), "--verify"]):
        code, line = one_line(argv, capsys, monkeypatch)
        _refused(code, line, store / "manifest.json", name)


def test_a_column_file_that_is_a_link_leading_out_is_refused(world, tmp_path, capsys, monkeypatch):
    store = _copy(world, tmp_path, "store")
    elsewhere = tmp_path / "elsewhere.arrow"
    (store / "importance.arrow").rename(elsewhere)
    (store / "importance.arrow").symlink_to(elsewhere)
    code, line = one_line(["corpus", "info", str(store)], capsys, monkeypatch)
    _refused(code, line, store / "manifest.json", "importance.arrow")
    assert "a symbolic link that leads outside its folder" in line


def test_verify_checks_every_column_and_refuses_one_without_a_checksum(world, tmp_path, capsys, monkeypatch):
    """``--verify`` hashes every file the manifest names: a flipped byte in a column is found
    (before, only when the column was read); a column the manifest lists without a checksum (not
    added by dense-pt) is refused, not passed over."""
    store = _copy(world, tmp_path, "store")
    column = store / "importance.arrow"
    data = bytearray(column.read_bytes())
    data[len(data) // 2] ^= 0x01
    column.write_bytes(bytes(data))
    code, _, err = run_cli(["corpus", "info", str(store)], capsys, monkeypatch)
    assert code == 0, err  # not read: not checked
    code, line = one_line(["corpus", "info", str(store), "--verify"], capsys, monkeypatch)
    assert code == 1 and line.startswith(f"error: {column}: checksum mismatch"), line

    store2 = _copy(world, tmp_path / "b", "store")
    shutil.copy(store2 / "importance.arrow", store2 / "extra.arrow")
    _edit(
        store2 / "manifest.json",
        lambda m: m["columns"].update(extra={"file": "extra.arrow", "dtype": "float"}),
    )
    code, line = one_line(["corpus", "info", str(store2), "--verify"], capsys, monkeypatch)
    assert code == 1, line
    assert line.startswith(
        f"error: {store2 / 'manifest.json'}: column 'extra' (extra.arrow) has no checksum"
    ), line


@pytest.mark.parametrize("key", ["file", "ids"])
@pytest.mark.parametrize("how", [0, 1], ids=["dotdot", "absolute"])
def test_an_embeddings_shard_outside_its_folder_is_refused_by_search(
    world, tmp_path, capsys, monkeypatch, key, how
):
    pemb = _copy(world, tmp_path, "pemb")
    name = _outside(tmp_path)[how]
    _edit(pemb / "manifest.json", lambda m: m["shards"][0].update({key: name}))
    code, line = one_line(
        ["search", str(world / "qemb"), str(pemb), "-o", str(tmp_path / "run.trec")], capsys, monkeypatch
    )
    _refused(code, line, pemb / "manifest.json", name)
    assert not (tmp_path / "run.trec").exists()


def test_encode_does_not_resume_a_manifest_whose_shards_are_outside(world, tmp_path, capsys, monkeypatch):
    """The manifest claimed every shard done, with the shards elsewhere: encode "resumed" it by
    encoding 0 rows and marking it complete."""
    pemb = _copy(world, tmp_path, "pemb")
    name = _outside(tmp_path)[0]
    _edit(pemb / "manifest.json", lambda m: m["shards"][0].update(file=name))
    before = (pemb / "manifest.json").read_bytes()
    code, line = one_line(
        ["encode", str(world / "model"), str(world / "store"), "-o", str(pemb), "--max-length", "64"],
        capsys,
        monkeypatch,
    )
    _refused(code, line, pemb / "manifest.json", name)
    assert (pemb / "manifest.json").read_bytes() == before


@pytest.mark.parametrize("folder", ["pemb", "qemb"])
def test_an_embeddings_manifest_of_an_unknown_version_is_refused(
    world, tmp_path, capsys, monkeypatch, folder
):
    emb = _copy(world, tmp_path, folder)
    _edit(emb / "manifest.json", lambda m: m.update(format=99))
    argv = (
        ["search", str(world / "qemb"), str(emb)]
        if folder == "pemb"
        else ["search", str(emb), str(world / "pemb")]
    )
    code, line = one_line([*argv, "-o", str(tmp_path / "run.trec")], capsys, monkeypatch)
    assert code == 1
    assert line == (
        f"error: {emb / 'manifest.json'}: embeddings format version 99 is not supported (this dense-pt "
        "reads version 1); encode again with this version"
    )


@pytest.mark.parametrize("how", [0, 1], ids=["dotdot", "absolute"])
def test_a_bm25_index_naming_a_file_outside_is_refused(world, tmp_path, capsys, monkeypatch, how):
    index = _copy(world, tmp_path, "index")
    name = _outside(tmp_path)[how]
    _edit(index / "manifest.json", lambda m: m["files"].update({name: {"bytes": 1, "xxh3_128": "0"}}))
    argv = ["bm25", str(world / "beir" / "corpus.jsonl"), "--queries", str(world / "beir" / "queries.jsonl"),
            "-o", str(tmp_path / "run.trec"), "--index", str(index)]  # fmt: skip
    code, line = one_line(argv, capsys, monkeypatch)
    _refused(code, line, index / "manifest.json", name)


def test_a_bm25_index_of_an_unknown_version_is_refused(world, tmp_path, capsys, monkeypatch):
    index = _copy(world, tmp_path, "index")
    _edit(index / "manifest.json", lambda m: m["key"].update(format=99))
    argv = ["bm25", str(world / "beir" / "corpus.jsonl"), "--queries", str(world / "beir" / "queries.jsonl"),
            "-o", str(tmp_path / "run.trec"), "--index", str(index)]  # fmt: skip
    code, line = one_line(argv, capsys, monkeypatch)
    assert code == 1
    assert line == (
        f"error: {index / 'manifest.json'}: BM25 index format version 99 is not supported (this dense-pt "
        "reads version 2); give --index a new folder"
    )
    assert json.loads((index / "manifest.json").read_text())["key"]["format"] == 99  # not rebuilt over


@pytest.mark.parametrize("how", [0, 1], ids=["dotdot", "absolute"])
def test_a_models_modules_json_naming_a_folder_outside_is_refused(world, tmp_path, capsys, monkeypatch, how):
    model = _copy(world, tmp_path, "model")
    pooling = tmp_path / "pooling"
    pooling.mkdir()
    (pooling / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    name = ["../pooling", str(pooling)][how]
    (model / "modules.json").write_text(
        json.dumps([{"idx": 1, "name": "1", "path": name, "type": "x.Pooling"}])
    )
    code, line = one_line(
        ["encode", str(model), str(world / "store"), "-o", str(tmp_path / "e"), "--max-length", "64"],
        capsys,
        monkeypatch,
    )
    _refused(code, line, model / "modules.json", name)


def test_a_queries_folder_of_an_unknown_version_is_refused(tmp_path):
    from dense_pt.errors import FormatError
    from dense_pt.expansion.writer import OLD_MANIFEST, open_queries

    # an older layout's file (expansion.json) and the artifact layer's manifest alike
    (tmp_path / OLD_MANIFEST).write_text(json.dumps({"format": "dense-pt-queries", "format_version": 99}))
    with pytest.raises(
        FormatError, match=rf"{OLD_MANIFEST}: pseudo-queries format version 99 is not supported"
    ):
        open_queries(tmp_path)
    (tmp_path / OLD_MANIFEST).unlink()
    (tmp_path / "manifest.json").write_text(
        json.dumps(artifacts.header("pseudo-queries", "expand", format=99))
    )
    with pytest.raises(
        FormatError, match=r"manifest\.json: pseudo-queries format version 99 is not supported"
    ):
        open_queries(tmp_path)


@pytest.mark.parametrize(
    "name, problem",
    [
        ("a/../../b", "a path that leads outside its folder"),
        ("..", "a path that leads outside its folder"),
        ("/etc/passwd", "a path that leads outside its folder"),
        ("~/x", "a path that leads outside its folder"),
        ("..\\x", "a path that leads outside its folder"),
        ("", "which is not a file name"),
        (None, "which is not a file name"),
        (["x"], "which is not a file name"),
    ],
)
def test_inside_refuses_every_way_out(tmp_path, name, problem):
    from dense_pt.artifacts import inside
    from dense_pt.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match=problem):
        inside(tmp_path, name, tmp_path / "manifest.json")
    (tmp_path / "sub").mkdir()
    assert inside(tmp_path, "sub/x.arrow", tmp_path / "m") == tmp_path / "sub" / "x.arrow"
    assert inside(tmp_path, "a..b", tmp_path / "m") == tmp_path / "a..b"  # dots in a name are fine
