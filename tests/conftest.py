"""Shared fixtures. ``shared_data``: the read-only real data (BEIR SciFact, MS MARCO qrels), found
via $DENSE_PT_SHARED (the shared folder or its data/ folder) or as ``shared/data`` beside the repo
or one of its parents (CI clones have ../shared; worktrees sit one level deeper)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def find_shared_data() -> Path | None:
    env = os.environ.get("DENSE_PT_SHARED")
    candidates = [Path(env) / "data", Path(env)] if env else []
    candidates += [parent / "shared" / "data" for parent in REPO.parents]
    for c in candidates:
        if (c / "beir-scifact" / "corpus.jsonl").exists():
            return c
    return None


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = find_shared_data()
    if path is None:
        pytest.skip("real data not found: set DENSE_PT_SHARED or put shared/data beside the repo")
    return path


@pytest.fixture(autouse=True, scope="session")
def _session_cache(tmp_path_factory: pytest.TempPathFactory):
    """dense-pt's cache (the BM25 indexes ``dense-pt bm25`` keeps without ``--index``, the checksums
    it remembers) in a folder of the test session, not the user's ~/.cache; a test that sets
    ``DENSE_PT_CACHE_DIR`` itself (or a command run with it empty) still decides."""
    if "DENSE_PT_CACHE_DIR" in os.environ:
        yield
        return
    patch = pytest.MonkeyPatch()
    patch.setenv("DENSE_PT_CACHE_DIR", str(tmp_path_factory.mktemp("dense-pt-cache")))
    yield
    patch.undo()
