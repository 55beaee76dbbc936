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
``share_pretraining = true`` pre-trains each objective once, in its first seed's cell, and fine-tunes
that encoder in the other seeds' cells (the cells then run seed by seed, so every pre-training comes
first). ``run_study(budget_s=...)`` skips the cells it cannot start in time and says so. Every
objective is compared with ``none`` query by query on the dev split (``compare_with_none``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from dense_pt.config.pipeline import PipelineFile
from dense_pt.config.study import NO_PRETRAINING, StudyFile
from dense_pt.errors import DensePtError, FormatError
from dense_pt.pipeline.config import ResolvedPipeline

NONE = NO_PRETRAINING
PRETRAINING = ("pmi", "pretrain")  # the stages a cell's pre-training time counts
REUSED = ("store", "split", "bm25", "pmi")  # data stages a cell copies from another with the same fingerprint
# Stages whose dev metrics the study tabulates, in pipeline order (BM25 is the same in every cell).
STAGES = ("zeroshot", "r1", "r2", "reranker", "distill", "fusion")


@dataclass
class Cell:
    objective: str
    seed: int
    config: ResolvedPipeline  # the validated pipeline configuration
    pretrained_by: str | None = None  # the cell whose pre-trained encoder it fine-tunes (shared)

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
    share_pretraining: bool = False


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
    for objective, seed in _cell_order(objectives, seeds, study.share_pretraining):
        cell_raw = {**pipeline_raw, "out": str(out / "cells" / f"{objective}-seed{seed}"), "seed": seed}
        cell_raw["data"] = {**pipeline_raw.get("data", {}), "split_seed": split_seed}
        source = None
        if objective != NONE and study.share_pretraining and seed != seeds[0]:
            source = f"{objective}-seed{seeds[0]}"  # its encoder, written before this cell runs
            encoder = out / "cells" / source / "pretrain" / "run" / "encoder"
            cell_raw["model"] = {**pipeline_raw.get("model", {}), "init": str(encoder)}
        elif objective != NONE:
            opts = {k: v for k, v in options.get(objective, {}).items() if k != "method"}
            cell_raw["pretrain"] = {"method": study.method(objective), **budget, "options": opts}
        where_cell = f"{where} (cell {objective}-seed{seed}, pipeline {pipeline_path})"
        config = validate_config(cell_raw, pipeline_path.parent.resolve(), where_cell)
        cells.append(Cell(objective, seed, config, source))
    measures = list(cells[0].config.eval.measures)
    return StudyConfig(
        out, list(objectives), list(seeds), cells, measures, study.until, study.share_pretraining
    )


def _cell_order(objectives: list[str], seeds: list[int], shared: bool) -> list[tuple[str, int]]:
    """Objective by objective; with shared pre-training seed by seed, so that every objective's
    pre-training (in its first seed's cell) runs before the cells that fine-tune its encoder."""
    if shared:
        return [(o, s) for s in seeds for o in objectives]
    return [(o, s) for o in objectives for s in seeds]


def run_study(
    study: StudyConfig | str | Path,
    progress: bool = False,
    log: Callable[[str], None] = print,
    only: list[str] | None = None,
    force: bool = False,
    budget_s: float | None = None,
    on_cell: Callable[[Cell, dict[str, dict[str, Any]]], None] | None = None,
    keep_going: bool = False,
) -> dict[str, Any]:
    """Run (or continue) every cell, then write ``OUT/results.json``, ``OUT/report.md`` and
    ``OUT/study.png``; returns the results. ``only``: run just these objectives (the table still
    lists every finished cell). ``force``: write into folders dense-pt did not write (the study's
    and its cells', as ``pipeline run --force``). ``budget_s``: a cell is started only while it can
    finish within this many seconds of the start (judged by the longest cell of its kind so far);
    the others are skipped and listed under ``skipped``. ``on_cell(cell, manifests)``: called after
    each cell that ran (its time counts as the cell's). ``keep_going``: a cell that fails is listed under
    ``failed`` (with the cells that fine-tune its encoder) and the study goes on."""
    from dense_pt import artifacts

    study = study if isinstance(study, StudyConfig) else load_study(study)
    if only:
        bad = set(only) - set(study.objectives)
        if bad:
            raise FormatError(f"--only names objectives the study does not have: {sorted(bad)}", "study")
    artifacts.claim(study.out, "study", "study", force=force)
    clock = _Budget(budget_s)
    cells: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    failed: dict[str, str] = {}
    for i, cell in enumerate(study.cells, 1):
        if only and cell.objective not in only:
            continue
        why = clock.refuses(cell)
        if cell.pretrained_by in skipped or cell.pretrained_by in failed:
            why = f"its pre-training cell {cell.pretrained_by} did not run"
        if why:
            skipped[cell.name] = why
            log(f"[study] cell {i}/{len(study.cells)}: {cell.name} skipped ({why})")
            continue
        log(f"[study] cell {i}/{len(study.cells)}: {cell.name}")
        try:
            manifests = clock.timed(cell, partial(_run_cell, study, cell, progress, log, force, on_cell))
        except (DensePtError, RuntimeError) as e:  # a failed training (out of memory, bad data)
            if not keep_going:
                raise
            failed[cell.name] = f"{type(e).__name__}: {e}"
            log(f"[study] cell {cell.name} failed: {failed[cell.name]}")
            continue
        if any(s in manifests for s in STAGES):  # else nothing to tabulate yet (``until``)
            cells[cell.name] = _cell_record(cell, manifests)
    results = summarize(study, _with_finished(study, cells))
    results["skipped"], results["failed"] = skipped, failed
    results["versus_none"] = compare_with_none(study, results["cells"])
    write_study(study, results)
    log(f"[study] report: {study.out / 'report.md'}")
    return results


def _run_cell(
    study: StudyConfig,
    cell: Cell,
    progress: bool,
    log: Callable[[str], None],
    force: bool,
    on_cell: Callable[[Cell, dict[str, dict[str, Any]]], None] | None,
) -> dict[str, dict[str, Any]]:
    from dense_pt.pipeline.run import run_pipeline

    _reuse_stages(study, cell, log, force)
    manifests = run_pipeline(
        cell.config, progress=progress, until=study.until, log=_indented(log, cell.name), force=force
    )
    if on_cell is not None:  # within the cell's time, which the budget counts
        on_cell(cell, manifests)
    return manifests


def _reuse_stages(study: StudyConfig, cell: Cell, log: Callable[[str], None], force: bool) -> None:
    """Copy into ``cell`` each of its ``REUSED`` stages that another cell finished with the same
    fingerprint (the same inputs, settings and seed: the same work) instead of redoing it: every
    cell of one seed that starts from the same model shares its store, split and BM25 run. The copy
    (never a link: a later stage of either cell may add to its folder) records ``copied_from``, so
    its time is not counted twice."""
    import shutil

    from dense_pt import artifacts
    from dense_pt.fsutil import write_json_atomic
    from dense_pt.pipeline.run import plan_pipeline
    from dense_pt.pipeline.runner import COMMAND, STAGE

    out = cell.config.out
    for step in plan_pipeline(cell.config, until=study.until):
        if step.stage.name not in REUSED or step.action != "run":
            continue
        for other in study.cells:
            src = other.config.out / step.stage.name
            m = artifacts.read(src, STAGE) if other is not cell else None
            if m is None or m.get("status") != "done" or m.get("fingerprint") != step.fingerprint:
                continue
            artifacts.claim(out, "pipeline", COMMAND, force=force)
            tmp = out / f".{step.stage.name}.copy"
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(src, tmp)
            write_json_atomic(tmp / "manifest.json", {**m, "copied_from": other.name})
            tmp.rename(out / step.stage.name)
            log(f"  {cell.name} [{step.stage.name}] the same as {other.name}'s: copied")
            break


class _Budget:
    """A study's time budget: a cell starts only while the longest cell of its kind (pre-training
    or not) seen so far would still end within it; the first of each kind always may."""

    def __init__(self, budget_s: float | None):
        import time

        self.budget_s, self.start = budget_s, time.monotonic()
        self.longest: dict[bool, float] = {}

    @staticmethod
    def _kind(cell: Cell) -> bool:
        return cell.config.pretrain is not None

    def refuses(self, cell: Cell) -> str | None:
        import time

        if self.budget_s is None:
            return None
        used = time.monotonic() - self.start
        need = self.longest.get(self._kind(cell), 0.0)
        if used + need > self.budget_s:
            return (
                f"budget: {used:.0f} s used, a cell like it took {need:.0f} s, budget {self.budget_s:.0f} s"
            )
        return None

    def timed(self, cell: Cell, work: Callable[[], dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
        import time

        t0 = time.monotonic()
        out = work()
        kind = self._kind(cell)
        self.longest[kind] = max(self.longest.get(kind, 0.0), time.monotonic() - t0)
        return out


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
    own = {name: m for name, m in manifests.items() if "copied_from" not in m}  # copies took no time
    rec["stage_wall_s"] = {name: m["wall_s"] for name, m in own.items() if "wall_s" in m}
    rec["wall_s"] = round(sum(float(m.get("wall_s", 0)) for m in own.values()), 1)
    if cell.pretrained_by:
        rec["pretrained_by"] = cell.pretrained_by
    return rec


def _with_finished(study: StudyConfig, ran: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The cells run now plus those finished earlier (read back from their manifests)."""
    from dense_pt import artifacts
    from dense_pt.pipeline.run import STAGES as PIPELINE_STAGES
    from dense_pt.pipeline.runner import STAGE

    out = dict(ran)
    for cell in study.cells:
        if cell.name in out:
            continue
        folder = cell.config.out
        manifests = {}
        for name in PIPELINE_STAGES:
            m = artifacts.read(folder / name, STAGE)
            if m is not None and m.get("status") == "done":
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


def compare_with_none(study: StudyConfig, cells: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each objective against ``none`` on the last tabulated stage, query by query on the dev split:
    every measure's per-query value averaged over the seeds both finished (the same fine-tuning
    seeds, so the pairs share everything but the pre-training), then the paired bootstrap interval
    and randomization p of ``dense_pt.evaluation.significance``. Empty without a ``none`` arm."""
    from dense_pt.evaluation.significance import compare_per_query

    stage = next((s for s in reversed(STAGES) if any(s in c["metrics"] for c in cells.values())), None)
    if NONE not in study.objectives or stage is None:
        return {}
    done = {(c["objective"], c["seed"]) for c in cells.values() if stage in c["metrics"]}
    by_name = {c.name: c for c in study.cells}
    memo: dict[str, dict[str, dict[str, float]]] = {}
    out: dict[str, Any] = {"stage": stage, "objectives": {}}
    for objective in study.objectives:
        seeds = [s for s in study.seeds if (objective, s) in done and (NONE, s) in done]
        if objective == NONE or not seeds:
            continue
        mine = _seed_mean(
            [_per_query(by_name[f"{objective}-seed{s}"], stage, study.measures, memo) for s in seeds]
        )
        base = _seed_mean(
            [_per_query(by_name[f"{NONE}-seed{s}"], stage, study.measures, memo) for s in seeds]
        )
        out["objectives"][objective] = {
            "seeds": seeds,
            **{m: compare_per_query({q: v[m] for q, v in mine.items()}, {q: v[m] for q, v in base.items()}).to_json()
               for m in study.measures},
        }  # fmt: skip
    return out


def _per_query(
    cell: Cell, stage: str, measures: list[str], memo: dict[str, dict[str, dict[str, float]]]
) -> dict[str, dict[str, float]]:
    """{dev query: {measure: value}} of one cell's stage run (every dev query, zero when missing)."""
    from dense_pt.data import load_qrels
    from dense_pt.evaluation import evaluate_run
    from dense_pt.pipeline.common import RUN_FILE, run_file

    if cell.name not in memo:
        folder, ev = cell.config.out, cell.config.eval
        run = run_file(folder / stage, RUN_FILE)
        dev = load_qrels(folder / "split" / "dev.qrels")
        per = evaluate_run(run, dev, measures, tie_break=ev.tie_break, rel_level=ev.rel_level, per_query=True)
        assert per.per_query is not None
        memo[cell.name] = per.per_query
    return memo[cell.name]


def _seed_mean(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    return {q: {m: sum(r[q][m] for r in runs) / len(runs) for m in runs[0][q]} for q in runs[0]}


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
    lines += _versus_lines(results) + _wall_lines(results)
    chart = "![study](study.png)" if results.get("chart", True) else "(no chart: matplotlib is not installed)"
    lines += ["", chart, ""]
    return "\n".join(lines)


def _versus_lines(results: dict[str, Any]) -> list[str]:
    versus = results.get("versus_none") or {}
    if not versus.get("objectives"):
        return []
    measures = results["measures"]
    lines = ["", f"## Against none, {STAGE_LABELS[versus['stage']]}: paired over the dev queries", "",
             "Difference in the mean, paired bootstrap 95% interval, randomization p; each query's value "
             "averaged over the seeds both arms finished.", "",
             "| objective | seeds | " + " | ".join(measures) + " |", "|---|---|" + "---|" * len(measures)]  # fmt: skip
    for objective, row in versus["objectives"].items():
        cells = [f"{c['delta']:+.4f} [{c['ci_low']:+.4f}, {c['ci_high']:+.4f}] p={c['p_value']:.3g}"
                 for c in (row[m] for m in measures)]  # fmt: skip
        lines.append(f"| {objective} | {', '.join(map(str, row['seeds']))} | " + " | ".join(cells) + " |")
    return lines


def _wall_lines(results: dict[str, Any]) -> list[str]:
    """Pre-training (steps, seconds: the PMI table and the training) and fine-tuning seconds per
    objective, and the cells skipped or failed."""
    lines = ["", "## Wall time", "", "| objective | pre-training steps | pre-training s | other stages s per "
             "seed (data, fine-tuning, evaluation) | seeds |", "|---|---:|---:|---:|---|"]  # fmt: skip
    for objective in results["objectives"]:
        recs = [c for c in results["cells"].values() if c["objective"] == objective]
        if not recs:
            lines.append(f"| {objective} | – | – | – | none finished |")
            continue
        pre = [c for c in recs if "pretrain" in c]
        steps = str(pre[0]["pretrain"]["steps"]) if pre else "–"
        pre_s = sum(float(c["stage_wall_s"].get(k, 0)) for c in pre for k in PRETRAINING) if pre else None
        rest = [
            sum(float(v) for k, v in c.get("stage_wall_s", {}).items() if k not in PRETRAINING) for c in recs
        ]
        seeds = ", ".join(str(c["seed"]) for c in recs)
        lines.append(f"| {objective} | {steps} | {'–' if pre_s is None else f'{pre_s:.1f}'} | "
                     f"{sum(rest) / len(rest):.1f} | {seeds} |")  # fmt: skip
    for kind in ("skipped", "failed"):
        lines += [f"- {name}: {kind} ({why})" for name, why in (results.get(kind) or {}).items()]
    return lines


def _fmt(cell: dict[str, float] | None) -> str:
    if not cell:
        return "–"
    return f"{cell['mean']:.4f} ± {cell['std']:.4f}" if cell["n"] > 1 else f"{cell['mean']:.4f}"


def write_study(study: StudyConfig, results: dict[str, Any]) -> None:
    """results.json, report.md and the chart (left out, and said so in the report, where matplotlib,
    the plot extra, is not installed: a lent GPU machine has none)."""
    import importlib.util

    from dense_pt import artifacts
    from dense_pt.fsutil import atomic_file, write_json_atomic

    results["chart"] = importlib.util.find_spec("matplotlib") is not None
    write_json_atomic(study.out / "results.json", results)
    with atomic_file(study.out / "report.md", "w", encoding="utf-8") as f:
        f.write(render_markdown(results))
    if results["chart"]:
        plot_study(results, study.out / "study.png")
    artifacts.finish(study.out)


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
    if stages or results["bm25"]:  # else nothing to label
        ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_file(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)
