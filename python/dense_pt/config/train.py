"""``TrainConfig``: the optimisation settings every training stage shares (pre-training, retriever,
re-ranker, distillation), and ``partial``: a model's "only the keys a file sets" twin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, Field, create_model

from dense_pt.config.base import Model

Schedule = Literal["linear", "cosine", "constant"]
Precision = Literal["auto", "fp32", "bf16", "fp16"]
ReportTo = Literal["none", "tensorboard"]
AttnImplementation = Literal["auto", "sdpa", "eager"]
# Unpadded (packed) encoders: auto = on where measured faster (none yet), else padded (dense_pt.models.unpad).
Unpad = Literal["auto", "on", "off"]
UNPAD_HELP = (
    "Unpadded encoder: the real tokens of all rows packed, no compute on padding (on | off | auto: on "
    "where a device check measured it faster, with a BERT model: nowhere yet, so padded)."
)


def _compile_flag(value: Any) -> Any:
    """``true`` / ``false``, ``torch_compile``'s values before it had modes: the whole models / off."""
    if isinstance(value, bool):
        return "model" if value else "off"
    return value


TorchCompile = Annotated[Literal["off", "auto", "layers", "model"], BeforeValidator(_compile_flag)]
# Steps when >= 1, a fraction of max_steps when < 1; an int stays an int (a run's fingerprint and
# manifest keep ``1000``, not ``1000.0``).
Warmup = Annotated[int, Field(ge=0)] | Annotated[float, Field(ge=0)]


# Sequences per encoder call of a cached step, or "auto": chosen at the first step from the free
# GPU memory (``dense_pt.training.cache.auto_chunk``).
def _chunk_word(value: Any) -> Any:
    if isinstance(value, str) and value != "auto":
        raise ValueError(f'must be a number of sequences (>= 0) or "auto", got {value!r}')
    return value


CacheChunk = Annotated[Annotated[int, Field(ge=0)] | Literal["auto"], BeforeValidator(_chunk_word)]


# The settings that change how a step is computed, not what it computes (the same gradients with
# more or less memory or time): a resumed run may change them, a recipe may add them to a paper's.
STEP_SWITCHES = (
    "cache_chunk",
    "gradient_checkpointing",
    "attn_implementation",
    "unpad",
    "torch_compile",
    "fused_adamw",
    "tf32",
    "collate_ahead",
)


class TrainConfig(Model):
    """Optimisation settings shared by every training stage.

    ``batch_size`` is per process and per micro-step: the global batch is
    ``batch_size * grad_accum * world_size``."""

    max_steps: int = Field(1000, ge=1, description="Optimiser steps.")
    batch_size: int = Field(32, ge=1, description="Passages (queries) per step and process.")
    lr: float = Field(1e-4, gt=0, description="Peak learning rate.")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay.")
    adam_beta1: float = Field(0.9, ge=0, lt=1, description="AdamW beta1.")
    adam_beta2: float = Field(0.999, ge=0, lt=1, description="AdamW beta2.")
    adam_eps: float = Field(1e-8, gt=0, description="AdamW epsilon.")
    warmup: Warmup = Field(
        0.1,
        description="Warm-up steps (>= 1) or a fraction (< 1) of the steps (curriculum: of the first stage).",
    )
    schedule: Schedule = Field("linear", description="Learning-rate schedule: linear, cosine or constant.")
    min_lr_ratio: float = Field(0.0, ge=0, le=1, description="Lowest rate of the schedule, as a share of lr.")
    grad_accum: int = Field(1, ge=1, description="Micro-batches per optimiser step.")
    max_grad_norm: float = Field(1.0, ge=0, description="Gradient clipping norm (0 disables clipping).")
    precision: Precision = Field("auto", description="auto, fp32, bf16 or fp16.")
    seed: int = Field(42, description="Seed of the init, the data order and the masks.")
    save_every: int = Field(500, ge=1, description="Checkpoint every N steps.")
    keep_checkpoints: int = Field(2, ge=1, description="Checkpoints kept.")
    log_every: int = Field(10, ge=1, description="Log every N steps.")
    num_workers: int = Field(0, ge=0, description="DataLoader worker processes.")
    prefetch_factor: int = Field(2, ge=1, description="Batches each worker prepares ahead.")
    find_unused_parameters: bool = Field(False, description="DDP's find_unused_parameters.")
    threads: int = Field(
        0, ge=0, description="torch CPU threads per process (0: torch's default; 1 on a busy shared CPU)."
    )
    report_to: ReportTo = Field(
        "none",
        description="none or tensorboard: also write the logged scalars under OUT/tb (the tensorboard extra).",
    )
    # How a step is computed, not what it computes (dense_pt.training.cache / .switches; docs/training.md
    # "Large batches and the GPU switches"): each gives the same gradients as without it.
    cache_chunk: CacheChunk = Field(
        0,
        description="Cached contrastive gradients (GradCache): at most N sequences per encoder call, the "
        "loss and its in-batch negatives still over the whole batch, exactly (0: off; auto: N from the "
        "free GPU memory at the first step, 32 on CPU).",
    )
    gradient_checkpointing: bool = Field(
        False, description="Recompute the encoder's layer activations in the backward pass (less memory)."
    )
    attn_implementation: AttnImplementation = Field(
        "auto",
        description="Attention kernel: sdpa or eager (auto: the checkpoint's, sdpa if it names another).",
    )
    unpad: Unpad = Field("auto", description=UNPAD_HELP)
    torch_compile: TorchCompile = Field(
        "off",
        description="torch.compile: layers (each transformer layer, one graph reused), model (each Hugging "
        "Face model whole), auto (layers where measured faster: no device yet, so off), off. true = model.",
    )
    fused_adamw: bool = Field(True, description="AdamW's fused kernel on a GPU (no effect on CPU).")
    tf32: bool = Field(True, description="TF32 for fp32 matmuls on Ampere or newer GPUs (no effect on CPU).")
    collate_ahead: int = Field(
        2,
        ge=0,
        description="Batches collated ahead by a background thread of the training process while a step "
        "runs, when num_workers = 0 (0: collate inside the step).",
    )

    def warmup_steps(self) -> int:
        if self.warmup >= 1:
            return int(self.warmup)
        return round(self.warmup * self.max_steps)


def partial(model: type[Model], name: str) -> type[Model]:
    """``model`` with every field optional and unset by default (same types and checks): a TOML
    table that sets only some keys, dumped with ``exclude_none`` to what it sets."""
    fields: dict[str, Any] = {}
    for key, f in model.model_fields.items():
        typ: Any = Annotated[(f.annotation, *f.metadata)] if f.metadata else f.annotation
        fields[key] = (typ | None, Field(None, description=f.description))
    return create_model(name, __base__=Model, **fields)


if TYPE_CHECKING:
    TrainTable = TrainConfig  # the same fields for the type checker; at run time each is optional
else:
    TrainTable = partial(TrainConfig, "TrainTable")
