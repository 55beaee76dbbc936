"""A short pre-training stage for ``dense-pt demo``: a tiny randomly initialised BERT sized to the
store's vocabulary, a few dozen steps, seconds on two CPU cores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def demo_stage(
    store_path: str | Path,
    workdir: str | Path,
    method: str | None = None,
    max_steps: int = 30,
    batch_size: int = 8,
    progress: bool = False,
) -> dict[str, Any]:
    """Pre-train a tiny encoder on the store; returns the run summary with ``encoder`` (its folder).

    ``method`` defaults to cdmae when the store has an importance column, else simlm with a joint
    generator. A finished stage is not re-run (its ``pretrain.json`` is read back).
    """
    from dense_pt.data.store import CorpusStore
    from dense_pt.pretrain.config import build_config
    from dense_pt.pretrain.run import run_pretrain

    store = CorpusStore.open(store_path)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if method is None:
        method = "cdmae" if store.has_column("importance") else "simlm"
    out = workdir / f"pretrain-{method}"
    done = out / "pretrain.json"
    if done.is_file():
        summary = json.loads(done.read_text(encoding="utf-8"))
        if summary.get("steps") == max_steps:
            return {**summary, "encoder": str(out / "encoder"), "skipped": True}
    config_path = workdir / "tiny-bert-config.json"
    config = {
        "model_type": "bert",
        "vocab_size": store.vocab_size,
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "max_position_embeddings": 160,
        "pad_token_id": store.special_tokens["pad"],
    }
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    cfg = build_config(
        top={
            "method": method,
            "model": str(config_path),
            "corpus": str(store_path),
            "out": str(out),
            "max_length": 128,
        },
        train={
            "max_steps": max_steps,
            "batch_size": batch_size,
            "lr": 5e-4,
            "warmup": 0.1,
            "save_every": max_steps,
            "log_every": 5,
        },
    )
    summary = run_pretrain(cfg, resume=True, progress=progress)
    return {**summary, "encoder": str(out / "encoder"), "log": str(out / "log.jsonl"), "skipped": False}
