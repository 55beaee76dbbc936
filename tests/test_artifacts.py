"""The artifact layer (``dense_pt.artifacts``): one manifest schema, one ownership rule (``claim``),
one reader (``open``), and the older layouts (marks, proof files, manifests without the header)
still read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dense_pt import artifacts, fsutil
from dense_pt.artifacts import legacy
from dense_pt.errors import (
    AlreadyExistsError,
    FormatError,
    InvalidArgumentError,
    MismatchError,
    NotDirectoryError,
    NotFoundError,
)


def test_an_output_folder_is_claimed_only_when_dense_pt_can_prove_it_is_its_own(tmp_path):
    with artifacts.claimed(tmp_path / "new", "embeddings", "encode") as out:  # created, its manifest
        (out / "shard").write_text("x")
    m = artifacts.open(tmp_path / "new", "embeddings", complete=True)
    assert m["written_by"]["command"] == "encode" and m["complete"] is True
    assert artifacts.owner(tmp_path / "new") == "embeddings"
    assert artifacts.check(tmp_path / "new", "embeddings")  # its own: resumable
    with pytest.raises(
        AlreadyExistsError,
        match=r"new was written by dense-pt encode, not pretrain \(it holds a dense-pt embeddings\)",
    ):
        artifacts.check(tmp_path / "new", "pretraining run", command="pretrain")
    (tmp_path / "yours").mkdir()
    (tmp_path / "yours" / "notes.txt").write_text("mine")
    with pytest.raises(AlreadyExistsError, match=r"yours is not empty and dense-pt did not write it"):
        artifacts.check(tmp_path / "yours", "embeddings")
    assert artifacts.check(tmp_path / "yours", "embeddings", force=True)
    # another process of the same command claiming it right now (torchrun's ranks): still empty
    (tmp_path / "racing").mkdir()
    fsutil.temp_path(tmp_path / "racing" / artifacts.MANIFEST, "tmp").write_text("{}")
    assert artifacts.check(tmp_path / "racing", "retriever")
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotDirectoryError, match="it is a file, expected a folder"):
        artifacts.check(tmp_path / "file", "embeddings")
    # a command refused inside the block leaves the folder as it found it
    for name, existed in (("gone", False), ("empty", True)):
        if existed:
            (tmp_path / name).mkdir()
        with pytest.raises(ValueError), artifacts.claimed(tmp_path / name, "embeddings", "encode"):
            raise ValueError("a refused input")
    assert not (tmp_path / "gone").exists() and list((tmp_path / "empty").iterdir()) == []


def test_a_manifest_that_is_not_dense_pts_is_never_overwritten(tmp_path):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "manifest.json").write_text('{"name": "my project"}')
    for force in (False, True):
        with pytest.raises(AlreadyExistsError, match=r"o/manifest\.json is not dense-pt's"):
            artifacts.claim(tmp_path / "o", "embeddings", "encode", force=force)
    assert json.loads((tmp_path / "o" / "manifest.json").read_text()) == {"name": "my project"}


@pytest.mark.parametrize(
    ("command", "kind"),
    [("encode", "embeddings"), ("pretrain", "pretraining run"), ("train distill", "distilled retriever"),
     ("pipeline", "pipeline"), ("pipeline report", "pipeline report")],
)  # fmt: skip
def test_an_old_mark_is_read_and_replaced_by_the_manifest(tmp_path, command, kind):
    out = tmp_path / "o"
    out.mkdir()
    (out / legacy.OLD_MARK).write_text(json.dumps({"written_by": "dense-pt", "command": command}))
    (out / "work.bin").write_text("x")
    assert artifacts.owner(out) == kind
    other = "study" if kind != "study" else "demo"
    with pytest.raises(AlreadyExistsError, match=f"was written by dense-pt {command}, not {other}"):
        artifacts.claim(out, other, other)
    artifacts.claim(out, kind, command)
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "work.bin"]
    assert artifacts.open(out, kind)["complete"] is False


def test_a_mark_that_is_not_dense_pts_json_proves_nothing(tmp_path):
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / legacy.OLD_MARK).write_text("not json")
    assert artifacts.owner(tmp_path / "fake") is None
    with pytest.raises(AlreadyExistsError, match="dense-pt did not write it"):
        artifacts.check(tmp_path / "fake", "embeddings")


@pytest.mark.parametrize(("kind", "proof"), sorted(legacy.PROOF.items()))
def test_a_folder_written_before_the_marks_is_proven_by_its_commands_file(tmp_path, kind, proof):
    out = tmp_path / "o"
    out.mkdir()
    (out / proof[-1]).write_text("{}")
    assert artifacts.check(out, kind)
    wrong = "study" if kind != "study" else "demo"
    if proof[-1] not in legacy.PROOF.get(wrong, ()):
        with pytest.raises(AlreadyExistsError):
            artifacts.check(out, wrong)


def test_a_pipeline_written_before_the_marks_is_proven_by_a_stage_manifest(tmp_path):
    (tmp_path / "p" / "split").mkdir(parents=True)
    (tmp_path / "p" / "split" / "manifest.json").write_text('{"fingerprint": "ab", "status": "done"}')
    assert artifacts.check(tmp_path / "p", "pipeline")
    with pytest.raises(AlreadyExistsError):
        artifacts.check(tmp_path / "p", "study")


def test_open_names_what_is_wrong(tmp_path):
    out = tmp_path / "o"
    with pytest.raises(NotFoundError, match="o: no such embeddings folder"):
        artifacts.open(out, "embeddings")
    artifacts.write(out, artifacts.header("bm25 index", "bm25", key={"k1": 0.9}), {"stats": {}})
    m = artifacts.open(out, "bm25 index", key={"k1": 0.9})
    assert m["stats"] == {} and m["written_by"]["version"] == __import__("dense_pt").__version__
    with pytest.raises(MismatchError, match="its key differs"):
        artifacts.open(out, "bm25 index", key={"k1": 1.2})
    with pytest.raises(InvalidArgumentError, match="holds a dense-pt bm25 index, not a corpus store"):
        artifacts.open(out, "corpus store")
    with pytest.raises(FormatError, match=r"the bm25 index is incomplete: run `dense-pt bm25` again"):
        artifacts.open(out, "bm25 index", complete=True)
    for field, value, want in (("format", "1", "an integer"), ("complete", 1, "true or false"),
                               ("written_by", {"command": "bm25"}, "an object with 'command' and 'version'")):  # fmt: skip
        data = json.loads((out / "manifest.json").read_text())
        (out / "manifest.json").write_text(json.dumps({**data, field: value}))
        with pytest.raises(FormatError, match=rf"o/manifest\.json: '{field}' must be {want}"):
            artifacts.open(out, "bm25 index")
        (out / "manifest.json").write_text(json.dumps(data))
    data["files"] = {"../victim": {"bytes": 1, "xxh3_128": "0"}}
    (out / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(Exception, match="a path that leads outside its folder"):
        artifacts.open(out, "bm25 index")


def test_a_body_never_repeats_the_header(tmp_path):
    with pytest.raises(ValueError, match=r"repeats header fields \['complete'\]"):
        artifacts.write(tmp_path, artifacts.header("demo", "demo"), {"complete": True})


OLD_MANIFESTS: dict[str, dict[str, Any]] = {  # as older dense-pt wrote them (trimmed to the fields that tell them apart)
    "bm25 index": {"kind": "dense-pt bm25 index", "key": {"format": 2, "k1": 0.9}, "stats": {"docs": 3},
                   "files": {"a.u32": {"bytes": 4, "xxh3_128": "0" * 32}}, "dense_pt_version": "0.9.0"},
    "pipeline stage": {"stage": "bm25", "fingerprint": "f" * 64, "status": "running", "params": {"k": 10},
                       "code_version": "0.8.0"},
    "embeddings": {"format_version": 1, "settings": {"kind": "queries", "source_hash": "s"}, "shards": [],
                   "complete": True, "kind": "queries", "dim": 8},
    "corpus store": {"format_version": 1, "special_tokens": {}, "columns": {}, "tokenizer": {}, "files": {}},
    "distilled retriever": {"stage": "distill", "steps": 10, "settings": {"alpha": 0.2}, "inputs": {}},
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(OLD_MANIFESTS))
def test_an_old_manifest_reads_in_the_schema_with_its_own_fields(tmp_path, kind):
    old = OLD_MANIFESTS[kind]
    (tmp_path / "manifest.json").write_text(json.dumps(old))
    m = artifacts.open(tmp_path, kind)
    head = artifacts.parse_header(m, tmp_path / "manifest.json")
    assert head.kind == kind
    assert head.written_by.version == old.get("code_version", old.get("dense_pt_version", "unknown"))
    assert head.complete is (old.get("status", "done") == "done" and old.get("complete", True) is True)
    mine = {k: v for k, v in old.items() if k not in artifacts.manifest.HEADER_KEYS and k != "format_version"}
    assert {k: m[k] for k in mine} == mine  # what the kind itself recorded is all there
    if kind == "bm25 index":
        assert head.key == old["key"] and head.format == 2 and head.files == old["files"]
    if kind == "pipeline stage":
        assert head.key == old["fingerprint"] and head.settings == old["params"]
    if kind == "embeddings":
        assert head.settings == old["settings"] and head.key == "s"


def test_a_file_is_verified_by_its_cached_checksum(tmp_path, monkeypatch):
    from dense_pt.artifacts import checksums

    monkeypatch.setenv("DENSE_PT_CACHE_DIR", "")
    f = tmp_path / "f.bin"
    f.write_bytes(b"abc" * 1000)
    entry = artifacts.checksum_entry(f)
    assert entry["bytes"] == 3000 and entry[artifacts.HASH] == checksums.file_checksum(f)
    calls: list[Path] = []

    def counting(p: Path) -> str:
        calls.append(p)
        return "x"

    monkeypatch.setattr(checksums, "file_checksum", counting)
    artifacts.verify_file(f, entry)  # the same file, verified when written: a stat
    assert calls == []
    with pytest.raises(FormatError, match="checksum mismatch"):
        artifacts.verify_file(f, entry, verify="full")
    f.write_bytes(b"abd" * 1000)
    with pytest.raises(FormatError, match="checksum mismatch"):
        artifacts.verify_file(f, entry)
    f.write_bytes(b"ab")
    with pytest.raises(FormatError, match="file has 2 bytes but the manifest recorded 3000"):
        artifacts.verify_file(f, entry)


def test_under_torchrun_only_the_main_process_writes_the_manifest(tmp_path, monkeypatch):
    """The ranks of one command claim one folder together: the others check it, rank 0 writes (a
    rank finishing early never overwrites what rank 0 wrote last)."""
    monkeypatch.setenv("RANK", "1")
    with artifacts.claimed(tmp_path / "o", "retriever", "train retriever"):
        assert list((tmp_path / "o").iterdir()) == []
    assert list((tmp_path / "o").iterdir()) == []
    monkeypatch.setenv("RANK", "0")
    with artifacts.claimed(tmp_path / "o", "retriever", "train retriever") as out:
        artifacts.write(out, artifacts.header("retriever", "train retriever", complete=True), {"steps": 3})
        monkeypatch.setenv("RANK", "1")
        assert artifacts.finish(out) is None  # rank 1 done first: leaves it to rank 0
        monkeypatch.setenv("RANK", "0")
    assert artifacts.open(tmp_path / "o", "retriever", complete=True)["steps"] == 3


def test_one_cached_digest_for_both_hashes(tmp_path, monkeypatch):
    """SHA-256 (the identities older versions recorded) goes through the same per-inode cache as
    xxh3-128: a file is hashed once per change, in this process and the next."""
    import hashlib

    from dense_pt.artifacts import checksums

    monkeypatch.setenv("DENSE_PT_CACHE_DIR", str(tmp_path / "cache"))
    f = tmp_path / "corpus.jsonl"
    f.write_bytes(b'{"_id": "d1", "text": "x"}\n' * 100)
    want = hashlib.sha256(f.read_bytes()).hexdigest()
    assert checksums.file_digest(f, "sha256") == want
    assert checksums.file_digest(f) == checksums.file_checksum(f)
    read: list[str] = []
    real = checksums._sha256

    def reading(p: Path) -> str:
        read.append(str(p))
        return real(p)

    monkeypatch.setattr(checksums, "_sha256", reading)
    checksums._verified.clear()  # a new process: only the cache folder remembers
    assert checksums.file_digest(f, "sha256") == want and checksums.file_digest(f) == checksums.file_checksum(
        f
    )
    assert read == []  # both digests kept in the inode's one cache file
    f.write_bytes(f.read_bytes() + b"\n")
    assert checksums.file_digest(f, "sha256") == hashlib.sha256(f.read_bytes()).hexdigest() and len(read) == 1
    with pytest.raises(InvalidArgumentError, match="unknown hash 'md5'"):
        checksums.file_digest(f, "md5")
