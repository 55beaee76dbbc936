"""`dense-pt study`: does bottleneck pre-training pay off here? Every objective (``none`` included)
pre-trained with one budget from one initialisation, each result fine-tuned by the same pipeline,
over a few seeds; one table and one chart. The experiment behind SimLM's Table 7 and CDMAE's
ablations, as one command.

A study is a grid of *cells* (objective x seed). Each cell is an ordinary pipeline run in
``OUT/cells/<objective>-seed<seed>/``: the fine-tuning configuration of the study's pipeline file,
the cell's ``seed`` (pre-training, fine-tuning, mining), and a ``[pretrain]`` table made of the
objective and the study's budget. The dev split is fixed across cells (``split_seed``), so seeds
vary the training only. Cells resume and skip exactly as pipeline stages do: an interrupted study
continues where it stopped, and a changed cell (another budget for one objective, a new seed) reruns
alone. Study file (TOML; paths relative to it)::

    out = "runs/study"
    pipeline = "scifact.toml"        # the fine-tuning configuration every cell shares
    set = ["reranker.enabled=false"] # optional overrides of it (as `pipeline run --set`)
    objectives = ["none", "cdmae", "contrastive"]
    seeds = [1, 2, 3]
    split_seed = 13                  # the dev split (default: the pipeline file's seed)

    [pretrain]                       # the budget every objective gets
    max_length = 128
    train = { max_steps = 300, batch_size = 8, lr = 1e-4, warmup = 0.1 }

    [options.simlm]                  # per-objective options (simlm needs a generator)
    generator = "joint"

An objective may be a label for a variant: ``[options.cdmae-cls]`` with ``method = "cdmae"`` and
``pooling = "cls"`` is the cdmae method with those options, tabulated as ``cdmae-cls``. ``until``
(a pipeline stage name) stops every cell after that stage, for a cheaper study (``"zeroshot"``:
pre-training alone; ``"r1"``: one fine-tuning stage); raising it later continues the same cells.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dense_pt.config.pipeline import PipelineFile
from dense_pt.config.study import NO_PRETRAINING, StudyFile
from dense_pt.errors import FormatError
from dense_pt.pipeline.config import ResolvedPipeline

NONE = NO_PRETRAINING
# Stages whose dev metrics the study tabulates, in pipeline order (BM25 is the same in every cell).
STAGES = ("zeroshot", "r1", "r2", "reranker", "distill", "fusion")


@dataclass
class Cell:
    objective: str
    seed: int
    config: ResolvedPipeline  # the validated pipeline configuration

    @property
    def name(self) -> str:
        return f"{self.objective}-seed{self.seed}"


@dataclass
class StudyConfig:
    out: Path
    objectives: list[str]
    seeds: list[int]
    cells: list[Cell]
    measures: list[str]
    until: str | None = None


def load_study(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> StudyConfig:
    """Read a study file and build (and validate) every cell's pipeline configuration, so that a
    mistake in any cell is reported before the first one runs. ``overrides`` apply to the study
    file itself (``seeds=[1]``, ``pretrain.train.max_steps=10``)."""
    from dense_pt.pipeline.config import apply_overrides
    from dense_pt.training import read_toml

    path = Path(path)
    return build_study(apply_overrides(read_toml(path), overrides), path.parent.resolve(), str(path))


def build_study(raw: dict[str, Any], base: Path, where: str = "study") -> StudyConfig:
    from dense_pt.pipeline.config import apply_overrides, validate_config
    from dense_pt.training import read_toml

    study = StudyFile.load(raw, where)
    if study.until is not None:
        from dense_pt.pipeline.run import STAGES as PIPELINE_STAGES

        if study.until not in PIPELINE_STAGES:
            raise FormatError(
                f"until must be a pipeline stage ({', '.join(PIPELINE_STAGES)}), got {study.until!r}", where
            )
    objectives, seeds, options = study.objectives, study.seeds, study.options
    budget = study.pretrain.model_dump(exclude_unset=True)  # as written: each cell's [pretrain] checks it
    sets = study.set
    pipeline_path = Path(study.pipeline)
    pipeline_path = pipeline_path if pipeline_path.is_absolute() else base / pipeline_path
    pipeline_raw = apply_overrides(read_toml(pipeline_path), sets)
    if pipeline_raw.get("pretrain"):
        raise FormatError(f"{pipeline_path} has a [pretrain] table: the study sets it per objective", where)
    out = Path(study.out)
    out = out if out.is_absolute() else base / out
    split_seed = study.split_seed
    if split_seed is None:
        split_seed = pipeline_raw.get("seed", PipelineFile.model_fields["seed"].default)
    cells = []
    for objective in objectives:
        for seed in seeds:
            cell_raw = {**pipeline_raw, "out": str(out / "cells" / f"{objective}-seed{seed}"), "seed": seed}
            cell_raw["data"] = {**pipeline_raw.get("data", {}), "split_seed": split_seed}
            if objective != NONE:
                opts = {k: v for k, v in options.get(objective, {}).items() if k != "method"}
                cell_raw["pretrain"] = {
                    "method": study.method(objective),
                    **budget,
                    "options": opts,
                }
            where_cell = f"{where} (cell {objective}-seed{seed}, pipeline {pipeline_path})"
            cells.append(
                Cell(objective, seed, validate_config(cell_raw, pipeline_path.parent.resolve(), where_cell))
            )
    measures = list(cells[0].config.eval.measures)
    return StudyConfig(out, list(objectives), list(seeds), cells, measures, study.until)


def run_study(
    study: StudyConfig | str | Path,
    progress: bool = False,
    log: Callable[[str], None] = print,
    only: list[str] | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Run (or continue) every cell, then write ``OUT/results.json``, ``OUT/report.md`` and
    ``OUT/study.png``; returns the results. ``only``: run just these objectives (the table still
    lists every finished cell). ``force``: write into folders dense-pt did not write (the study's
    and its cells', as ``pipeline run --force``)."""
    from dense_pt.fsutil import check_output_dir, mark_output_dir
    from dense_pt.pipeline.run import run_pipeline

    study = study if isinstance(study, StudyConfig) else load_study(study)
    if only:
        bad = set(only) - set(study.objectives)
        if bad:
            raise FormatError(f"--only names objectives the study does not have: {sorted(bad)}", "study")
    check_output_dir(study.out, "study", force, proof=("results.json",))
    mark_output_dir(study.out, "study")
    cells: dict[str, dict[str, Any]] = {}
    for i, cell in enumerate(study.cells, 1):
        if only and cell.objective not in only:
            continue
        log(f"[study] cell {i}/{len(study.cells)}: {cell.name}")
        manifests = run_pipeline(
            cell.config,
            progress=progress,
            until=study.until,
            log=_indented(log, cell.name),
            force=force,
        )
        if any(s in manifests for s in STAGES):  # else nothing to tabulate yet (``until``)
            cells[cell.name] = _cell_record(cell, manifests)
    results = summarize(study, _with_finished(study, cells))
    write_study(study, results)
    log(f"[study] report: {study.out / 'report.md'}")
    return results


def _indented(log: Callable[[str], None], cell: str) -> Callable[[str], None]:
    """``log`` for one cell's pipeline lines: indented under the study's, named by the cell."""
    return lambda m: log(f"  {cell} {m}")


def _cell_record(cell: Cell, manifests: dict[str, dict[str, Any]]) -> dict[str, Any]:
    rec: dict[str, Any] = {"objective": cell.objective, "seed": cell.seed, "metrics": {}}
    for name in ("bm25", *STAGES):
        m = manifests.get(name, {})
        if "metrics" in m:
            rec["metrics"][name] = m["metrics"]
    pt = manifests.get("pretrain")
    if pt:
        rec["pretrain"] = {
            "steps": pt.get("steps"),
            "final_loss": pt.get("final_loss"),
            "wall_s": pt.get("wall_s"),
        }
    rec["wall_s"] = round(sum(float(m.get("wall_s", 0)) for m in manifests.values()), 1)
    return rec


def _with_finished(study: StudyConfig, ran: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The cells run now plus those finished earlier (read back from their manifests)."""
    import json

    out = dict(ran)
    for cell in study.cells:
        if cell.name in out:
            continue
        folder = cell.config.out
        manifests = {}
        for name in ("bm25", "pretrain", *STAGES):
            p = folder / name / "manifest.json"
            if p.is_file():
                m = json.loads(p.read_text(encoding="utf-8"))
                if m.get("status") == "done":
                    manifests[name] = m
        if any(s in manifests for s in STAGES):
            out[cell.name] = _cell_record(cell, manifests)
    return out


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return mean, std


def summarize(study: StudyConfig, cells: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """{"cells": ..., "table": {objective: {stage: {measure: {mean, std, n}}}}, "bm25": ...}."""
    table: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    for objective in study.objectives:
        recs = [c for c in cells.values() if c["objective"] == objective]
        for stage in STAGES:
            for measure in study.measures:
                vals = [r["metrics"][stage][measure] for r in recs if measure in r["metrics"].get(stage, {})]
                if vals:
                    mean, std = mean_std(vals)
                    table.setdefault(objective, {}).setdefault(stage, {})[measure] = {
                        "mean": mean,
                        "std": std,
                        "n": len(vals),
                    }
    bm25 = next((c["metrics"]["bm25"] for c in cells.values() if "bm25" in c["metrics"]), None)
    return {"objectives": study.objectives, "seeds": study.seeds, "measures": study.measures,
            "bm25": bm25, "table": table, "cells": cells}  # fmt: skip


STAGE_LABELS = {"zeroshot": "zero-shot", "r1": "R1", "r2": "R2", "reranker": "re-ranker", "distill": "distilled",
                "fusion": "hybrid"}  # fmt: skip


def render_markdown(results: dict[str, Any]) -> str:
    measures = results["measures"]
    primary = measures[0]
    stages = [s for s in STAGES if any(s in t for t in results["table"].values())]
    lines = [
        "# Pre-training study",
        "",
        f"Objectives {', '.join(results['objectives'])}; seeds {', '.join(map(str, results['seeds']))} "
        "(mean ± sample std over the seeds that finished, n per cell in the JSON); every cell fine-tuned "
        "by the same pipeline; dev split fixed across cells.",
        "",
        f"## {primary} on the dev split, per stage",
        "",
        "| objective | " + " | ".join(STAGE_LABELS[s] for s in stages) + " |",
        "|---|" + "---:|" * len(stages),
    ]
    for objective in results["objectives"]:
        row = results["table"].get(objective, {})
        cells = [_fmt(row.get(s, {}).get(primary)) for s in stages]
        lines.append(f"| {objective} | " + " | ".join(cells) + " |")
    if results["bm25"]:
        lines += ["", f"BM25 on the same dev split: {primary} {results['bm25'][primary]:.4f}."]
    last = stages[-1] if stages else None
    if last:
        lines += ["", f"## Every measure, {STAGE_LABELS[last]}", "",
                  "| objective | " + " | ".join(measures) + " |", "|---|" + "---:|" * len(measures)]  # fmt: skip
        for objective in results["objectives"]:
            row = results["table"].get(objective, {}).get(last, {})
            lines.append(f"| {objective} | " + " | ".join(_fmt(row.get(m)) for m in measures) + " |")
    lines += ["", "![study](study.png)", ""]
    return "\n".join(lines)


def _fmt(cell: dict[str, float] | None) -> str:
    if not cell:
        return "–"
    return f"{cell['mean']:.4f} ± {cell['std']:.4f}" if cell["n"] > 1 else f"{cell['mean']:.4f}"


def write_study(study: StudyConfig, results: dict[str, Any]) -> None:
    from dense_pt.fsutil import atomic_file, write_json_atomic

    write_json_atomic(study.out / "results.json", results)
    with atomic_file(study.out / "report.md", "w", encoding="utf-8") as f:
        f.write(render_markdown(results))
    plot_study(results, study.out / "study.png")


def plot_study(results: dict[str, Any], path: Path) -> None:
    """Grouped bars: one group per objective, one bar per stage, error bars = std over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from dense_pt.fsutil import atomic_file

    primary = results["measures"][0]
    stages = [s for s in STAGES if any(s in t for t in results["table"].values())]
    objectives = results["objectives"]
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(objectives) * max(1, len(stages)) / 2), 4))
    width = 0.8 / max(1, len(stages))
    x = np.arange(len(objectives))
    for j, stage in enumerate(stages):
        cells = [results["table"].get(o, {}).get(stage, {}).get(primary) for o in objectives]
        ax.bar(x + j * width, [c["mean"] if c else 0 for c in cells], width,
               yerr=[c["std"] if c else 0 for c in cells], capsize=3, label=STAGE_LABELS[stage])  # fmt: skip
    if results["bm25"]:
        ax.axhline(results["bm25"][primary], color="grey", linestyle="--", linewidth=1, label="BM25")
    ax.set_xticks(x + width * (len(stages) - 1) / 2, objectives)
    ax.set_ylabel(f"dev {primary}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_file(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)
