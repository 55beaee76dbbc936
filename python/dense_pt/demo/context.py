"""What the demo's stages share: the context they read and fill, and their defaults."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dense_pt.demo.finetune import DEMO_FINETUNE_STEPS

DEMO_SEED = 0
DEMO_VOCAB_SIZE = 3000
# torch threads: one (see dense_pt.demo.run.set_threads)
DEMO_THREADS = 1


@dataclass
class DemoContext:
    out: Path
    corpus: Path | None = None  # a user BEIR folder (None: the generated demo corpus)
    force: bool = False
    seed: int = DEMO_SEED
    vocab_size: int = DEMO_VOCAB_SIZE
    finetune_steps: int = DEMO_FINETUNE_STEPS  # per training stage of the fine-tuning pipeline
    # filled in by the stages
    data_dir: Path | None = None  # BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv
    qrels: dict[str, Path] = field(default_factory=dict)  # split -> qrels file
    tokenizer_path: Path | None = None
    store_path: Path | None = None
    artifacts: dict[str, Any] = field(default_factory=dict)  # free-form hand-over between stages

    def stage_dir(self, name: str) -> Path:
        path = self.out / name
        path.mkdir(parents=True, exist_ok=True)
        return path


Stage = tuple[str, Callable[[DemoContext], dict[str, Any]]]


def stamp_matches(path: Path, stamp: dict[str, Any]) -> bool:
    try:
        return json.loads(path.read_text(encoding="utf-8")) == stamp
    except (OSError, json.JSONDecodeError):
        return False
