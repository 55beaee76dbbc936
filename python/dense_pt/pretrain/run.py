"""``run_pretrain``: build everything from a ``PretrainSettings``, train on the shared engine, export.

Layout of the output folder::

    run_config.json   the resolved configuration (a resumed run must match it)
    log.jsonl         one record per logged step (step, loss, loss_enc/dec/gen, lr, seq/s, data_wait)
    checkpoints/      checkpoint-<step>/ (model, optimiser, scheduler, RNG, data position)
    encoder/          the encoder: AutoModel.from_pretrained + AutoTokenizer.from_pretrained
    decoder/          the decoder or head (safetensors + config.json)
    generator/        the jointly trained generator (simlm / enc-dec-rtd with --generator joint)
    pretrain.json     provenance: inputs and their hashes, config, steps, wall time, final loss
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dense_pt import __version__
from dense_pt.config.pretrain import PretrainSettings
from dense_pt.config.train import STEP_SWITCHES
from dense_pt.errors import InvalidArgumentError, MismatchError, already_exists
from dense_pt.fsutil import write_json_atomic
from dense_pt.pretrain.config import resolve, run_record
from dense_pt.pretrain.context_data import (
    CONTEXT_METHODS,
    build_source,
    lr_lambda,
    plan_curriculum,
    switch_steps,
    warmup_steps,
)
from dense_pt.pretrain.data import MakeBatch, make_collate_fn
from dense_pt.pretrain.export import export_model

# Settings a resumed run may change (extending a run, more workers, logging, and how a step is
# computed: the same gradients on another card, with more or less memory).
_RESUMABLE = (
    "max_steps",
    "save_every",
    "keep_checkpoints",
    "log_every",
    "num_workers",
    "prefetch_factor",
    "threads",
    "report_to",
    *STEP_SWITCHES,
)


def _comparable(cfg: dict[str, Any]) -> dict[str, Any]:
    """Flatten to dotted keys, leaving out what a resumed run may change."""
    flat = {}
    for key, value in cfg.items():
        if key == "out":
            continue
        if isinstance(value, dict):
            for sub, v in value.items():
                if not (key == "train" and sub in _RESUMABLE):
                    flat[f"{key}.{sub}"] = v
        else:
            flat[key] = value
    return json.loads(json.dumps(flat))


def _check_out(cfg: PretrainSettings, resume: bool) -> None:
    """Refuse to start over a run that made progress, or to resume one with other settings. A
    record without a checkpoint (a run that failed or was killed before its first save) holds
    nothing to continue: it is replaced, so the corrected command runs without --resume."""
    from dense_pt.training.checkpoint import list_checkpoints

    out = Path(cfg.out)
    run_config = out / "run_config.json"
    if not run_config.exists() or not list_checkpoints(out / "checkpoints"):
        return
    if not resume:
        raise already_exists(
            out, f"{out} already holds a pre-training run: pass --resume, or choose another --out"
        )
    old, new = _comparable(json.loads(run_config.read_text(encoding="utf-8"))), _comparable(run_record(cfg))
    diff = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if diff:
        changes = ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in diff)
        raise MismatchError(f"{run_config}: the run was started with other settings ({changes})")


def _record_run(cfg: PretrainSettings, is_main: bool, barrier: Callable[[], None]) -> None:
    """Write ``run_config.json`` once model, data and objective are built (the run has started)."""
    barrier()  # every process has checked the folder before the main one writes into it
    if is_main:
        Path(cfg.out).mkdir(parents=True, exist_ok=True)
        write_json_atomic(Path(cfg.out) / "run_config.json", run_record(cfg))
    barrier()


def run_pretrain(
    cfg: PretrainSettings,
    resume: bool = False,
    *,
    callbacks: Sequence = (),
    progress: bool = True,
    make_batch: MakeBatch | None = None,
) -> dict[str, Any]:
    """Pre-train ``cfg.model`` on ``cfg.corpus`` with ``cfg.method``; returns a summary dict.

    ``make_batch(rows, epoch)`` replaces the native collator (for experiments); by default batches
    come from ``dense_pt.collate.Collator``.
    """
    from dense_pt.data.store import CorpusStore
    from dense_pt.training import Trainer, init_distributed

    cfg = resolve(cfg)  # a run built by hand is filled from the method's paper; a resolved one is kept
    dist = init_distributed()
    store = CorpusStore.open(cfg.corpus)
    if len(store) < cfg.train.batch_size * dist.world_size:
        raise InvalidArgumentError(
            f"the store has {len(store)} passages, fewer than one batch ({cfg.train.batch_size} x {dist.world_size})"
        )
    _check_out(cfg, resume)
    objective, special = _build_objective(cfg, store)
    source, lr_fn, resets = _batch_source(cfg, store, make_batch, dist.world_size)
    trainer = Trainer(objective, cfg.train, cfg.out, source, callbacks=callbacks, progress=progress,
                      dist_info=dist, description=f"pretrain {cfg.method}", lr_lambda=lr_fn,
                      reset_optimizer_at=resets)  # fmt: skip
    _record_run(cfg, dist.is_main, dist.barrier)
    started = time.time()
    result = trainer.train(resume=resume)
    summary: dict[str, Any] = {
        "method": cfg.method,
        "steps": result.step,
        "resumed_from": result.resumed_from,
        "wall_s_this_process": round(result.wall_s, 3),
        "final_record": result.last_record,
        "special_ids": asdict(special),
        "device": str(trainer.device),
        "precision": str(trainer.autocast_dtype or "fp32"),
        "world_size": dist.world_size,
        "rank": dist.rank,
    }
    if dist.is_main:
        summary["written"] = export_model(
            objective, Path(cfg.out), store, cfg.model, cfg.length(), summary, run_record(cfg)
        )
        _write_summary(cfg, store, summary, started)
    dist.barrier()
    return summary


def _build_objective(cfg: PretrainSettings, store: Any) -> tuple[Any, Any]:
    """The encoder (checked against the store's vocabulary and ``max_length``) inside the method's
    objective, and the store's special token ids."""
    from dense_pt.models.encoder import check_encoder_vocab, load_encoder
    from dense_pt.objectives import SpecialIds, build_objective
    from dense_pt.training import seed_everything

    seed_everything(cfg.train.seed)  # the same random init on every rank and on resume
    encoder = load_encoder(cfg.model)
    max_pos = getattr(encoder.config, "max_position_embeddings", None)
    if max_pos is not None and cfg.length() > max_pos:
        raise InvalidArgumentError(f"max_length {cfg.length()} exceeds the model's {max_pos} positions")
    multiple = cfg.pad_to_multiple_of or 1
    padded = -(-cfg.length() // multiple) * multiple  # the longest batch, rounded up
    if max_pos is not None and padded > max_pos:
        raise InvalidArgumentError(
            f"pad_to_multiple_of {multiple} pads max_length {cfg.length()} up to {padded} tokens, more than "
            f"the model's {max_pos} positions: pick a multiple that divides max_length"
        )
    check_encoder_vocab(encoder, store, cfg.model)
    special = SpecialIds.from_store(store)
    objective = build_objective(cfg.method, encoder, special, cfg.options)
    if Path(cfg.model).is_dir():
        objective.lm_head.init_from_checkpoint(cfg.model)
    generator = getattr(objective, "generator", None)
    if generator is not None and generator.source is not None:
        check_encoder_vocab(generator.mlm, store, generator.source)  # its tokenizer must be the store's
    return objective, special


def _batch_source(cfg: PretrainSettings, store: Any, make_batch: MakeBatch | None, world_size: int):
    """Where batches come from, the learning-rate schedule (None: the engine's) and the steps at
    which the optimizer is reset."""
    import torch

    from dense_pt.training import IndexedBatchSource

    if cfg.method in CONTEXT_METHODS and make_batch is None:
        # querygen / contrastive: context batches, the curriculum switching at its planned step
        stages = plan_curriculum(cfg)
        source = build_source(cfg, store, stages, pin_memory=torch.cuda.is_available())
        source.rounds_per_epoch(world_size)  # every stage fills a batch, before any training
        lr_fn = lr_lambda(stages, warmup_steps(stages[0], cfg.train.warmup), cfg.stage_warmup or 0)
        # "reset": each later stage starts with fresh AdamW moments, as a new run from the
        # previous stage's checkpoint would (the paper's stage 2); "keep" carries them over
        resets = switch_steps(stages) if cfg.stage_optimizer == "reset" else ()
        return source, lr_fn, resets
    make_batch = make_batch or make_collate_fn(
        store, cfg.method, cfg.options, cfg.length(), cfg.train.seed, cfg.pad_to_multiple_of
    )
    indexed = IndexedBatchSource(len(store), cfg.train.batch_size, make_batch, seed=cfg.train.seed,
                                 num_workers=cfg.train.num_workers, prefetch_factor=cfg.train.prefetch_factor,
                                 pin_memory=torch.cuda.is_available())  # fmt: skip
    return indexed, None, ()


def _write_summary(cfg: PretrainSettings, store: Any, summary: dict[str, Any], started: float) -> None:
    write_json_atomic(
        Path(cfg.out) / "pretrain.json",
        {
            **summary,
            "config": run_record(cfg),
            "corpus": {
                "path": str(Path(cfg.corpus).resolve()),
                "vocab_hash": store.vocab_hash,
                "rows": len(store),
            },
            "model": str(Path(cfg.model).resolve()),
            "started": started,
            "finished": time.time(),
            "dense_pt_version": __version__,
        },
    )
