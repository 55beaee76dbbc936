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

Peak activation memory is one chunk's; the cost one more forward pass without a graph, and nothing
more (one autocast region for pass 1, the vectors copied once into a float32 buffer, no sync). A
batch whose every part fits one chunk takes the plain step instead (``forward``: the same gradient
without the extra pass). ``cache_chunk = "auto"`` sizes the chunk (``auto_chunk``). Because the
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
    model: CachedLoss, pieces: dict[str, list[Rows]], batch: dict[str, Any], autocast: Callable
) -> tuple[dict[str, Tensor], dict[str, list[RngState]]]:
    """Pass 1: every part's representations, chunk by chunk without autograd, and the RNG state
    each chunk started from. One autocast region for all of it (autocast casts the weights once
    per region, not once per chunk); each chunk's vectors written straight into the part's buffer
    in at least float32 (the loss's precision: one copy, no cast-then-concatenate)."""
    device = _device({name: chunks[0] for name, chunks in pieces.items() if chunks})
    reps: dict[str, Tensor] = {}
    states: dict[str, list[RngState]] = {name: [] for name in pieces}
    with torch.no_grad(), autocast():
        for name, chunks in pieces.items():
            start, total = 0, sum(_rows(piece) for piece in chunks)
            for piece in chunks:
                states[name].append(RngState(device))
                rep = model.represent(name, piece, batch, terms=False)["rep"]
                if name not in reps:
                    dtype = loss_precision(rep[:0]).dtype
                    reps[name] = rep.new_empty((total, *rep.shape[1:]), dtype=dtype)
                reps[name][start : start + rep.shape[0]].copy_(rep)
                start += rep.shape[0]
    return reps, states


def _rows(rows: Rows) -> int:
    return int(next(iter(rows.values())).shape[0])


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
    pieces = {name: split_rows(rows, chunk) for name, rows in model.cache_parts(batch).items()}
    if all(len(chunks) <= 1 for chunks in pieces.values()):  # one chunk: the plain step, one forward
        with autocast():
            whole = CachedLoss.forward(model, batch)
        backward(whole["loss"] * scale)
        return {k: v.detach() for k, v in whole.items()}
    reps, states = _representations(model, pieces, batch, autocast)
    leaves = {k: v.requires_grad_() for k, v in reps.items()}  # fresh buffers: leaves already
    with torch.enable_grad(), autocast():
        res = model.coupled_loss(leaves, batch)
    found = torch.autograd.grad(res["loss"] * scale, list(leaves.values()), allow_unused=True)
    grads = {
        k: torch.zeros_like(v) if g is None else g for (k, v), g in zip(leaves.items(), found, strict=True)
    }
    terms: dict[str, Tensor] = {}
    for name, chunks in pieces.items():  # pass 3: each chunk with its graph, its masks replayed
        for piece, state, g in zip(chunks, states[name], grads[name].split(chunk), strict=True):
            with state.replay(), autocast():
                out = model.represent(name, piece, batch, terms=True)
            rep = out.pop("rep")
            surrogate = (rep * g).sum()  # promoted to g's (the loss's) precision, no cast copy
            for key, value in out.items():
                surrogate = surrogate + value * scale
                terms[key] = terms[key] + value.detach() if key in terms else value.detach()
            backward(surrogate)
    loss = res["loss"].detach()
    for value in terms.values():
        loss = loss + value
    return {**{k: v.detach() for k, v in res.items()}, **terms, "loss": loss}


# cache_chunk = "auto" (``auto_chunk``). On CPU a fixed chunk: memory is rarely the bound there, and
# 32 sequences of 144 tokens (4,608 rows per matmul) already keep the CPU's matmuls at full speed
# (about 3 GB of activations for BERT-base in float32).
CPU_CHUNK = 32
# On a GPU: the share of the free memory (after the gradients, AdamW's moments and autocast's weight
# copies still to come) that one chunk's activations may take; the rest is the allocator's slack,
# the transient buffers of each kernel and the loss.
AUTO_MEMORY_SHARE = 0.6
# Bytes per trainable parameter that the first step allocates: its gradient (4), AdamW's two
# moments (8) and autocast's 16-bit copy (2).
STEP_STATE_BYTES = 14


def activation_bytes_per_token(hidden: int, intermediate: int) -> int:
    """What one transformer layer keeps for its backward, per token, counted in float32 (an upper
    bound under autocast, which keeps most of it in 16 bits): the block's input, Q, K and V, the
    attention output, two norms' inputs and outputs and the dropout masks (about 10 x hidden) and
    the feed-forward's two intermediate tensors (2 x intermediate). SDPA attention (memory linear in
    the length) is assumed: eager attention adds its [heads, L, L] scores."""
    return 4 * (10 * hidden + 2 * intermediate)


def _transformer_shape(model: torch.nn.Module) -> tuple[int, int, int] | None:
    """(transformer layers run, hidden size, intermediate size) of ``model``: its Hugging Face
    layers (modules ``*Layer`` with an ``attention``), decoders' copies included; None if none."""
    layers = [m for m in model.modules() if type(m).__name__.endswith("Layer") and hasattr(m, "attention")]
    configs = [m.config for m in model.modules() if hasattr(getattr(m, "config", None), "intermediate_size")]
    if not layers or not configs:
        return None
    return len(layers), int(configs[0].hidden_size), int(configs[0].intermediate_size)


def even_chunk(rows: int, limit: int) -> int:
    """The chunk of at most ``limit`` rows that cuts ``rows`` into as few, and as equal, pieces as
    possible (1,024 rows under a limit of 392: 3 chunks of 342, not 392 + 392 + 240)."""
    limit = max(1, min(limit, rows))
    pieces = -(-rows // limit)
    return -(-rows // pieces)


def auto_chunk(model: CachedLoss, batch: dict[str, Any], device: torch.device) -> tuple[int, str]:
    """``cache_chunk = "auto"``: the chunk for ``model`` on batches shaped like ``batch``, and why.
    CPU: ``CPU_CHUNK``. CUDA: the rows whose activations (``activation_bytes_per_token`` x layers x
    the widest part's length) fit ``AUTO_MEMORY_SHARE`` of the device's free memory (``mem_get_info``
    plus what torch's allocator holds unused, less the first step's ``STEP_STATE_BYTES`` per
    trainable parameter). Either way evened out over the largest part (``even_chunk``)."""
    parts = model.cache_parts(batch)
    rows = max(_rows(r) for r in parts.values())
    shape = _transformer_shape(model) if isinstance(model, torch.nn.Module) else None
    if device.type != "cuda" or shape is None:
        why = "CPU" if device.type != "cuda" else "no transformer layers to size it by"
        return even_chunk(rows, CPU_CHUNK), f"{why}: at most {CPU_CHUNK}"
    layers, hidden, intermediate = shape
    width = max(int(v.shape[1]) for r in parts.values() for v in r.values() if v.ndim >= 2)
    per_row = layers * width * activation_bytes_per_token(hidden, intermediate)
    free, _ = torch.cuda.mem_get_info(device)
    free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    params = [p for p in model.parameters() if p.requires_grad] if isinstance(model, torch.nn.Module) else []
    pending = STEP_STATE_BYTES * sum(p.numel() for p in params if p.grad is None)
    budget = AUTO_MEMORY_SHARE * (free - pending)
    why = (f"{free / 2**30:.1f} GiB free, {pending / 2**30:.1f} GiB for the step's state, "
           f"~{per_row / 2**20:.0f} MiB per sequence of {width} tokens x {layers} layers")  # fmt: skip
    return even_chunk(rows, int(budget // per_row)), why


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
