"""The demo's PMI stage: the n-gram table of the store and its AMI ``importance`` column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dense_pt.config.pmi import MIN_COUNT, WINDOW, PmiBuild
from dense_pt.data.store import CorpusStore
from dense_pt.errors import DensePtError
from dense_pt.pmi import NgramTable, build, score


def demo_stage(
    store_path: str | Path,
    workdir: str | Path,
    window: int = WINDOW,
    min_count: int = MIN_COUNT,
    force: bool = False,
) -> dict[str, Any]:
    """The demo's PMI stage: build the 1..window-gram table of the store into ``workdir`` and add
    the ``importance`` column. Skips the work when both are already there and match (same store
    vocabulary, same table, same window) unless ``force``."""
    store = CorpusStore.open(store_path)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    table_path = workdir / "ngrams.pmi"
    col = store.manifest.get("columns", {}).get("importance", {})
    if not force and table_path.exists() and col.get("table") == str(table_path.resolve()):
        try:
            table = NgramTable.open(table_path)
            fresh = (
                table.vocab_hash == store.vocab_hash
                and table.num_passages == len(store)
                and table.N[1] == int(store.ragged()[0].size)
                and col.get("window") == window
                and table.min_count == min_count
                and table.max_n == window
            )
        except DensePtError:
            fresh = False
        if fresh:
            return {
                "status": "up to date",
                "table": str(table_path),
                "n-grams": list(table.entries.values()),
            }
    built = build(store, table_path, PmiBuild(max_n=window, min_count=min_count, memory_gb=2.0))
    scored = score(store, table_path, window=window, force=True)
    return {
        "status": "ran",
        "table": str(table_path),
        "n-grams": built["entries"],
        "build s": round(built["seconds"], 2),
        "AMI tokens/s": round(scored["tokens_per_s"]),
        "mean AMI": round(scored["mean"], 3),
    }
