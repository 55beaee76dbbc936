"""The pipeline's final report: a markdown table of every stage's dev metrics and a PNG plot."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from dense_pt.fsutil import atomic_file

if TYPE_CHECKING:
    from dense_pt.pipeline.config import ResolvedPipeline

LABELS = {
    "bm25": "BM25 (bm25s)",
    "zeroshot": "zero-shot",
    "r1": "R1 (BM25 negatives)",
    "r2": "R2 (R1-mined negatives)",
    "reranker": "re-ranker (R2 top-k re-ranked)",
    "distill": "distilled retriever",
    "fusion": "hybrid: BM25 + dense",
}


def write_report(folder: Path, results: dict[str, dict[str, Any]], cfg: ResolvedPipeline) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [(name, results[name]) for name in LABELS if name in results and "metrics" in results[name]]
    measures = list(cfg.eval.measures)
    split = results.get("split", {})
    data, rr_init = cfg.data, cfg.reranker.init
    lines = [
        "# Pipeline report",
        "",
        f"Model: `{cfg.model.init}`; corpus: `{data.corpus}`; seed {cfg.seed}.",
        (
            f"Dev split: {split.get('dev_queries', '?')} of the judged queries (seeded, fraction "
            f"{data.dev_fraction}); training on the other {split.get('train_queries', '?')}."
        )
        if data.dev_qrels is None
        else (
            f"Dev split: the {split.get('dev_queries', '?')} queries of `{data.dev_qrels}`; "
            f"training on the {split.get('train_queries', '?')} of `{data.qrels}`."
        ),
        _pretrain_line(results),
        (
            f"Profile `{cfg.profile}`; the re-ranker starts from "
            f"`{'the pipeline model' if rr_init == 'model' else rr_init}`, "
            f"the distilled retriever from {'the pipeline model' if cfg.distill.init == 'model' else 'R2'}."
        ),
        (
            f"Evaluation (ir-measures): ties ordered by {cfg.eval.tie_break}; binary measures count "
            f"grade >= {cfg.eval.rel_level} as relevant; judged dev queries missing from a run count as zero."
        ),
        "",
        "| stage | " + " | ".join(measures) + " | wall (s) |",
        "|---|" + "---:|" * (len(measures) + 1),
    ]
    pretrained = "pretrain" in results
    for name, m in rows:
        label = "zero-shot (the pre-trained encoder)" if name == "zeroshot" and pretrained else LABELS[name]
        if name == "fusion":
            label = _fusion_label(m, m["method"])
        vals = " | ".join(f"{m['metrics'].get(k, float('nan')):.4f}" for k in measures)
        lines.append(f"| {label} | {vals} | {m.get('wall_s', 0):.0f} |")
        for other, metrics in (m.get("other_methods") or {}).items() if name == "fusion" else ():
            vals = " | ".join(f"{metrics.get(k, float('nan')):.4f}" for k in measures)
            lines.append(f"| {_fusion_label(m, other)} | {vals} | |")
    lines += _versus_bm25(folder.parent, [name for name, _ in rows], cfg)
    lines += ["", "![stages](stages.png)", ""]
    with atomic_file(folder / "report.md", "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    _plot(folder / "stages.png", rows, measures)
    return folder / "report.md"


RUN_FILES = {"reranker": "dev_reranked.arrow"}  # every other stage's dev run is its run.arrow


def _versus_bm25(root: Path, stages: list[str], cfg: ResolvedPipeline) -> list[str]:
    """Each stage against BM25 per dev query: is the difference more than the split's noise?"""
    from dense_pt.data import load_qrels
    from dense_pt.evaluation.significance import compare_runs
    from dense_pt.pipeline.runner import existing_run

    ev = cfg.eval
    measure = ev.measures[0]
    base, dev = existing_run(root / "bm25" / "run.arrow"), root / "split" / "dev.qrels"
    runs = [(n, existing_run(root / n / RUN_FILES.get(n, "run.arrow"))) for n in stages if n != "bm25"]
    runs = [(n, p) for n, p in runs if p.is_file()]
    if not (base.is_file() and dev.is_file() and runs):
        return []
    qrels = load_qrels(dev)
    lines = [
        "",
        f"{measure} against BM25 on the same dev queries: the mean difference, its paired bootstrap 95% "
        "interval and the paired randomization test's p-value (dense_pt.evaluation.significance).",
        "",
        "| stage | difference | 95% interval | p |",
        "|---|---:|---:|---:|",
    ]
    for name, path in runs:
        c = compare_runs(path, base, qrels, [measure], tie_break=ev.tie_break,
                         rel_level=ev.rel_level)[measure]  # fmt: skip
        lines.append(
            f"| {LABELS[name]} | {c.delta:+.4f} | [{c.ci_low:+.4f}, {c.ci_high:+.4f}] | {c.p_value:.3g} |"
        )
    return lines


def _fusion_label(m: dict[str, Any], method: str) -> str:
    how = (
        f"weight {m['weight']:g}" + (" tuned on train" if m.get("tuning") else "")
        if method == "interpolation"
        else f"k {m['rrf_k']}"
    )
    return f"hybrid: BM25 + {m['dense_stage']} ({method}, {how})"


def _pretrain_line(results: dict[str, dict[str, Any]]) -> str:
    pt = results.get("pretrain")
    if pt is None:
        return "No pre-training stage: the pipeline model is the model above."
    loss = pt.get("final_loss")
    loss_s = f", final loss {loss:.3f}" if isinstance(loss, int | float) else ""
    pmi = " (after a pmi stage: AMI importance column)" if "pmi" in results else ""
    return (
        f"Pre-training: {pt.get('method')} for {pt.get('steps')} steps{loss_s}{pmi}; its encoder is the "
        "pipeline model from here on."
    )


def _plot(path: Path, rows: list[tuple[str, dict]], measures: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(rows)), 4))
    width = 0.8 / max(1, len(measures))
    x = np.arange(len(rows))
    for j, meas in enumerate(measures):
        ax.bar(x + j * width, [m["metrics"].get(meas, 0) for _, m in rows], width, label=meas)
    ax.set_xticks(x + width * (len(measures) - 1) / 2, [LABELS[n] for n, _ in rows], rotation=20, ha="right")
    ax.set_ylabel("dev score")
    ax.legend()
    fig.tight_layout()
    with atomic_file(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    plt.close(fig)
