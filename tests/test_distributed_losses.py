"""Every loss with cross-device negatives gives the exact full-batch gradient under data parallelism:
2 gloo processes on CPU, each with half of a fixed global batch inside DistributedDataParallel,
against one process on the whole batch (float64; relative error < 1e-6, in practice ~1e-16).
The end-to-end check through ``torchrun`` (a few training steps, weights compared) is in
``test_distributed_training.py``."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

WORLD, B, N, D_IN, D = 2, 3, 4, 12, 8  # per process: B queries, groups of N passages
CASES = ("simlm", "simlm-eq3", "infonce", "distill-simlm", "distill-infonce", "contrastive-pretrain")


def global_batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    xq = torch.randn(WORLD * B, D_IN, generator=g, dtype=torch.float64)
    xp = torch.randn(WORLD * B * N, D_IN, generator=g, dtype=torch.float64)
    xp[1::N] = xp[::N] + 0.05 * xp[1::N]  # near-duplicate hard negatives, as mined ones are
    teacher = torch.randn(WORLD * B, N, generator=g, dtype=torch.float64)
    return {"xq": xq, "xp": xp, "teacher": teacher}


def local_part(batch: dict[str, torch.Tensor], rank: int, world: int) -> dict[str, torch.Tensor]:
    per = {k: v.shape[0] // world for k, v in batch.items()}
    return {k: v[rank * per[k] : (rank + 1) * per[k]] for k, v in batch.items()}


class Model(nn.Module):
    """A linear encoder for queries and passages and one of the losses under test."""

    def __init__(self, case: str):
        super().__init__()
        torch.manual_seed(1)
        self.enc = nn.Linear(D_IN, D, dtype=torch.float64)
        self.case = case

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        from dense_pt.objectives.retrieval import LOSSES, distill_loss

        q, p = self.enc(batch["xq"]), self.enc(batch["xp"])
        if self.case in LOSSES:  # at each loss's default temperature
            return LOSSES[self.case].fn(q, p, LOSSES[self.case].default_tau)
        if self.case.startswith("distill-"):
            return distill_loss(q, p, batch["teacher"], 0.2, None, self.case.split("-", 1)[1])
        # contrastive pre-training's loss (the objective's own method; it reads only the
        # temperature, and building the objective would import transformers into each process):
        # passage i (here query i's vector) against context i (the first passage of its group)
        from dense_pt.objectives.contrastive import Contrastive

        stand_in = cast(Contrastive, SimpleNamespace(temperature=0.7))  # all the method reads
        return Contrastive.contrastive_loss(stand_in, q, p[::N])


def gradient(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.enc.parameters()])


def _worker(rank: int, world: int, init_file: str, out: str) -> None:
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        batch = local_part(global_batch(), rank, world)
        result = {}
        for case in CASES:
            model = Model(case)
            ddp = DistributedDataParallel(model)
            loss = ddp(batch)
            loss.backward()
            logged = loss.detach().clone()  # what the trainer logs: the mean over processes
            dist.all_reduce(logged)
            result[case] = {"grad": gradient(model), "loss": float(logged) / world}
        if rank == 0:
            torch.save(result, out)
    finally:
        dist.destroy_process_group()


def ddp_gradients(tmp: Path, world: int = WORLD) -> dict[str, dict]:
    out = tmp / "grads.pt"
    init = tmp / "rendezvous"
    mp.start_processes(_worker, args=(world, str(init), str(out)), nprocs=world, start_method="spawn")
    return torch.load(out, weights_only=True)


@pytest.fixture(scope="module")
def ddp_results(tmp_path_factory):
    return ddp_gradients(tmp_path_factory.mktemp("ddp"))


@pytest.mark.parametrize("case", CASES)
def test_ddp_gradient_equals_full_batch_gradient(ddp_results, case):
    model = Model(case)
    loss = model(global_batch())
    loss.backward()
    want = gradient(model)
    got = ddp_results[case]["grad"]
    rel = float((got - want).norm() / want.norm())
    print(f"{case}: relative gradient error {rel:.3g}")
    assert rel < 1e-6, f"{case}: relative gradient error {rel:.3g}"
    # the logged value is the full-batch loss too (DDP-scaled gradient, unscaled value)
    assert ddp_results[case]["loss"] == pytest.approx(float(loss.detach()), rel=1e-9)
