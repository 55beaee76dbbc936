"""The pipeline's stages, one module each, in the order they run.

A stage module declares ``STAGE = Stage(...)`` (``dense_pt.pipeline.runner.Stage``): its name, the
earlier stages and configuration tables it reads, its outputs, the inputs and parameters its
fingerprint is made of, and a run function. Adding a stage is adding its module here and its name
to ``ORDER`` (where it runs); the runner does the rest (fingerprints, skip, resume, --until,
--only, --dry-run)."""

from __future__ import annotations

import importlib

from dense_pt.pipeline.runner import Stage

ORDER = ("store", "split", "pmi", "pretrain", "bm25", "zeroshot", "r1", "mine", "r2", "reranker", "score",
         "distill", "fusion", "report")  # fmt: skip


def load_stages() -> tuple[Stage, ...]:
    """Every stage, in order; a stage that reads a later one (or itself) is refused."""
    stages = tuple(importlib.import_module(f"{__name__}.{name}").STAGE for name in ORDER)
    seen: set[str] = set()
    for name, stage in zip(ORDER, stages, strict=True):
        later = set(stage.reads) - seen
        if stage.name != name or later:
            raise RuntimeError(
                f"stages/{name}.py: named {stage.name!r}, reads {sorted(later)} not run before it"
            )
        seen.add(name)
    return stages
