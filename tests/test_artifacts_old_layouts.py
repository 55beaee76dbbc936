"""Folders written before the artifact layer are resumed and reused by it, not redone: an
interrupted embeddings folder of the old layout finishes to the same vectors, a BM25 index of the
old layout is opened without a rebuild, a queries folder with ``expansion.json`` goes on. Each old
layout is made from a new folder by writing its manifest back the way the older code wrote it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")

from dense_pt import artifacts
from retrieval_fixtures import tiny_setup


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_setup(tmp_path_factory.mktemp("old-layouts"))


def _as_before(path: Path, extra: dict[str, Any], drop: tuple[str, ...] = ()) -> None:
    """Rewrite manifest ``path`` without the header, as the code before the layer wrote it."""
    data = json.loads(path.read_text())
    old = {**artifacts.body(data), **extra}
    for k in drop:
        old.pop(k, None)
    path.write_text(json.dumps(old))


def test_an_interrupted_embeddings_folder_of_the_old_layout_resumes_to_the_same_vectors(
    tiny, tmp_path, monkeypatch
):
    import dense_pt.retrieval.encode as encode_module
    from dense_pt.config.retrieval import EncodeSettings
    from dense_pt.retrieval.encode import Embeddings, encode

    _, model, store, _, _ = tiny
    s = EncodeSettings(max_length=64, shard_size=8, device="cpu")
    encode(model, store, tmp_path / "whole", s, progress=False)
    real = encode_module._write_shard

    def killed_after_the_first(*args: Any, **kw: Any) -> None:
        real(*args, **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(encode_module, "_write_shard", killed_after_the_first)
    with pytest.raises(KeyboardInterrupt):
        encode(model, store, tmp_path / "old", s, progress=False)
    monkeypatch.undo()
    m = json.loads((tmp_path / "old" / "manifest.json").read_text())
    assert m["complete"] is False and len(m["shards"]) == 1
    _as_before(tmp_path / "old" / "manifest.json", {"format_version": 1, "settings": m["settings"],
               "complete": False, "kind": m["settings"]["kind"], "code_version": "0.0.9"})  # fmt: skip
    encode(model, store, tmp_path / "old", s, progress=False)
    done = Embeddings.open(tmp_path / "old", "passages")
    assert done.manifest["kind"] == "embeddings" and done.manifest["complete"] is True
    ids, emb = done.load_all()
    want_ids, want = Embeddings.open(tmp_path / "whole").load_all()
    assert ids == want_ids and np.array_equal(emb, want)


def test_a_bm25_index_of_the_old_layout_is_reused_not_rebuilt(tiny, tmp_path, capsys):
    from dense_pt import logs
    from dense_pt.retrieval.bm25 import bm25_index

    logs.configure()
    beir = tiny[0]
    bm25_index(beir / "corpus.jsonl", tmp_path / "index")
    mpath = tmp_path / "index" / "manifest.json"
    m = json.loads(mpath.read_text())
    _as_before(mpath, {"kind": "dense-pt bm25 index", "key": m["key"], "files": m["files"],
                       "dense_pt_version": "0.0.9"})  # fmt: skip
    before = mpath.read_text()
    capsys.readouterr()
    index = bm25_index(beir / "corpus.jsonl", tmp_path / "index")
    assert "building" not in capsys.readouterr().err and mpath.read_text() == before
    assert index.manifest["kind"] == "bm25 index" and index.manifest["written_by"]["version"] == "0.0.9"


def test_a_queries_folder_of_the_old_layout_goes_on(tmp_path):
    from dense_pt.errors import MismatchError
    from dense_pt.expansion.writer import OLD_MANIFEST, QueryWriter, open_queries

    made = {"model": "m", "prompt_hash": "p", "num_queries": 2}
    row = {"id": "d1", "queries": ["a"], "raw": "a", "model": "m", "prompt_hash": "p", "temperature": 0.7,
           "top_p": 0.9, "top_k": 50, "max_new_tokens": 8, "seed": 1}  # fmt: skip
    QueryWriter(tmp_path, made).write([row])
    _as_before(tmp_path / "manifest.json", {"format": "dense-pt-queries", "format_version": 1,
               "dense_pt_version": "0.0.9"})  # fmt: skip
    (tmp_path / "manifest.json").rename(tmp_path / OLD_MANIFEST)
    again = QueryWriter(tmp_path, made)
    assert again.done_ids() == {"d1"} and open_queries(tmp_path)["model"] == "m"
    again.write([{**row, "id": "d2"}])
    assert not (tmp_path / "manifest.json").exists()  # the folder keeps its layout
    with pytest.raises(MismatchError, match="num_queries"):
        QueryWriter(tmp_path, {**made, "num_queries": 3})
    artifacts.finish(tmp_path)  # the run ends: its manifest replaces expansion.json
    assert not (tmp_path / OLD_MANIFEST).exists() and open_queries(tmp_path)["complete"] is True
    assert open_queries(tmp_path)["model"] == "m" and QueryWriter(tmp_path, made).done_ids() == {"d1", "d2"}
