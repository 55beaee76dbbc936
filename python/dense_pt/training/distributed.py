"""Data parallelism through ``torchrun``: reads RANK / WORLD_SIZE / LOCAL_RANK from the environment,
initialises the process group (nccl on GPU, gloo on CPU) and falls back to a single process."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def barrier(self) -> None:
        if self.enabled and dist.is_initialized():
            dist.barrier()


def init_distributed() -> DistInfo:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(local)
        dist.init_process_group(backend=backend)
    return DistInfo(rank=rank, world_size=world, local_rank=local)


def pick_device(info: DistInfo) -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", info.local_rank)
    return torch.device("cpu")


def all_reduce_mean(value: torch.Tensor, info: DistInfo) -> torch.Tensor:
    if info.enabled:
        value = value.clone()
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
        value /= info.world_size
    return value
