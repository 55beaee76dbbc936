"""The end-to-end demo; every stage of the pipeline adds itself here."""

from __future__ import annotations

from pathlib import Path


def run_demo(out: Path, corpus: Path | None = None) -> dict:
    raise NotImplementedError("demo: filled in by the foundation work")
