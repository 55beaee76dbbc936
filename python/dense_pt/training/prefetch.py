"""Collation overlapped with the step: a background thread of the training process takes the next
items of an iterator (it runs ``make_batch``: numpy and the native collator, which release the
GIL, as torch's kernels do) and prepares them (tensors, pinned memory on a GPU machine) while the
main thread trains; the main thread then copies a batch to the device with ``non_blocking``.

Only the thread advances the iterator, and only the main thread consumes, in order: the batches
are those of an inline loop, so resuming stays exact (the trainer counts its data position by the
batches it consumed, not by those the thread prepared). An exception in the thread is raised in
the main thread at the batch it concerns."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

_DONE = object()


class Prefetcher:
    """The items of ``items``, each passed through ``prepare`` by a daemon thread that keeps up to
    ``ahead`` of them ready. ``close()`` stops the thread (the trainer's ``finally``)."""

    def __init__(self, items: Iterator[Any], ahead: int, prepare: Callable[[Any], Any] = lambda x: x):
        if ahead < 1:
            raise ValueError(f"ahead must be >= 1, got {ahead}")
        self._queue: queue.Queue = queue.Queue(maxsize=ahead)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(items, prepare), name="dense-pt-collate", daemon=True
        )
        self._thread.start()

    def _put(self, item: tuple[bool, Any]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, items: Iterator[Any], prepare: Callable[[Any], Any]) -> None:
        try:
            for item in items:
                if not self._put((True, prepare(item))):
                    return
            self._put((True, _DONE))
        except BaseException as exc:  # handed to the consumer, raised there
            self._put((False, exc))

    def __iter__(self) -> Prefetcher:
        return self

    def __next__(self) -> Any:
        ok, item = self._queue.get()
        if not ok:
            raise item
        if item is _DONE:
            raise StopIteration
        return item

    def close(self) -> None:
        self._stop.set()
        try:
            while True:
                self._queue.get_nowait()
        except queue.Empty:
            pass
        self._thread.join(timeout=5.0)


def as_tensors(batch: dict[str, Any], pin: bool = False) -> dict[str, Any]:
    """numpy arrays -> torch tensors (zero-copy), in pinned memory with ``pin`` (so that the copy to
    a GPU can run asynchronously); other values pass through."""
    out = {}
    for key, value in batch.items():
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(value)
        if pin and isinstance(value, torch.Tensor) and value.device.type == "cpu":
            value = value.pin_memory()
        out[key] = value
    return out
