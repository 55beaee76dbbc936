"""The one progress display of every long command (corpus build, pmi build/merge, encode, search,
bm25, negatives mine, training, pre-training, expansion, the pipeline's stages).

A task runs in named phases; for each phase the display says when it starts and, when it ends,
how much it did and how long it took. In between, with a rate and (when the total is known) an ETA:
a transient rich bar when stderr is a terminal; otherwise (a log file, a pipe, nohup) a plain
status line at most every ``every`` seconds (30 by default). Everything goes to stderr through
``dense_pt.logs`` and is off with ``dense-pt --quiet`` (or when logging is not configured for INFO,
as in library use).

    with Progress("encode", "passages") as p:
        for batch in batches:
            ...
            p.advance(len(batch), total=n)
"""

from __future__ import annotations

import time
from typing import Any

from dense_pt import logs

EVERY_S = 30.0


def _rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:,.1f} s"
    minutes, s = divmod(round(seconds), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours} h {m:02d} min" if hours else f"{m} min {s:02d} s"


class Progress:
    """Progress of ``command`` counted in ``unit``. ``update(phase, done, total)`` sets the
    absolute count of a phase (a new phase name ends the previous one); ``advance(n)`` adds to the
    current one; ``finish()`` (or leaving the ``with`` block) ends the last phase."""

    def __init__(
        self,
        command: str,
        unit: str = "items",
        every: float = EVERY_S,
        enabled: bool | None = None,
        clock: Any = time.monotonic,
    ):
        self.command, self.unit, self.every, self.clock = command, unit, every, clock
        self.enabled = logs.info_enabled() if enabled is None else enabled
        self.phase: str | None = None
        self.done = self.first = self.total = 0
        self.info = ""
        self.start = self.last = 0.0
        self._bar: Any = None
        self._task: Any = None

    # ---- the display --------------------------------------------------------------------------
    def _say(self, text: str) -> None:
        if self.enabled:
            logs.status(f"{self.command}: {text}")

    def _rate(self, now: float) -> float:
        return (self.done - self.first) / max(now - self.start, 1e-9)

    def _open_bar(self) -> None:
        console = logs.terminal_console() if self.enabled else None
        if console is None:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        self._bar = RichProgress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}"),
            console=console,
            transient=True,
        )
        self._bar.start()

    def _status_line(self, now: float) -> str:
        rate = self._rate(now)
        part = f"{self.done:,}" + (
            f"/{self.total:,} ({100 * self.done / self.total:.0f}%)" if self.total else ""
        )
        eta = f", ETA {_duration(max(self.total - self.done, 0) / rate)}" if self.total and rate > 0 else ""
        info = f", {self.info}" if self.info else ""
        return f"{self.phase}: {part} {self.unit}, {_rate(rate)} {self.unit}/s{eta}{info}"

    # ---- the API ------------------------------------------------------------------------------
    def update(self, phase: str, done: int, total: int = 0, info: str = "", unit: str | None = None) -> None:
        """``done`` of ``total`` (0: unknown) in ``phase``; a new phase may count another ``unit``."""
        now = self.clock()
        if phase != self.phase:
            self._end_phase(now)
            self.unit = unit or self.unit
            self.phase, self.start, self.last, self.first = phase, now, now, done
            self._say(f"{phase}: started")
            if self._bar is None:
                self._open_bar()
            if self._bar is not None:
                self._task = self._bar.add_task(phase, total=total or None, rate="", info="", eta="")
        self.done, self.total, self.info = done, total or 0, info
        if self._bar is not None:
            rate = self._rate(now)
            eta = ""
            if self.total and rate > 0:
                eta = f"ETA {_duration(max(self.total - done, 0) / rate)}"
            self._bar.update(
                self._task,
                completed=done,
                total=total or None,
                rate=f"{_rate(rate)} {self.unit}/s",
                info=info,
                eta=eta,
            )
        elif now - self.last >= self.every:
            self.last = now
            self._say(self._status_line(now))

    def advance(self, n: int = 1, phase: str | None = None, total: int = 0, info: str = "") -> None:
        name = phase or self.phase or self.command
        base = self.done if name == self.phase else 0
        self.update(name, base + n, total or self.total, info)

    def _end_phase(self, now: float) -> None:
        if self.phase is None:
            return
        if self._bar is not None and self._task is not None:
            self._bar.remove_task(self._task)
            self._task = None
        count = f"{self.done - self.first:,} {self.unit} in " if self.done > self.first else ""
        self._say(f"{self.phase}: done, {count}{_duration(now - self.start)}")
        self.phase = None

    def finish(self) -> None:
        self._end_phase(self.clock())
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def close(self) -> None:
        """End without a 'done' line (the task failed or was interrupted)."""
        self.phase = None
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.close()


class TimedStep:
    """A step of a multi-step command named when it starts and timed when it ends:
    ``with TimedStep("pipeline", "r1"): ...`` logs ``pipeline: stage r1 started`` then
    ``pipeline: stage r1 done in 12.3 s`` (or ``failed after ...``)."""

    def __init__(self, command: str, name: str, clock: Any = time.monotonic):
        self.command, self.name, self.clock = command, name, clock
        self.start = 0.0

    def __enter__(self) -> TimedStep:
        self.start = self.clock()
        logs.status(f"{self.command}: stage {self.name} started")
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        took = _duration(self.clock() - self.start)
        if exc_type is None:
            logs.status(f"{self.command}: stage {self.name} done in {took}")
        elif not issubclass(exc_type, KeyboardInterrupt):
            logs.status(f"{self.command}: stage {self.name} failed after {took}")


Stage = TimedStep  # the old name (a pipeline's stage is pipeline.runner.Stage)
