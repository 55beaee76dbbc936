"""`dense-pt fuse`: hybrid retrieval, a BM25 run fused with a dense one (RRF or interpolation)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from dense_pt.cli import app
from dense_pt.config.choices import FUSION_METHODS, RRF_K


@app.command()
def fuse(
    sparse: Path = typer.Argument(..., help="The lexical run (TREC), e.g. from `dense-pt bm25`."),
    dense: Path = typer.Argument(..., help="The dense run (TREC), e.g. from `dense-pt search`."),
    out: Path = typer.Option(..., "--out", "-o", help="Where to write the fused TREC run."),
    method: str = typer.Option(
        "interpolation", help="'interpolation' (min-max normalised, weighted sum) or 'rrf' (k / --rrf-k)."
    ),
    weight: float | None = typer.Option(
        None, help="interpolation: the dense run's weight in [0, 1]; omit it to choose it with --tune-qrels."
    ),
    tune_qrels: Path | None = typer.Option(
        None, help="interpolation: qrels of queries to choose the weight on (not the ones you report)."
    ),
    tune_measure: str = typer.Option("nDCG@10", help="The measure the weight maximises on --tune-qrels."),
    rrf_k: int = typer.Option(RRF_K, help="rrf: the constant k of 1 / (k + rank) (Cormack et al. 2009: 60)."),
    k: int = typer.Option(1000, "-k", help="Passages kept per query in the fused run."),
) -> None:
    """Fuse two runs: reciprocal rank fusion, or a score interpolation with a weight given or tuned."""
    from dense_pt.data import load_qrels, load_run, write_run
    from dense_pt.errors import InvalidArgumentError
    from dense_pt.retrieval.fusion import interpolate, rrf, tune_weight

    if method not in FUSION_METHODS:
        raise InvalidArgumentError(f"--method must be one of {', '.join(FUSION_METHODS)}, got {method!r}")
    if k < 1:
        raise InvalidArgumentError(f"-k must be >= 1, got {k}")
    a, b = load_run(sparse), load_run(dense)
    info: dict = {"method": method}
    if method == "rrf":
        if weight is not None or tune_qrels is not None:
            raise InvalidArgumentError("--weight and --tune-qrels are for --method interpolation")
        fused = rrf([a, b], rrf_k, k)
        info["rrf_k"] = rrf_k
    else:
        if (weight is None) == (tune_qrels is None):
            raise InvalidArgumentError("interpolation needs exactly one of --weight W or --tune-qrels QRELS")
        if weight is None and tune_qrels is not None:
            weight, table = tune_weight(a, b, load_qrels(tune_qrels), tune_measure)
            info["tuned_on"] = {"qrels": str(tune_qrels), "measure": tune_measure, "value": table[weight]}
        assert weight is not None  # given, or tuned just above
        fused = interpolate(a, b, weight, k)
        info["weight"] = weight
    write_run(out, fused, tag=f"fused-{method}")
    typer.echo(json.dumps(info))
