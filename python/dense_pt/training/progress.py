"""The training log: one JSON object per logged step in a JSONL file, and a rich progress bar with
ETA on the console (main process only)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dense_pt.fsutil import atomic_file, writing


class JsonlLog:
    """Append-only JSONL log, flushed and fsynced per record so a killed run loses nothing."""

    def __init__(self, path: Path, enabled: bool = True):
        self.path, self.enabled = Path(path), enabled
        self._f = None

    def truncate_after(self, step: int) -> None:
        """On resume, drop records past the checkpoint: they will be written again."""
        if not self.enabled or not self.path.exists():
            return
        kept = []
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a kill
                if rec.get("step", 0) <= step:
                    kept.append(json.dumps(rec) + "\n")
        with atomic_file(self.path, "w", encoding="utf-8") as f:
            f.writelines(kept)

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        with writing(self.path):  # a full disk: one line naming the log, not a traceback
            if self._f is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._f = open(self.path, "a", encoding="utf-8")
            self._f.write(json.dumps(record) + "\n")
            self._f.flush()
            os.fsync(self._f.fileno())

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


class ProgressBar:
    """A rich progress bar (steps, loss, lr, seq/s, ETA); silent when disabled or not a terminal
    unless forced."""

    def __init__(self, total: int, start: int, enabled: bool = True, description: str = "train"):
        self._progress = None
        if not enabled:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            transient=False,
        )
        self._task = self._progress.add_task(description, total=total, completed=start, info="")
        self._progress.start()

    def update(self, step: int, info: str = "") -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=step, info=info)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
