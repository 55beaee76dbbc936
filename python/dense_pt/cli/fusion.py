"""`dense-pt fuse`: hybrid retrieval, a BM25 run fused with a dense one (RRF or interpolation).
Its settings are ``dense_pt.config.fusion.FuseSettings``' fields (one option each)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from dense_pt import logs
from dense_pt.cli import app
from dense_pt.cli.options import (
    config_option,
    force_option,
    load_settings,
    model_options,
    set_option,
    split,
    with_model_options,
)
from dense_pt.cli.output import emit, json_option
from dense_pt.config.fusion import FuseSettings


def fuse(
    sparse: Path = typer.Argument(..., help="The lexical run (Arrow or TREC), e.g. from `dense-pt bm25`."),
    dense: Path = typer.Argument(..., help="The dense run (Arrow or TREC), e.g. from `dense-pt search`."),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Where to write the fused run (.arrow: Arrow; else TREC)."
    ),
    tune_qrels: Path | None = typer.Option(
        None, help="interpolation: qrels of queries to choose the weight on (not the ones you report)."
    ),
    force: bool = force_option(),
    as_json: bool = json_option(),
    config: Path | None = config_option(),
    set_: list[str] = set_option(),
    **values: Any,
) -> None:
    """Fuse two runs: reciprocal rank fusion, or a score interpolation with a weight given or tuned."""
    from dense_pt.artifacts import check_output_file
    from dense_pt.retrieval.fusion import fuse_files

    s = load_settings(FuseSettings, config, set_, split(values, FUSE), "dense-pt fuse")
    check_output_file(out, force)
    summary = fuse_files(sparse, dense, out, s, tune_qrels)
    emit({"out": out, **summary}, as_json, lambda: logs.status(_describe(out, summary)))


def _describe(out: Path, summary: dict[str, Any]) -> str:
    """The fusion as one line: what was written and how (RRF's k, or the weight and its tuning)."""
    if summary["method"] == "rrf":
        return f"wrote {out}: reciprocal rank fusion, k = {summary['rrf_k']}"
    tuned = summary.get("tuned_on")
    how = f" (tuned on {tuned['qrels']}: {tuned['measure']} {tuned['value']:.4f})" if tuned else ""
    return f"wrote {out}: interpolation, dense weight {summary['weight']:g}{how}"


FUSE = [("top", FuseSettings)]
app.command()(with_model_options(fuse, model_options(FUSE, flags={"k": ["-k"]})))
