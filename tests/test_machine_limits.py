"""Out of memory is out of memory: wherever a memory limit bites first (a memory map of the store,
an Arrow or numpy allocation, a memory map or a thread start in the Rust core, the loading of
torch's libraries), the command ends with the one line the docs promise, exit 1, never "not a
readable Arrow IPC file" (a user told their store is damaged may delete it).

Where the limit bites under ``ulimit -v`` depends on the machine, so each place is provoked
directly here, in-process, with the exception the library really raises there (pyarrow's
``OSError("Memory mapping file failed: Cannot allocate memory")``, ``ArrowMemoryError``, numpy's
own ``_ArrayMemoryError`` from an allocation that cannot succeed, the Rust binding's
``DensePtIOError`` with errno 12, the dynamic loader's ``ImportError``); one real ``ulimit`` run
checks the whole path and accepts exactly that line."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cli_helpers import one_line, run_cli

OUT_OF_MEMORY = (
    r"error: out of memory \({what}\): the process reached the memory it may use \(the machine's, "
    r"`ulimit -v`, or the job's limit\); raise the limit, or lower the batch size or --threads"
)
THREADS = (
    r"error: could not start worker threads \({what}\): a memory or process limit \(`ulimit -v` / "
    r"`ulimit -u`\) leaves no room for them; raise it, or use fewer threads \(\$RAYON_NUM_THREADS, --threads\)"
)
MAP_FAILED = "Memory mapping file failed: Cannot allocate memory"  # pyarrow's words (errno unset)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    from dense_pt.data.store import build_store_from_texts
    from dense_pt.data.tokenizer import train_wordpiece

    root = tmp_path_factory.mktemp("limits")
    texts = [f"passage {i} about the {w} trial" for i, w in enumerate("abcdefghij")]
    tok = train_wordpiece(texts, vocab_size=80, min_frequency=1)
    build_store_from_texts(root / "store", [(str(i), t) for i, t in enumerate(texts)], tok)
    (root / "corpus.jsonl").write_text(
        "".join(f'{{"_id": "d{i}", "text": "{t}"}}\n' for i, t in enumerate(texts))
    )
    return root


def _raises(exc: BaseException):
    def fail(*args, **kwargs):
        raise exc

    return fail


def test_a_failed_memory_map_of_the_store_is_out_of_memory(store, capsys, monkeypatch):
    """The flaky test's message: "tokens.arrow: not a readable Arrow IPC file (Memory mapping file
    failed: Cannot allocate memory)" for an intact store."""
    monkeypatch.setattr(pa, "memory_map", _raises(OSError(MAP_FAILED)))
    code, line = one_line(["corpus", "info", str(store / "store")], capsys, monkeypatch)
    assert code == 1 and re.fullmatch(OUT_OF_MEMORY.format(what=MAP_FAILED), line), line


def test_an_arrow_allocation_that_fails_is_out_of_memory(store, capsys, monkeypatch):
    monkeypatch.setattr(pa.ipc, "open_file", _raises(pa.ArrowMemoryError("malloc of size 1073741824 failed")))
    code, line = one_line(["corpus", "info", str(store / "store")], capsys, monkeypatch)
    assert code == 1 and re.fullmatch(OUT_OF_MEMORY.format(what="malloc of size 1073741824 failed"), line), (
        line
    )


def test_a_parquet_file_that_cannot_be_mapped_is_out_of_memory(tmp_path, capsys, monkeypatch):
    import pyarrow.parquet as pq

    corpus = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"_id": ["d1"], "text": ["hello"]}), corpus)
    monkeypatch.setattr(pq, "ParquetFile", _raises(OSError(MAP_FAILED)))
    code, line = one_line(["corpus", "check", str(corpus)], capsys, monkeypatch)
    assert code == 1 and re.fullmatch(OUT_OF_MEMORY.format(what=MAP_FAILED), line), line


def test_a_numpy_allocation_that_fails_is_out_of_memory(store, capsys, monkeypatch):
    """numpy's own MemoryError (``_ArrayMemoryError``), from an allocation no machine can make."""
    import dense_pt.data.store as mod

    monkeypatch.setattr(mod, "_ragged_of", lambda chunked: np.empty((1 << 62,), np.uint8))
    code, line = one_line(["corpus", "info", str(store / "store")], capsys, monkeypatch)
    assert code == 1 and re.fullmatch(OUT_OF_MEMORY.format(what=r"Unable to allocate 4\.00 EiB .*"), line), (
        line
    )


def test_a_failed_memory_map_in_the_rust_core_is_out_of_memory(store, tmp_path, capsys, monkeypatch):
    """The Rust binding turns an io::Error into a DensePtIOError with its errno (12: ENOMEM) and
    the core's message, ``PATH: Cannot allocate memory (os error 12)``."""
    from dense_pt import _native
    from dense_pt.errors import DensePtIOError

    postings = str(tmp_path / "index" / "postings.bin")
    failed = DensePtIOError(errno.ENOMEM, f"{postings}: Cannot allocate memory (os error 12)", postings)
    monkeypatch.setattr(_native, "Bm25Index", type("Bm25Index", (), {"open": staticmethod(_raises(failed))}))
    code, line = one_line(
        ["bm25", str(store / "corpus.jsonl"), "--index", str(tmp_path / "index")], capsys, monkeypatch
    )
    what = re.escape(f"{postings}: Cannot allocate memory (os error 12)")
    assert code == 1 and re.fullmatch(OUT_OF_MEMORY.format(what=what), line), line


def test_a_thread_pool_of_the_rust_core_that_cannot_start_isone_line(store, capsys, monkeypatch):
    """The core's rayon pools answer ``cannot start N threads: <rayon's error>``, raised as an
    InvalidArgumentError (it was exit 2, a usage error): the machine's limit, exit 1."""
    import importlib

    from dense_pt.errors import InvalidArgumentError

    mod = importlib.import_module("dense_pt.pmi.build")  # the package's `build` is the function

    failed = InvalidArgumentError("cannot start 64 threads: Resource temporarily unavailable (os error 11)")

    monkeypatch.setattr(mod, "build_arrays", _raises(failed))
    code, line = one_line(
        ["pmi", "build", str(store / "store"), "--out", str(store / "t.ngram"), "--threads", "64"],
        capsys,
        monkeypatch,
    )
    what = re.escape("cannot start 64 threads: Resource temporarily unavailable (os error 11)")
    assert code == 1 and re.fullmatch(THREADS.format(what=what), line), line


# ---- torch that cannot be loaded ------------------------------------------------------------------
NO_ROOM_FOR_TORCH = """
import importlib.abc, sys
class NoRoom(importlib.abc.MetaPathFinder):
    # what the dynamic loader says when it cannot map torch's library under `ulimit -v`
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("libtorch_cpu.so: failed to map segment from shared object")
        return None
sys.meta_path.insert(0, NoRoom())
from dense_pt.cli import main
sys.argv = ["dense-pt", *sys.argv[1:]]
main()
"""


def _model_folder(root: Path, store: Path) -> Path:
    """A model folder as far as encode checks before loading torch (config, tokenizer)."""
    import json
    import shutil

    model = root / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "bert", "max_position_embeddings": 64}))
    shutil.copy(store / "tokenizer.json", model / "tokenizer.json")
    return model


def test_torch_that_cannot_be_loaded_is_out_of_memory(store, tmp_path):
    """``import torch`` under a memory limit: the loader's ImportError was "internal error"."""
    model = _model_folder(tmp_path, store / "store")
    r = subprocess.run(
        [sys.executable, "-c", NO_ROOM_FOR_TORCH, "encode", str(model), str(store / "store"), "-o",
         str(tmp_path / "e"), "--max-length", "32"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "DENSE_PT_CACHE_DIR": ""},
    )  # fmt: skip
    what = re.escape("libtorch_cpu.so: failed to map segment from shared object")
    assert r.returncode == 1 and re.fullmatch(OUT_OF_MEMORY.format(what=what), r.stderr.strip()), r.stderr


LIMITED = """
import resource, sys
from dense_pt.cli import main
import dense_pt.cli.retrieval, numpy, pyarrow, tokenizers  # loaded at start-up, as under `ulimit -v`
vm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmSize:")) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + (64 << 20),) * 2)  # torch's libraries need far more
sys.argv = ["dense-pt", *sys.argv[1:]]
main()
"""


def test_encode_under_a_memory_limit_is_the_out_of_memory_line(store, tmp_path):
    """The real thing: 64 MB of address space beyond the interpreter, not enough to load torch;
    wherever it bites first, the one line (loop it: it must not depend on where)."""
    pytest.importorskip("torch")
    model = _model_folder(tmp_path, store / "store")
    r = subprocess.run(
        [sys.executable, "-c", LIMITED, "encode", str(model), str(store / "store"), "-o", str(tmp_path / "e"),
         "--max-length", "32"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "DENSE_PT_CACHE_DIR": "", "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    assert re.fullmatch(OUT_OF_MEMORY.format(what=".*"), r.stderr.strip()), r.stderr


@pytest.mark.parametrize("where", ["open", "batch"])
def test_an_arrow_run_that_cannot_be_mapped_or_read_is_out_of_memory(tmp_path, capsys, monkeypatch, where):
    """The run reader (``dense_pt.runs``), like the store's: pyarrow's failed map or read of an intact
    run is the out-of-memory line, never "not a readable Arrow IPC file" / "cannot be read"."""
    trec = tmp_path / "run.trec"
    trec.write_text("q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 1.5 t\n")
    code, _, err = run_cli(
        ["-q", "runs", "convert", str(trec), str(tmp_path / "run.arrow")], capsys, monkeypatch
    )
    assert code == 0, err
    if where == "open":
        monkeypatch.setattr(pa.ipc, "open_file", _raises(OSError(MAP_FAILED)))
    else:
        monkeypatch.setattr(
            pa.ipc.RecordBatchFileReader, "get_batch_with_custom_metadata", _raises(OSError(MAP_FAILED))
        )
    code, line = one_line(["runs", "convert", str(tmp_path / "run.arrow"), str(tmp_path / "back.trec")],
                           capsys, monkeypatch)  # fmt: skip
    assert code == 1 and re.fullmatch(OUT_OF_MEMORY.format(what=MAP_FAILED), line), line
