"""Loss curves from training logs (JSONL, one record per logged step) drawn to PNG with matplotlib."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dense_pt.errors import FormatError, InvalidArgumentError


def read_log(path: str | Path) -> list[dict]:
    path = Path(path)
    records = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise FormatError(f"not a JSON object ({exc.msg})", path=path, line=n) from None
            if not isinstance(rec, dict) or "step" not in rec:
                raise FormatError("record has no 'step'", path=path, line=n)
            records.append(rec)
    if not records:
        raise FormatError("the log holds no records", path=path)
    return records


def _smooth(y: np.ndarray, window: int) -> np.ndarray:
    if window <= 1 or len(y) < window:
        return y
    kernel = np.ones(window) / window
    head = np.array([y[: i + 1].mean() for i in range(window - 1)])
    return np.concatenate([head, np.convolve(y, kernel, mode="valid")])


def plot_logs(
    logs: Sequence[str | Path],
    out: str | Path,
    keys: Sequence[str] = ("loss",),
    labels: Sequence[str] | None = None,
    smooth: int = 1,
    title: str | None = None,
) -> Path:
    """One panel per key, one line per log (label: the given label or the log's parent folder)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not logs:
        raise InvalidArgumentError("give at least one log file")
    if labels is not None and len(labels) != len(logs):
        raise InvalidArgumentError(f"{len(labels)} labels for {len(logs)} logs")
    runs = [read_log(p) for p in logs]
    fig, axes = plt.subplots(1, len(keys), figsize=(5.5 * len(keys), 4), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        drawn = 0
        for i, (path, recs) in enumerate(zip(logs, runs, strict=True)):
            pts = [(r["step"], r[key]) for r in recs if isinstance(r.get(key), int | float)]
            if not pts:
                continue
            x, y = map(np.asarray, zip(*pts, strict=True))
            label = labels[i] if labels else Path(path).parent.name or Path(path).stem
            ax.plot(x, _smooth(y.astype(float), smooth), label=label)
            drawn += 1
        if not drawn:
            raise InvalidArgumentError(f"no log has the key {key!r}")
        ax.set_xlabel("step")
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
