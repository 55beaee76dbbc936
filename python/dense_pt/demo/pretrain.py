"""The demo's pre-training: a tiny randomly initialised BERT sized to the store's vocabulary, a few
dozen steps, seconds on two CPU cores (``dense_pt.demo.stages.stage_pretrain`` is its demo stage;
``demo_stage(store, workdir)`` is the same work without a demo context)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from dense_pt.artifacts.replace import check_replaceable
from dense_pt.demo.tiny import tiny_bert_config

DEMO_STEPS = 30


# What a pre-training folder holds (``run_pretrain`` and its export): all the demo may remove there.
PRETRAIN_FILES = ("checkpoints", "encoder", "decoder", "generator", "tb", "log.jsonl", "pretrain.json",
                  "run_config.json")  # fmt: skip


def demo_stage(
    store_path: str | Path,
    workdir: str | Path,
    method: str | None = None,
    max_steps: int = DEMO_STEPS,
    batch_size: int = 8,
    seed: int = 0,
    force: bool = False,
    progress: bool = True,
    queries: str | Path | None = None,
    curriculum: str | None = None,
) -> dict[str, Any]:
    """Pre-train a tiny encoder on the store; returns a summary with ``encoder`` (its folder).

    ``method`` defaults to cdmae when the store has an importance column, else simlm with a joint
    generator (chosen explicitly: the paper's frozen ELECTRA generator would need a download). A finished run with the same settings is not redone (``status: up to date``).
    ``queries`` / ``curriculum``: the LLM queries and the context curriculum of querygen / contrastive.
    """
    from dense_pt.data.store import CorpusStore
    from dense_pt.pretrain.config import build_config, run_record
    from dense_pt.pretrain.run import run_pretrain

    store = CorpusStore.open(store_path)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if method is None:
        method = "cdmae" if store.has_column("importance") else "simlm"
    out = workdir / method
    config_path = workdir / "tiny-bert-config.json"
    config_path.write_text(
        json.dumps(tiny_bert_config(store.vocab_size, store.special_tokens["pad"]), indent=2),
        encoding="utf-8",
    )
    cfg = build_config(
        options={"generator": "joint"} if method in ("simlm", "enc-dec-rtd") else None,
        top={
            "method": method,
            "model": str(config_path),
            "corpus": str(store_path),
            "out": str(out),
            "max_length": 128,
            "queries": None if queries is None else str(queries),
            "curriculum": curriculum,
        },
        train={
            "max_steps": max_steps,
            "batch_size": batch_size,
            "lr": 5e-4,
            "warmup": 0.1,
            "save_every": max_steps,
            "log_every": 5,
            "seed": seed,
            "keep_checkpoints": 1,
        },
    )
    done = out / "pretrain.json"
    if not force and done.is_file():
        prev = json.loads(done.read_text(encoding="utf-8"))
        if prev.get("config") == run_record(cfg) and prev.get("steps") == max_steps:
            rec = prev.get("final_record") or {}
            return _summary("up to date", method, out, prev["steps"], rec)
    if force or (out.exists() and not (out / "run_config.json").is_file()):
        check_replaceable(out, PRETRAIN_FILES)  # a file of the user's there is refused, not lost
        shutil.rmtree(out, ignore_errors=True)
    # resume=True: an interrupted demo continues from its checkpoint; a changed config is refused.
    summary = run_pretrain(cfg, resume=True, progress=progress)
    return _summary("ran", method, out, summary["steps"], summary.get("final_record") or {})


def _summary(status: str, method: str, out: Path, steps: int, rec: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": status,
        "method": method,
        "steps": steps,
        "final loss": round(float(rec.get("loss", float("nan"))), 3),
        "encoder": str(out / "encoder"),
        "log": str(out / "log.jsonl"),
    }
