"""How dense-pt writes files: ordinary permissions under any umask, a full disk or a refused
folder as one line naming the user's path (never a hidden temporary), the temporaries of a killed
run (kill -9, SIGTERM) removed by the next run of the command (never a live process's), and the
killed run resumed to the same bytes."""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import signal
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from dense_pt import _native, fsutil
from dense_pt.artifacts.replace import atomic_dir
from dense_pt.config.corpus import CorpusSettings
from dense_pt.data.build import build_corpus_store
from dense_pt.errors import DensePtIOError
from dense_pt.pmi import build_arrays

WORDS = "the immune response to a vaccine was measured in elderly patients with chronic disease".split()


def _corpus(path: Path, n: int, seed: int = 0, words: int = 30) -> Path:
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"_id": f"d{i}", "text": " ".join(rng.choice(WORDS, words))}) + "\n")
    return path


@pytest.fixture(scope="module")
def tok_file(tmp_path_factory):
    from dense_pt.data.tokenizer import train_wordpiece

    path = tmp_path_factory.mktemp("tok") / "tok.json"
    train_wordpiece([" ".join(WORDS)] * 5, vocab_size=100, min_frequency=1).save(str(path))
    return path


def _run_child(code: str, *args: str, fsize: int | None = None, umask: int | None = None):
    """Run ``code`` in a fresh interpreter, optionally with a file size limit (SIGXFSZ ignored, so
    a write past it fails with EFBIG as on a full disk) or a umask."""

    def setup() -> None:
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        if umask is not None:
            os.umask(umask)

    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        preexec_fn=setup,
        capture_output=True,
        text=True,
        env={**os.environ, "DENSE_PT_CACHE_DIR": ""},
    )


# ---- temporaries -------------------------------------------------------------------------------
def test_temporary_names_say_who_owns_them_and_rust_agrees():
    assert _native.temp_owner_tag() == fsutil.owner_tag() == f"{os.getpid()}-{fsutil._host()}"
    t = fsutil.temp_path(Path("some/where/store"), "partial")
    assert t.parent == Path("some/where") and t.name.startswith(".store.") and t.name.endswith(".partial")
    assert fsutil._owner_of(t.name) == (os.getpid(), fsutil._host())
    for foreign in ["store", ".store.partial", ".store.123.partial", ".x.1-h.zz.tmp", ".x.1-h.00.txt"]:
        assert fsutil._owner_of(foreign) is None


def test_only_temporaries_of_dead_processes_on_this_host_are_removed(tmp_path):
    host = fsutil._host()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        names = {
            "dead_file": f".run.trec.{dead.pid}-{host}.00aa.tmp",
            "dead_dir": f".store.{dead.pid}-{host}.00bb.partial",
            "dead_rust_run": f".pmi-run.{dead.pid}-{host}.00cc.tmp",
            "live": f".run.trec.{live.pid}-{host}.00dd.tmp",
            "mine": f".run.trec.{os.getpid()}-{host}.00ee.tmp",
            "other_host": f".run.trec.{dead.pid}-elsewhere.00ff.tmp",
            "old_style": ".run.trec.k2j4l1x0.tmp",
            "user_file": "notes.tmp",
        }
        for key, name in names.items():
            if key == "dead_dir":
                (tmp_path / name).mkdir()
                (tmp_path / name / "tokens.arrow").write_bytes(b"x")
            else:
                (tmp_path / name).write_bytes(b"x")
        removed = {p.name for p in fsutil.remove_stale_temporaries(tmp_path)}
        assert removed == {names["dead_file"], names["dead_dir"], names["dead_rust_run"]}
        assert {p.name for p in tmp_path.iterdir()} == set(names.values()) - removed
    finally:
        live.kill()
        live.wait()


def test_a_stale_old_folder_is_put_back_when_its_target_is_missing(tmp_path):
    # Killed between the two renames of a replacement: the previous store is not lost.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    old = tmp_path / f".store.{dead.pid}-{fsutil._host()}.0abc.old"
    old.mkdir()
    (old / "manifest.json").write_text("{}")
    fsutil.remove_stale_temporaries(tmp_path)
    assert (tmp_path / "store" / "manifest.json").exists() and not old.exists()


KILL_DURING_BUILD = """
import os, signal, sys
from dense_pt.config.corpus import CorpusSettings
from dense_pt.data.build import build_corpus_store
sig = getattr(signal, sys.argv[4])
def progress(done):
    os.kill(os.getpid(), sig)  # killed after the first batch, mid-build
build_corpus_store(sys.argv[1], sys.argv[2], sys.argv[3], CorpusSettings(batch_size=50), progress=progress)
"""


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM"])
def test_killed_corpus_build_leaves_a_partial_that_the_next_build_removes(tmp_path, tok_file, sig):
    corpus = _corpus(tmp_path / "corpus.jsonl", 400)
    out = tmp_path / "store"
    r = _run_child(KILL_DURING_BUILD, str(corpus), str(tok_file), str(out), sig)
    assert r.returncode == -getattr(signal, sig), r.stderr
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".store.")]
    assert len(left) == 1 and left[0].endswith(".partial") and not out.exists()
    res = build_corpus_store(corpus, tok_file, out)  # the same command again
    assert res.built and res.passages == 400
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl", "store"]
    clean = build_corpus_store(corpus, tok_file, tmp_path / "clean").store
    assert (out / "tokens.arrow").read_bytes() == (clean.path / "tokens.arrow").read_bytes()


KILL_DURING_PMI = """
import os, signal, sys
import numpy as np
from dense_pt.pmi import build_arrays
rng = np.random.default_rng(3)
values = rng.integers(0, 3, size=400_000).astype(np.uint32)
offsets = np.arange(0, 400_001, 500, dtype=np.int64)
def progress(phase, done, total):
    if phase == "order 3" and done > 0:
        os.kill(os.getpid(), signal.SIGKILL)  # runs of order 3 spilled, table half written
build_arrays(values, offsets, sys.argv[1], vocab_size=3, memory_gb=float(sys.argv[2]), threads=1,
             progress=progress)
"""


def test_killed_pmi_build_leaves_runs_that_the_next_build_removes(tmp_path):
    rng = np.random.default_rng(3)
    values = rng.integers(0, 3, size=400_000).astype(np.uint32)
    offsets = np.arange(0, 400_001, 500, dtype=np.int64)
    with pytest.raises(Exception, match=r"needs at least ([0-9.]+) GB") as refused:
        build_arrays(values, offsets, tmp_path / "x.pmi", vocab_size=3, memory_bytes=0, threads=1)
    least = str(refused.value).split("needs at least ")[1].split(" ")[0]
    out = tmp_path / "t.pmi"
    r = _run_child(KILL_DURING_PMI, str(out), least)
    assert r.returncode == -signal.SIGKILL, r.stderr
    runs = [p for p in tmp_path.iterdir() if p.name.startswith(".pmi-run.")]
    tables = [p for p in tmp_path.iterdir() if p.name.startswith(".t.pmi.")]
    assert runs and len(tables) == 1 and not out.exists()
    stats = build_arrays(values, offsets, out, vocab_size=3, memory_gb=float(least), threads=1)
    assert stats["spilled_runs"] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.pmi"]
    build_arrays(values, offsets, tmp_path / "whole.pmi", vocab_size=3, memory_gb=1, threads=1)
    assert out.read_bytes() == (tmp_path / "whole.pmi").read_bytes()


# ---- permissions -------------------------------------------------------------------------------
WRITE_EVERYTHING = """
import sys
from pathlib import Path
import numpy as np
from dense_pt.artifacts.replace import atomic_dir
from dense_pt.fsutil import atomic_file, write_json_atomic
from dense_pt.data.build import build_corpus_store
from dense_pt.runs import write_run
from dense_pt.pmi import build, score
from dense_pt.config.pmi import PmiBuild
from dense_pt import _native
out = Path(sys.argv[1])
write_json_atomic(out / "sub" / "manifest.json", {"a": 1})
with atomic_file(out / "emb.npy", "wb") as f:
    np.save(f, np.zeros(3))
with atomic_dir(out / "folder") as d:
    (d / "x.txt").write_text("x")
write_run(out / "run.trec", {"q": {"d": 1.0}})
store = build_corpus_store(sys.argv[2], sys.argv[3], out / "store").store
build(store, out / "t.pmi", PmiBuild(memory_gb=0.5))
score(store, out / "t.pmi")
_native.negatives_write(str(out / "neg.dpneg"), ["q"], ["a", "b"], np.array([0, 1], np.uint64),
                        np.array([1], np.uint32))
"""


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_outputs_get_the_permissions_the_umask_gives(tmp_path, tok_file, umask):
    corpus = _corpus(tmp_path / "corpus.jsonl", 20)
    out = tmp_path / "out"
    r = _run_child(WRITE_EVERYTHING, str(out), str(corpus), str(tok_file), umask=umask)
    assert r.returncode == 0, r.stderr
    checked = 0
    for path in [out, *out.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        want = (0o777 if path.is_dir() else 0o666) & ~umask
        assert mode == want, f"{path}: {oct(mode)} != {oct(want)}"
        checked += 1
    names = {p.name for p in out.rglob("*")}
    assert {"manifest.json", "emb.npy", "x.txt", "run.trec", "tokens.arrow", "importance.arrow"} <= names
    assert {"t.pmi", "neg.dpneg", "store", "folder", "sub"} <= names and checked >= 14


# ---- a full disk, a refused folder ---------------------------------------------------------------
def test_failed_writes_name_the_target_not_the_temporary(tmp_path, monkeypatch):
    target = tmp_path / "ro" / "store"
    target.parent.mkdir()
    real_mkdir = os.mkdir

    def refuse(path, mode=0o777):
        if ".partial" in str(path):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_mkdir(path, mode)

    monkeypatch.setattr(os, "mkdir", refuse)
    with pytest.raises(DensePtIOError) as info:
        with atomic_dir(target):
            pass
    msg = str(info.value)
    assert msg == f"cannot write {target}: Permission denied" and ".partial" not in msg
    assert info.value.errno == errno.EACCES and info.value.filename == str(target)
    monkeypatch.undo()
    (tmp_path / "a_file").write_text("")
    with pytest.raises(DensePtIOError, match=r"cannot write .*x\.json: .*a_file is not a folder"):
        fsutil.write_json_atomic(tmp_path / "a_file" / "sub" / "x.json", {})


FULL_DISK = """
import sys
from pathlib import Path
import numpy as np
from dense_pt.errors import DensePtIOError
what, out = sys.argv[1], Path(sys.argv[2])
try:
    if what == "run":
        from dense_pt.runs import write_run
        write_run(out, {f"q{i}": {f"d{j}": float(j) for j in range(100)} for i in range(100)})
    elif what == "npy":  # encode's shard writer
        from dense_pt.fsutil import atomic_file
        with atomic_file(out, "wb") as f:
            np.save(f, np.zeros((1000, 64), np.float16))
    elif what == "store":
        from dense_pt.data.build import build_corpus_store
        build_corpus_store(sys.argv[3], sys.argv[4], out)
    elif what == "pmi":
        from dense_pt.pmi import build_arrays
        v = np.random.default_rng(0).integers(0, 5000, 300_000).astype(np.uint32)
        build_arrays(v, np.array([0, v.size]), out, vocab_size=5000, memory_gb=0.5)
    elif what == "training":  # pretrain's writers: the log, then a checkpoint (one torch import)
        import torch
        from dense_pt.training.checkpoint import save_checkpoint
        from dense_pt.training.progress import JsonlLog
        try:
            log = JsonlLog(out / "log.jsonl")
            for i in range(10_000):
                log.write({"step": i, "loss": 1.0, "pad": "x" * 20})
        except DensePtIOError as exc:
            print("ERROR:", exc)
        model = torch.nn.Linear(200, 200)
        opt = torch.optim.AdamW(model.parameters())
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
        save_checkpoint(out / "checkpoints", 1, model, opt, sched, None, {})
except DensePtIOError as exc:
    print("ERROR:", exc)
    sys.exit(2)
"""


@pytest.mark.parametrize("what", ["run", "npy", "store", "pmi", "training"])
def test_a_full_disk_is_one_line_naming_the_users_path(tmp_path, tok_file, what):
    if what == "training":
        pytest.importorskip("torch")
    corpus = _corpus(tmp_path / "corpus.jsonl", 1500 if what == "store" else 1, words=60)
    out = tmp_path / {"run": "run.trec", "npy": "emb.npy", "store": "store", "pmi": "t.pmi"}.get(what, what)
    r = _run_child(FULL_DISK, what, str(out), str(corpus), str(tok_file), fsize=64 << 10)
    assert r.returncode == 2, (r.stdout, r.stderr[-2000:])
    lines = r.stdout.strip().splitlines()
    assert len(lines) == (2 if what == "training" else 1) and not r.stderr, (r.stdout, r.stderr)
    targets = (
        [out / "log.jsonl", out / "checkpoints" / "checkpoint-00000001"] if what == "training" else [out]
    )
    for line, target in zip(lines, targets, strict=True):
        assert line.startswith(f"ERROR: cannot write {target}: "), line
        assert re.search(r"File too large|disk is full", line), line
        assert ".tmp" not in line and ".partial" not in line, line
    if what != "training":
        assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl"]


def test_a_full_disk_during_corpus_build_on_the_command_line(tmp_path, tok_file):
    corpus = _corpus(tmp_path / "corpus.jsonl", 1500, words=60)
    store = tmp_path / "store"
    r = _run_child(
        "import sys; from dense_pt.cli import main; sys.argv[0] = 'dense-pt'; main()",
        "corpus", "build", str(corpus), "-t", str(tok_file), "-o", str(store),
        fsize=64 << 10,
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()  # progress lines (stderr is not a terminal), then one error
    assert lines[-1] == f"error: cannot write {store}: File too large", r.stderr
    assert all(x.startswith("corpus build: ") for x in lines[:-1]), r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl"]


@pytest.mark.slow  # a fresh interpreter importing torch and transformers: ~8 s of CPU
def test_a_full_disk_during_pretrain_names_the_checkpoint_and_leaves_no_partial(tmp_path):
    """A file size limit that the model's safetensors fits under and the optimiser's state does not
    (torch.save's zip writer says only "[enforce fail at inline_container.cc] unexpected pos"): one
    line naming the checkpoint, and no `.checkpoint-*.partial` left in the run's folder."""
    pytest.importorskip("torch")
    from pretrain_helpers import tiny_config_file, tiny_store

    store = tiny_store(tmp_path / "store")
    config = tiny_config_file(tmp_path / "tiny.json", store)
    out = tmp_path / "out"
    r = _run_child(
        "import sys; from dense_pt.cli import main; sys.argv[0] = 'dense-pt'; main()",
        "--quiet", "pretrain", "--method", "cdmae", "--model", config, "--corpus", str(store.path), "-o", str(out),
        "--max-steps", "2", "--batch-size", "4", "--save-every", "1", "--log-every", "1", "--warmup", "1",
        "--max-length", "48",
        fsize=300_000,
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    assert re.fullmatch(
        rf"error: cannot write {re.escape(str(out / 'checkpoints' / 'checkpoint-00000001'))}: the write stopped "
        r"short \(\[enforce fail at inline_container\.cc:\d+\] \. unexpected pos \d+ vs \d+\): the disk is full "
        r"or a file size limit was reached",
        r.stderr.strip(),
    ), r.stderr
    assert not list(out.rglob(".checkpoint-*")) and not list((out / "checkpoints").iterdir())


def test_force_through_a_symlinked_output_replaces_its_target_and_leaves_nothing_beside_it(
    tmp_path, tok_file
):
    """`-o LINK --force` where LINK points at an older store on another disk: the new store takes
    the target's place, the link stays a link, and no `.LINK.*.old` is left behind (it was: the old
    folder moved aside was the link itself, which rmtree refuses)."""
    corpus = _corpus(tmp_path / "corpus.jsonl", 20)
    (tmp_path / "disk").mkdir()
    build_corpus_store(corpus, tok_file, tmp_path / "disk" / "real", CorpusSettings(max_length=32))
    os.symlink(tmp_path / "disk" / "real", tmp_path / "link")
    _corpus(corpus, 30, seed=1)
    build_corpus_store(corpus, tok_file, tmp_path / "link", CorpusSettings(max_length=32), force=True)
    assert (tmp_path / "link").is_symlink()
    assert json.loads((tmp_path / "disk" / "real" / "manifest.json").read_text())["num_rows"] == 30
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl", "disk", "link"]
    assert sorted(p.name for p in (tmp_path / "disk").iterdir()) == ["real"]


def test_host_tag_is_sanitised():
    assert fsutil._host() == "".join(c if c.isalnum() or c == "_" else "_" for c in socket.gethostname())
