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
