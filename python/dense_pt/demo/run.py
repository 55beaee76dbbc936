"""Run the demo's stages in order, name each as it starts and its wall time when it ends, and print
the summary table."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

from dense_pt.demo.context import DEMO_THREADS, DEMO_VOCAB_SIZE, DemoContext, Stage
from dense_pt.demo.finetune import DEMO_FINETUNE_STEPS
from dense_pt.demo.stages import STAGES


def say(message: str) -> None:
    """One status line on stderr through dense-pt's logging (plain lines when stderr is not a
    terminal, so it shows under nohup too; ``--quiet`` hides it)."""
    from dense_pt import logs

    logs.status(f"demo: {message}")


def set_threads(threads: int) -> None:
    """Torch's intra-op threads for the whole demo. Its tiny models gain nothing from a second
    thread, and on a busy machine torch's spinning threads lose time to the other jobs
    (BENCHMARKS.md, "The demo"); 0 keeps torch's default (one per core)."""
    if threads > 0 and importlib.util.find_spec("torch") is not None:
        import torch

        torch.set_num_threads(threads)


def run_demo(
    out: str | Path,
    corpus: str | Path | None = None,
    *,
    force: bool = False,
    stages: list[Stage] | None = None,
    vocab_size: int = DEMO_VOCAB_SIZE,
    finetune_steps: int = DEMO_FINETUNE_STEPS,
    threads: int = DEMO_THREADS,
    print_summary: bool = True,
) -> dict[str, Any]:
    """Run the stages in order; returns ``{"out", "stages": {name: summary}}`` and writes it to
    ``<out>/summary.json``. Each stage is named on stderr as it starts, with its wall time when it
    ends."""
    from dense_pt import artifacts
    from dense_pt.fsutil import write_json_atomic

    set_threads(threads)
    # Absolute paths: later stages write configs that resolve paths against their own folders.
    ctx = DemoContext(
        out=Path(out).resolve(),
        corpus=None if corpus is None else Path(corpus).resolve(),
        force=force,
        vocab_size=vocab_size,
        finetune_steps=finetune_steps,
    )
    # A folder the demo did not write is refused unless --force (summary.json, data.json: older demos').
    artifacts.claim(ctx.out, "demo", "demo", force=force)
    todo = stages if stages is not None else STAGES
    results: dict[str, dict[str, Any]] = {}
    start = time.perf_counter()
    for k, (name, fn) in enumerate(todo, 1):
        say(f"[{k}/{len(todo)}] {name} ...")
        t0 = time.perf_counter()
        summary = fn(ctx)
        summary["seconds"] = round(time.perf_counter() - t0, 2)
        say(f"[{k}/{len(todo)}] {name}: {summary.get('status', 'done')} in {summary['seconds']:.1f} s")
        results[name] = summary
    say(f"all {len(todo)} stages in {time.perf_counter() - start:.1f} s")
    report: dict[str, Any] = {"out": str(ctx.out), "stages": results}
    note = plumbing_note(results)
    if note:
        report["note"] = note
    write_json_atomic(ctx.out / "summary.json", report)
    artifacts.finish(ctx.out)
    if print_summary:
        print_report(report)
    return report


# Summary keys that hold a path (printed in full under the table).
PATH_KEYS = ("folder", "file", "encoder", "log", "table", "queries_path")


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"dense-pt demo ({report['out']})")
    table.add_column("stage", style="bold")
    table.add_column("status")
    table.add_column("seconds", justify="right")
    table.add_column("summary")
    for name, s in report["stages"].items():
        rest = {k: v for k, v in s.items() if k not in ("status", "seconds", "metrics", *PATH_KEYS)}
        table.add_row(
            name,
            str(s.get("status", "")),
            f"{s['seconds']:.2f}",
            ", ".join(f"{k}: {v}" for k, v in rest.items()),
        )
    console = Console()
    console.print(table)
    # the table cuts long cells with "…" on a narrow terminal: every path in full below it
    paths = [("output folder", str(report["out"]))]
    paths += [(f"{name} {key.replace('_', ' ')}", str(s[key])) for name, s in report["stages"].items()
              for key in PATH_KEYS if s.get(key)]  # fmt: skip
    width = max(len(k) for k, _ in paths)
    print("\n".join(f"{k:<{width}}  {v}" for k, v in paths))
    if report.get("note"):
        console.print(report["note"])


def plumbing_note(stages: dict[str, dict[str, Any]]) -> str | None:
    """What a newcomer should read into the numbers: when no dense retriever reaches BM25, the demo
    says that it shows the plumbing, not quality, and where the real measurements are."""
    metrics = stages.get("finetune", {}).get("metrics") or {}
    bm25 = metrics.get("bm25", {}).get("nDCG@10")
    dense = [m["nDCG@10"] for name, m in metrics.items() if name != "bm25" and "nDCG@10" in m]
    if bm25 is None or not dense or max(dense) >= bm25:
        return None
    return (
        f"This is a plumbing demo: every stage runs end to end, but its tiny random-init models, trained "
        f"for {stages['finetune'].get('steps')} steps per stage, stay below BM25 (best dense nDCG@10 "
        f"{max(dense):.3f}, BM25 {bm25:.3f}). Quality numbers on real data (SciFact, all-MiniLM-L6-v2) "
        "are in BENCHMARKS.md."
    )
