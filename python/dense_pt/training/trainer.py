"""The training loop every stage shares.

Contract: ``model(batch) -> dict`` where ``batch`` maps names to tensors already on the device and
the result holds a scalar ``"loss"`` (other 0-dim tensors in it are logged as they are, e.g.
``loss_enc``). A model whose loss couples the examples of a batch (in-batch negatives) sets
``accumulation_safe = False``: then gradient accumulation is refused, because micro-batches would
silently shrink its negatives.

A model whose loss reads the batch only through per-row representations subclasses
``dense_pt.training.cache.CachedLoss``; ``cache_chunk = N`` then computes its exact full-batch
gradient N sequences per encoder call (GradCache).

The loop: AdamW (no decay on biases / norms; fused on a GPU), warmup + linear / cosine / constant
schedule, autocast (bf16, or fp16 with a grad scaler) on GPU, gradient clipping and accumulation,
cached gradients, DDP when started by torchrun, the next batch collated by a background thread
while a step runs, a checkpoint every ``save_every`` steps and at the end, exact resume, a JSONL
log (and TensorBoard scalars with ``report_to = "tensorboard"``) and a progress bar. The switches
(checkpointing, attention kernel, compile, TF32) are ``switches.py``'s.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from dense_pt.errors import DivergedError, InvalidArgumentError
from dense_pt.logs import log
from dense_pt.training.cache import (
    CachedLoss,
    all_reduce_gradients,
    auto_chunk,
    broadcast_parameters,
    cached_backward,
)
from dense_pt.training.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from dense_pt.training.config import TrainConfig
from dense_pt.training.data import BatchSource, to_device
from dense_pt.training.distributed import DistInfo, all_reduce_mean, init_distributed, pick_device
from dense_pt.training.optim import build_optimizer, build_scheduler
from dense_pt.training.prefetch import Prefetcher, as_tensors
from dense_pt.training.progress import JsonlLog, ProgressBar
from dense_pt.training.switches import apply_switches
from dense_pt.training.tensorboard import open_report

Callback = Callable[["Trainer", int, dict[str, Any] | None], None]


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (call before building a randomly initialised model)."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def resolve_precision(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype, or None for full fp32. 'auto' is bf16 on a GPU that supports it."""
    if precision == "fp32":
        return None
    if precision == "bf16":
        return torch.bfloat16
    if precision == "fp16":
        if device.type != "cuda":
            raise InvalidArgumentError("precision fp16 needs a GPU (use bf16 or fp32 on CPU)")
        return torch.float16
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return None


def batch_rows(batch: dict[str, Any]) -> int:
    for value in batch.values():
        if hasattr(value, "shape") and len(value.shape) >= 1:
            return int(value.shape[0])
    return 0


def check_model(model: nn.Module, config: TrainConfig) -> None:
    """Refuse what the model's loss does not allow: accumulation over in-batch negatives (micro-
    batches would shrink them), caching a loss that does not declare its representations."""
    name = type(model).__name__
    if config.grad_accum > 1 and not getattr(model, "accumulation_safe", True):
        raise InvalidArgumentError(
            f"{name} uses a contrastive loss over the batch; gradient accumulation would shrink its "
            "negatives. Set grad_accum = 1 and raise batch_size instead (with cache_chunk to bound memory)."
        )
    if config.cache_chunk != 0 and not isinstance(model, CachedLoss):
        what = getattr(model, "method", name)
        raise InvalidArgumentError(
            f"cache_chunk: {what} has no loss over the batch's representations to cache (cached "
            "gradients are for contrastive pre-training and the retriever and distillation stages); "
            "bound its memory with grad_accum or gradient_checkpointing instead"
        )


@dataclass
class TrainResult:
    step: int
    checkpoint: Path | None
    last_record: dict[str, Any] | None
    wall_s: float
    resumed_from: int


class _Interval:
    """The sums one log record averages: loss and its parts, rows, steps, time spent waiting for
    data, and the last gradient norm."""

    def __init__(self, device: torch.device):
        self.loss = torch.zeros((), device=device)
        self.parts: dict[str, torch.Tensor] = {}
        self.rows = self.steps = 0
        self.wait = 0.0
        self.t0 = time.perf_counter()
        self.grad_norm = torch.zeros((), device=device)


class Trainer:
    def __init__(
        self,
        model: nn.Module,
        config: TrainConfig,
        out_dir: str | Path,
        source: BatchSource,
        *,
        log_path: str | Path | None = None,
        callbacks: Sequence[Callback] = (),
        progress: bool = True,
        dist_info: DistInfo | None = None,
        device: torch.device | str | None = None,
        description: str = "train",
        lr_lambda: Callable[[int], float] | None = None,
        reset_optimizer_at: Sequence[int] = (),
        on_start: Sequence[Callable[[Trainer], None]] = (),
    ):
        self.config = config
        check_model(model, config)
        if config.threads > 0:
            torch.set_num_threads(config.threads)
        self.dist = dist_info or init_distributed()
        self.device = torch.device(device) if device is not None else pick_device(self.dist)
        self.out_dir = Path(out_dir)
        self.ckpt_root = self.out_dir / "checkpoints"
        self.log = JsonlLog(Path(log_path) if log_path else self.out_dir / "log.jsonl", self.dist.is_main)
        self.source, self.callbacks, self.description = source, list(callbacks), description
        # called once the run has started or resumed, before its first batch is built (e.g. to
        # restore data that depends on the step: ANCE negatives)
        self.on_start = list(on_start)
        self.show_progress = progress and self.dist.is_main
        self.model = model.to(self.device)
        self.compile_mode = apply_switches(self.model, config, self.device)  # "off", "layers", "model"
        # the wall time of the first step of a compiled run, compilation included (the log's compile_s)
        self.compile_s: float | None = None
        self._compile_logged = False
        self.autocast_dtype = resolve_precision(config.precision, self.device)
        self.optimizer = build_optimizer(self.model, config, self.device)
        # lr_lambda(step) -> multiplier of the peak rate replaces the config's schedule (a curriculum)
        self.scheduler = build_scheduler(self.optimizer, config, lr_lambda)
        # steps before which the optimiser's state (AdamW moments, step counts) is dropped, as if
        # a new run started there from the checkpoint (a curriculum's stage switch)
        self.reset_optimizer_at = frozenset(reset_optimizer_at)
        self.scaler = torch.amp.GradScaler("cuda") if self.autocast_dtype == torch.float16 else None
        self.wrapped: nn.Module = self.model
        # a cached step runs the bare model and all-reduces the gradients once, after its last chunk
        self.cached = config.cache_chunk != 0
        # the cached step's chunk; 0 while "auto" has not chosen it (at the first step)
        self.cache_chunk = config.cache_chunk if isinstance(config.cache_chunk, int) else 0
        if self.dist.enabled and self.cached:
            broadcast_parameters(self.model)  # what DDP's wrapping would do first
        elif self.dist.enabled:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            self.wrapped = DistributedDataParallel(
                self.model, device_ids=ids, find_unused_parameters=config.find_unused_parameters
            )
        self.step = 0
        self.epoch = 0
        self.position = 0  # rounds of batches consumed in the current epoch
        self._stream: Iterator[tuple[int, int, dict[str, Any]]] | None = None  # the running batch stream
        self.stop_requested = False
        # the first step whose loss was not finite (-1: none), and that loss: kept on the device,
        # checked where the loop syncs anyway (a log record, a checkpoint)
        self._bad_step = torch.full((), -1, dtype=torch.long, device=self.device)
        self._bad_loss = torch.zeros((), device=self.device)

    # --- state ----------------------------------------------------------------------------------

    def _state(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "batch_in_epoch": self.position,
            "config": self.config.to_dict(),
            "description": self.description,
        }

    def save(self) -> Path:
        self._check_finite(weights=True)  # nothing non-finite is ever saved
        return save_checkpoint(
            self.ckpt_root,
            self.step,
            self.model,
            self.optimizer,
            self.scheduler,
            self.scaler,
            self._state(),
            rank=self.dist.rank,
            world_size=self.dist.world_size,
            barrier=self.dist.barrier,
            keep=self.config.keep_checkpoints,
        )

    def resume_from(self, path: Path) -> None:
        state = load_checkpoint(path, self.model, self.optimizer, self.scheduler, self.scaler, self.dist.rank)
        self.step = int(state["step"])
        self.epoch = int(state["epoch"])
        self.position = int(state["batch_in_epoch"])
        if state.get("world_size", 1) != self.dist.world_size:
            # Data position stays exact in rounds; per-rank RNG streams cannot be mapped.
            seed_everything(self.config.seed + 1000 * self.step + self.dist.rank)
        self.log.truncate_after(self.step)

    # --- loop -----------------------------------------------------------------------------------

    def _batches(self, epoch: int, position: int) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """(epoch, data position after it, batch) from ``(epoch, position)`` on. The position is
        the trainer's once the batch is consumed (``_next_batch``), not when it is produced."""
        while True:
            for batch in self.source.iter_epoch(epoch, position, self.dist.rank, self.dist.world_size):
                position += 1
                yield epoch, position, batch
            epoch, position = epoch + 1, 0

    def _batch_stream(self) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """``_batches``, collated ahead by a background thread (``collate_ahead``) when the source
        collates in this process (with worker processes, those already run ahead)."""
        batches = self._batches(self.epoch, self.position)
        if self.config.collate_ahead < 1 or getattr(self.source, "num_workers", 0) > 0:
            return batches
        pin = self.device.type == "cuda"
        return Prefetcher(batches, self.config.collate_ahead, lambda x: (x[0], x[1], as_tensors(x[2], pin)))

    def restart_batches(self) -> None:
        """Drop the batches collated ahead: the next one is collated anew from the current data
        position. For a callback that changed what ``make_batch`` reads (ANCE's refreshed
        negatives), so that the steps after it see the change, as in a run resumed there."""
        self._close_stream()
        self._stream = self._batch_stream()

    def _close_stream(self) -> None:
        if isinstance(self._stream, Prefetcher):
            self._stream.close()

    def _next_batch(self, acc: _Interval) -> dict[str, Any]:
        t_wait = time.perf_counter()
        assert self._stream is not None  # train() opened it
        self.epoch, self.position, batch = next(self._stream)
        batch = to_device(batch, self.device)
        acc.wait += time.perf_counter() - t_wait
        acc.rows += batch_rows(batch)
        return batch

    def _autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def train(self, resume: bool = False) -> TrainResult:
        cfg = self.config
        resumed_from = self._start(resume)
        if self.step >= cfg.max_steps:
            return TrainResult(self.step, latest_checkpoint(self.ckpt_root), None, 0.0, resumed_from)
        for hook in self.on_start:
            hook(self)

        self.model.train()
        self._stream = self._batch_stream()
        bar = ProgressBar(cfg.max_steps, self.step, self.show_progress, self.description)
        t_start = time.perf_counter()
        last_ckpt: Path | None = None
        record: dict[str, Any] | None = None
        acc = _Interval(self.device)  # what the next log record averages
        report = open_report(cfg.report_to, self.out_dir, self.dist.is_main, resumed_from)
        try:
            while self.step < cfg.max_steps and not self.stop_requested:
                if self.step in self.reset_optimizer_at:
                    # at the top of the step, so a run resumed from a checkpoint taken at this
                    # very step resets too (its saved state predates the reset)
                    self.optimizer.state.clear()
                t_step = time.perf_counter()
                self.optimizer.zero_grad(set_to_none=True)
                self._accumulate(acc)
                self._watch_loss(acc)
                lr = self._optimizer_step(acc)
                self._time_compilation(t_step)
                record = None
                if self.step % cfg.log_every == 0 or self.step == cfg.max_steps:
                    record = self._record(acc, lr, t_start)
                    self.log.write(record)
                    if report is not None:
                        report.write(record)
                    bar.update(
                        self.step, f"loss {record['loss']:.4f} lr {lr:.2e} {record['seq_per_s']:.0f} seq/s"
                    )
                    acc = _Interval(self.device)
                else:
                    bar.update(self.step)
                if self.step % cfg.save_every == 0 or self.step == cfg.max_steps:
                    last_ckpt = self.save()
                for callback in self.callbacks:
                    callback(self, self.step, record)
            if self.stop_requested and (last_ckpt is None or not last_ckpt.name.endswith(f"{self.step:08d}")):
                last_ckpt = self.save()
        finally:
            self._close_stream()
            self._stream = None
            bar.close()
            self.log.close()
            if report is not None:
                report.close()
        return TrainResult(self.step, last_ckpt, record, time.perf_counter() - t_start, resumed_from)

    def _start(self, resume: bool) -> int:
        """Resume from the latest checkpoint when asked and there is one; the step resumed from
        (0: a fresh start, seeded, with a fresh log)."""
        resumed_from = 0
        if resume:
            ckpt = latest_checkpoint(self.ckpt_root)
            if ckpt is not None:
                self.resume_from(ckpt)
                resumed_from = self.step
        if resumed_from == 0:
            seed_everything(self.config.seed + self.dist.rank)
            if self.log.enabled and self.log.path.exists():
                self.log.path.unlink()  # a fresh start (or a run killed before its first checkpoint)
        return resumed_from

    def _accumulate(self, acc: _Interval) -> None:
        """Forward and backward over ``grad_accum`` micro-batches (gradients synchronised across
        processes once, after the last one)."""
        cfg = self.config
        for micro in range(cfg.grad_accum):
            batch = self._next_batch(acc)
            if self.cached:
                assert isinstance(self.model, CachedLoss)  # check_model
                out = cached_backward(self.model, batch, self._chunk(batch), scale=1.0 / cfg.grad_accum,
                                      backward=self._backward, autocast=self._autocast)  # fmt: skip
            else:
                sync = micro == cfg.grad_accum - 1 or not self.dist.enabled
                with contextlib.nullcontext() if sync else self.wrapped.no_sync():
                    with self._autocast():
                        out = self.wrapped(batch)
                    self._backward(out["loss"] / cfg.grad_accum)
            acc.loss += out["loss"].detach().float() / cfg.grad_accum
            for key, value in out.items():
                if key != "loss" and isinstance(value, torch.Tensor) and value.ndim == 0:
                    acc.parts[key] = acc.parts.get(key, 0) + value.detach().float() / cfg.grad_accum
        if self.cached:
            all_reduce_gradients(self.model, self.dist.world_size)

    def _chunk(self, batch: dict[str, Any]) -> int:
        """The cached step's chunk: the configured one, or (``"auto"``) the one chosen, and logged,
        at the run's first step (``dense_pt.training.cache.auto_chunk``)."""
        if not self.cache_chunk:
            assert isinstance(self.model, CachedLoss)  # check_model
            self.cache_chunk, why = auto_chunk(self.model, batch, self.device)
            log.info("cache_chunk auto: %d sequences per encoder call (%s)", self.cache_chunk, why)
        return self.cache_chunk

    def _backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def _optimizer_step(self, acc: _Interval) -> float:
        """Clip, step the optimizer and the schedule; the learning rate the step used."""
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        if self.config.max_grad_norm > 0:
            acc.grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.max_grad_norm)
        lr = self.scheduler.get_last_lr()[0]
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        acc.steps += 1
        return lr

    def _time_compilation(self, t_step: float) -> None:
        """With ``torch_compile`` on, the first step of the run compiles: its wall time (one sync,
        once) is the ``compile_s`` of the next log record."""
        if self.compile_mode == "off" or self.compile_s is not None:
            return
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.compile_s = time.perf_counter() - t_step

    def _watch_loss(self, acc: _Interval) -> None:
        """Remember the first step whose loss is not finite (``acc.loss`` sums the interval's:
        once inf or nan it stays so). Device operations only: no sync per step."""
        first = (self._bad_step < 0) & ~torch.isfinite(acc.loss)
        self._bad_step = torch.where(first, torch.full_like(self._bad_step, self.step + 1), self._bad_step)
        self._bad_loss = torch.where(first, acc.loss, self._bad_loss)

    def _check_finite(self, weights: bool = False) -> None:
        """Stop with one line (a ``DivergedError``) once a loss was not finite or, with
        ``weights``, when a weight is not (a huge learning rate can do that to the weights of the
        last step while its loss was still finite). One sync; every process agrees."""
        flags = [(self._bad_step >= 0).float()]
        if weights:
            finite = torch.stack([torch.isfinite(p.detach()).all() for p in self.model.parameters()]).all()
            flags.append((~finite).float())
        loss_bad, *weights_bad = all_reduce_mean(torch.stack(flags), self.dist).tolist()
        if not loss_bad and not any(weights_bad):
            return
        cfg = self.config
        cause = f"its learning rate (lr = {cfg.lr:g}) is the likely setting to lower"
        if self.autocast_dtype == torch.float16:
            cause += ", or use precision bf16 / fp32 (fp16 overflows)"
        step = int(self._bad_step.item())
        if loss_bad and step >= 0:
            what = f"step {step}: the loss is {self._bad_loss.item()}"
        elif loss_bad:
            what = f"step {self.step}: the loss of another process is not a finite number"
        else:
            what = f"step {self.step}: the model's weights are no longer finite numbers after it"
        raise DivergedError(
            f"{self.description}: training stopped at {what}; nothing non-finite was saved "
            f"(checkpoints in {self.ckpt_root} predate it); {cause}"
        )

    def _record(self, acc: _Interval, lr: float, t_start: float) -> dict[str, Any]:
        elapsed = time.perf_counter() - acc.t0
        self._check_finite()
        loss = all_reduce_mean(acc.loss / acc.steps, self.dist).item()
        rec: dict[str, Any] = {
            "step": self.step,
            "epoch": self.epoch,
            "loss": loss,
            "lr": lr,
            "grad_norm": float(acc.grad_norm),
            "seq_per_s": acc.rows * self.dist.world_size / max(elapsed, 1e-9),
            "data_wait": acc.wait / max(elapsed, 1e-9),
            "elapsed_s": time.perf_counter() - t_start,
            "time": time.time(),
        }
        for key, value in acc.parts.items():
            rec[key] = all_reduce_mean(value / acc.steps, self.dist).item()
        if self.compile_s is not None and not self._compile_logged:
            rec["compile_s"] = self.compile_s  # the first step's wall time, compilation included
            self._compile_logged = True
        return rec
