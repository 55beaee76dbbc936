"""TensorBoard scalars of a training run (``report_to = "tensorboard"``): the loss, its parts,
the learning rate and the gradient norm of every logged step, under ``OUT/tb`` (main process
only). Needs the optional ``tensorboard`` extra; the JSONL log stays the record of truth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dense_pt._extras import require

# Record keys that are not scalars to plot (bookkeeping) or are already plotted as the x axis.
_NOT_PLOTTED = frozenset({"step", "epoch", "time", "elapsed_s", "seq_per_s", "data_wait"})


class TensorBoardLog:
    """A SummaryWriter over ``log_dir``. A fresh run (``resumed_from == 0``) removes the event
    files of an earlier run there; a resumed run purges the events past its checkpoint (they
    are written again), as the JSONL log does."""

    def __init__(self, log_dir: Path, resumed_from: int):
        require("tensorboard", "tensorboard")  # torch.utils.tensorboard needs it; name the extra
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(log_dir)
        if resumed_from == 0:
            for old in self.log_dir.glob("events.out.tfevents.*"):
                old.unlink()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        purge = resumed_from + 1 if resumed_from > 0 else None
        self._writer = SummaryWriter(str(self.log_dir), purge_step=purge)

    def write(self, record: dict[str, Any]) -> None:
        step = int(record["step"])
        for key, value in record.items():
            if key not in _NOT_PLOTTED and isinstance(value, int | float):
                self._writer.add_scalar(f"train/{key}", value, step)
        self._writer.flush()  # a killed run keeps what it logged, like the JSONL log

    def close(self) -> None:
        self._writer.close()


def open_report(report_to: str, out_dir: Path, enabled: bool, resumed_from: int) -> TensorBoardLog | None:
    """The run's extra reporter for ``report_to`` (None for "none" or off the main process)."""
    if report_to == "none" or not enabled:
        return None
    return TensorBoardLog(Path(out_dir) / "tb", resumed_from)
