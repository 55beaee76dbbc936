"""Cached contrastive gradients (GradCache; Gao, Zhang, Han and Callan 2021, "Scaling Deep
Contrastive Learning Batch Size under Memory Limited Setup"): the exact gradient of a loss over a
large batch with the activation memory of a small chunk of it.

A loss with in-batch negatives couples the rows of a batch only through their representations (one
vector per query, passage or context). A model that says so subclasses ``CachedLoss`` and declares

* ``cache_parts(batch)``: its encoder calls, each a name and the row-aligned tensors it reads;
* ``represent(part, rows, batch, terms)``: one call on some rows of a part -> ``{"rep": [n, d]}``,
  and with ``terms=True`` also the additive loss terms of those rows (an MLM loss), each
  normalised by the *whole* batch so that the chunks' terms sum to the batch's;
* ``coupled_loss(reps, batch)``: the loss from the whole batch's representations, without
  parameters of its own (``{"loss": ..., other logged scalars}``).

Its ``forward(batch)`` is then the plain full-batch step, and ``cached_backward`` computes the same
gradient in three passes:

1. each part, ``chunk`` rows at a time, without autograd: representations only, keeping the RNG
   state (CPU, and the CUDA device's) each chunk started from;
2. the coupled loss on the whole batch's representations, made leaves: its gradient ``g`` with
   respect to every representation (cross-process gathering happens in here, as in ``forward``);
3. each chunk again with autograd and its RNG state restored, so dropout draws the same masks:
   back-propagating ``sum(rep * g) + terms`` adds the chunk's share of the full-batch gradient.

Peak activation memory is one chunk's; the cost one more forward pass without a graph. Because the
masks are replayed, the result is the full-batch gradient of the step's masks, not an approximation
(an uncached step draws the masks of the whole batch at once, so with dropout on the two draw
different masks; without dropout they compute the same gradient). Under data parallelism the
trainer all-reduces the gradients once after the last chunk (``all_reduce_gradients``) instead of
letting DDP synchronise every chunk's backward.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from dense_pt.training.precision import loss_precision

Rows = dict[str, Tensor]


class CachedLoss:
    """Mixin of a model whose loss couples its rows only through representations (see the module
    docstring); its ``forward`` is the full-batch step, ``cached_backward`` the chunked one."""

    def cache_parts(self, batch: dict[str, Any]) -> dict[str, Rows]:
        raise NotImplementedError

    def represent(self, part: str, rows: Rows, batch: dict[str, Any], terms: bool) -> dict[str, Tensor]:
        raise NotImplementedError

    def coupled_loss(self, reps: dict[str, Tensor], batch: dict[str, Any]) -> dict[str, Tensor]:
        raise NotImplementedError

    def forward(self, batch: dict[str, Any]) -> dict[str, Tensor]:
        """The whole batch in one call per part: ``{"loss": coupled + terms, parts...}``."""
        reps: dict[str, Tensor] = {}
        terms: dict[str, Tensor] = {}
        for name, rows in self.cache_parts(batch).items():
            out = self.represent(name, rows, batch, terms=True)
            reps[name] = out.pop("rep")
            for key, value in out.items():
                terms[key] = terms[key] + value if key in terms else value
        res = self.coupled_loss(reps, batch)
        loss = res["loss"]
        for value in terms.values():
            loss = loss + value
        return {**res, **{k: v.detach() for k, v in terms.items()}, "loss": loss}


class RngState:
    """The RNG state a chunk started from: the CPU generator and, on a GPU, the device's."""

    def __init__(self, device: torch.device):
        self.device = device
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None

    @contextlib.contextmanager
    def replay(self) -> Iterator[None]:
        """Run with the saved state; the state from before is back afterwards."""
        devices = [self.device] if self.cuda is not None else []
        with torch.random.fork_rng(devices=devices):
            torch.set_rng_state(self.cpu)
            if self.cuda is not None:
                torch.cuda.set_rng_state(self.cuda, self.device)
            yield


def split_rows(rows: Rows, chunk: int) -> list[Rows]:
    """``rows`` cut along dim 0 into pieces of at most ``chunk`` rows."""
    sizes = {int(v.shape[0]) for v in rows.values()}
    if len(sizes) != 1:
        raise ValueError(f"the tensors of one part must have as many rows each, got {sorted(sizes)}")
    (n,) = sizes
    return [{k: v[i : i + chunk] for k, v in rows.items()} for i in range(0, n, chunk)]


def _device(parts: dict[str, Rows]) -> torch.device:
    for rows in parts.values():
        for value in rows.values():
            return value.device
    return torch.device("cpu")


def _representations(
    model: CachedLoss, parts: dict[str, Rows], batch: dict[str, Any], chunk: int, autocast: Callable
) -> tuple[dict[str, Tensor], dict[str, list[RngState]]]:
    """Pass 1: every part's representations, chunk by chunk without autograd, and the RNG state
    each chunk started from. Kept in at least float32 (the loss's precision)."""
    device = _device(parts)
    reps: dict[str, Tensor] = {}
    states: dict[str, list[RngState]] = {}
    with torch.no_grad():
        for name, rows in parts.items():
            pieces = []
            for piece in split_rows(rows, chunk):
                states.setdefault(name, []).append(RngState(device))
                with autocast():
                    rep = model.represent(name, piece, batch, terms=False)["rep"]
                pieces.append(loss_precision(rep))
            reps[name] = torch.cat(pieces)
    return reps, states


def cached_backward(
    model: CachedLoss,
    batch: dict[str, Any],
    chunk: int,
    *,
    scale: float = 1.0,
    backward: Callable[[Tensor], None] = Tensor.backward,
    autocast: Callable[[], Any] = contextlib.nullcontext,
) -> dict[str, Tensor]:
    """Accumulate into the parameters' ``.grad`` the gradient of ``scale * model(batch)["loss"]``,
    computed ``chunk`` rows per encoder call (see the module docstring). ``backward(t)`` runs each
    chunk's backward (the trainer's scales it for fp16); ``autocast()`` wraps every forward.
    Returns what ``model(batch)`` returns, detached (the logged loss and its parts)."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    parts = model.cache_parts(batch)
    reps, states = _representations(model, parts, batch, chunk, autocast)
    leaves = {k: v.detach().requires_grad_() for k, v in reps.items()}
    with torch.enable_grad(), autocast():
        res = model.coupled_loss(leaves, batch)
    found = torch.autograd.grad(res["loss"] * scale, list(leaves.values()), allow_unused=True)
    grads = {
        k: torch.zeros_like(v) if g is None else g for (k, v), g in zip(leaves.items(), found, strict=True)
    }
    terms: dict[str, Tensor] = {}
    for name, rows in parts.items():  # pass 3: each chunk with its graph, its masks replayed
        for piece, state, g in zip(
            split_rows(rows, chunk), states[name], grads[name].split(chunk), strict=True
        ):
            with state.replay(), autocast():
                out = model.represent(name, piece, batch, terms=True)
            rep = out.pop("rep")
            surrogate = (rep.to(g.dtype) * g).sum()
            for key, value in out.items():
                surrogate = surrogate + value * scale
                terms[key] = terms[key] + value.detach() if key in terms else value.detach()
            backward(surrogate)
    loss = res["loss"].detach()
    for value in terms.values():
        loss = loss + value
    return {**{k: v.detach() for k, v in res.items()}, **terms, "loss": loss}


def all_reduce_gradients(model: torch.nn.Module, world_size: int, bucket: int = 25_000_000) -> None:
    """The mean over processes of every parameter's gradient (what DDP's synchronisation gives), in
    flat buckets of about ``bucket`` elements per all-reduce (DDP buckets 25 MB)."""
    if world_size <= 1:
        return
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    groups: dict[tuple[torch.dtype, torch.device], list[Tensor]] = {}
    for g in grads:
        groups.setdefault((g.dtype, g.device), []).append(g)
    for same in groups.values():
        start = 0
        while start < len(same):
            stop, size = start, 0
            while stop < len(same) and (size == 0 or size + same[stop].numel() <= bucket):
                size += same[stop].numel()
                stop += 1
            flat = torch.cat([g.reshape(-1) for g in same[start:stop]])
            dist.all_reduce(flat)
            flat /= world_size
            offset = 0
            for g in same[start:stop]:
                g.copy_(flat[offset : offset + g.numel()].view_as(g))
                offset += g.numel()
            start = stop


def broadcast_parameters(model: torch.nn.Module) -> None:
    """Rank 0's parameters and buffers on every process (what wrapping in DDP does first)."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        with torch.no_grad():
            for tensor in model.state_dict().values():
                dist.broadcast(tensor, src=0)
