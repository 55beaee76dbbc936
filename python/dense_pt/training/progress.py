"""The training log: one JSON object per logged step in a JSONL file, and the progress display
with rate and ETA on stderr (main process only)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from dense_pt.fsutil import atomic_file, writing
from dense_pt.progress import Progress


class JsonlLog:
    """Append-only JSONL log, flushed and fsynced per record so a killed run loses nothing."""

    def __init__(self, path: Path, enabled: bool = True):
        self.path, self.enabled = Path(path), enabled
        self._f: TextIO | None = None

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
    """Training steps on the shared progress display (``dense_pt.progress``): rate, ETA, loss and
    lr; a bar on a terminal, a status line every 30 s otherwise; off when disabled or --quiet."""

    def __init__(self, total: int, start: int, enabled: bool = True, description: str = "train"):
        self.total, self.description, self.info = total, description, ""
        self._progress = Progress(description, "steps", enabled=None if enabled else False)
        self._progress.update("training", start, total)

    def update(self, step: int, info: str = "") -> None:
        self.info = info or self.info  # the last logged loss stays on display between log steps
        self._progress.update("training", step, self.total, self.info)

    def close(self) -> None:
        """The 'done' line, unless called while an exception (or Ctrl-C) is on its way out."""
        if sys.exc_info()[0] is None:
            self._progress.finish()
        else:
            self._progress.close()
