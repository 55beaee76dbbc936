"""Batches for the trainer: a deterministic order of row indices per epoch, cut into batches,
turned into arrays by a ``make_batch(rows, epoch)`` function (the native collator for pre-training,
a query/passage grouper for fine-tuning) inside DataLoader worker processes.

The order of epoch ``e`` depends only on ``(seed, e)``, and ``make_batch`` must be deterministic
given its rows and epoch, so a run resumed at data position ``(epoch, batch)`` sees exactly the
batches the uninterrupted run would have seen. Under data parallelism rank ``r`` of ``w`` takes
batches ``r, r + w, r + 2w, ...``; the position counts rounds of ``w`` batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from dense_pt.errors import InvalidArgumentError

Batch = dict[str, Any]


class BatchSource(Protocol):
    """What the trainer iterates: ``rounds_per_epoch(world)`` and ``iter_epoch`` from a position."""

    def rounds_per_epoch(self, world_size: int) -> int: ...

    def iter_epoch(self, epoch: int, start: int, rank: int, world_size: int) -> Iterator[Batch]: ...


def epoch_order(num_rows: int, seed: int, epoch: int, shuffle: bool = True) -> np.ndarray:
    if not shuffle:
        return np.arange(num_rows, dtype=np.int64)
    return np.random.default_rng([seed, epoch, 0x5EED]).permutation(num_rows).astype(np.int64)


class _EpochBatches(Dataset):
    """Map-style dataset whose item ``k`` is the k-th batch this rank sees in one epoch."""

    def __init__(self, source: IndexedBatchSource, epoch: int, rank: int, world_size: int):
        self.order = epoch_order(source.num_rows, source.seed, epoch, source.shuffle)
        self.source, self.epoch, self.rank, self.world = source, epoch, rank, world_size
        self.n = source.rounds_per_epoch(world_size)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, k: int) -> Batch:
        b = self.source.batch_size
        g = k * self.world + self.rank
        rows = self.order[g * b : (g + 1) * b]
        return self.source.make_batch(rows, self.epoch)


def _worker_init(_: int) -> None:
    # Workers do array work; one intra-op thread each keeps 2-core machines responsive.
    torch.set_num_threads(1)


class IndexedBatchSource:
    """Batches of ``batch_size`` row indices in ``[0, num_rows)``, shuffled per epoch, last partial
    batch dropped, collated by ``make_batch(rows: np.ndarray[int64], epoch: int) -> dict``."""

    def __init__(
        self,
        num_rows: int,
        batch_size: int,
        make_batch: Callable[[np.ndarray, int], Batch],
        seed: int = 0,
        shuffle: bool = True,
        num_workers: int = 0,
        prefetch_factor: int = 2,
        pin_memory: bool = False,
    ):
        if batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be >= 1, got {batch_size}")
        self.num_rows, self.batch_size, self.make_batch = num_rows, batch_size, make_batch
        self.seed, self.shuffle = seed, shuffle
        self.num_workers, self.prefetch_factor, self.pin_memory = num_workers, prefetch_factor, pin_memory

    def rounds_per_epoch(self, world_size: int) -> int:
        n = self.num_rows // (self.batch_size * world_size)
        if n < 1:
            raise InvalidArgumentError(
                f"{self.num_rows} rows cannot fill one batch of {self.batch_size} on {world_size} process(es)"
            )
        return n

    def iter_epoch(self, epoch: int, start: int, rank: int, world_size: int) -> Iterator[Batch]:
        dataset = _EpochBatches(self, epoch, rank, world_size)
        if start >= len(dataset):
            return iter(())
        if self.num_workers == 0:
            return (dataset[k] for k in range(start, len(dataset)))
        return worker_batches(self, dataset, start, len(dataset))


def worker_batches(source: Any, dataset: Any, start: int, stop: int) -> Iterator[Batch]:
    """Items ``start..stop`` of a map-style ``dataset`` of ready batches, built by
    ``source.num_workers`` DataLoader worker processes (``source`` also gives ``prefetch_factor``,
    ``pin_memory`` and ``seed``)."""
    loader = DataLoader(
        dataset,
        batch_size=None,
        sampler=range(start, stop),
        num_workers=source.num_workers,
        prefetch_factor=source.prefetch_factor,
        pin_memory=source.pin_memory,
        worker_init_fn=_worker_init,
        # A private generator: creating the iterator must not consume the global torch RNG,
        # whose state is part of the checkpoint.
        generator=torch.Generator().manual_seed(source.seed),
    )
    return iter(loader)


def to_device(batch: Batch, device: torch.device) -> dict[str, Any]:
    """numpy arrays -> torch tensors (zero-copy on CPU) on ``device``; other values pass through."""
    out = {}
    non_blocking = device.type == "cuda"
    for key, value in batch.items():
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(value)
        if isinstance(value, torch.Tensor):
            value = value.to(device, non_blocking=non_blocking)
        out[key] = value
    return out
