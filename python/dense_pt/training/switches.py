"""The switches of ``TrainConfig`` that change how a step runs, not what it computes: gradient
checkpointing, the attention kernel, unpadded encoders, ``torch.compile`` and TF32 (fused AdamW is ``optim.py``'s,
autocast the trainer's, cached gradients ``cache.py``'s). Each is tested for equivalence on CPU
where torch allows it (``tests/test_gpu_switches.py``).

They apply to the Hugging Face models inside a training module (the encoder, a joint generator;
a frozen generator, which trains nothing, is left alone) and, for the attention kernel, to every
layer that carries a config (the decoders are copies of the encoder's layers)."""

from __future__ import annotations

import torch
from torch import nn

from dense_pt.config.train import TrainConfig

# torch.compile's backend for ``torch_compile``: inductor generates the kernels (C++ on CPU: ~100 s
# for a tiny BERT here; tests swap in "aot_eager", which traces the same graphs without codegen).
COMPILE_BACKEND = "inductor"
# The device types on which ``torch_compile = "auto"`` compiles the layers. None: on an H100 the
# regional compile measured behind eager (mlm 2,136 vs 2,221 seq/s, 2026-11-28; the whole-model
# compile +11% mlm, +16% cdmae, -2% simlm with a frozen generator, 2026-11-27; BENCHMARKS.md "The
# device check"), and on CPU inductor compiles for minutes, so "auto" is eager everywhere.
AUTO_COMPILE_DEVICES: tuple[str, ...] = ()


def trainable_hf_models(model: nn.Module, frozen: bool = False) -> list[nn.Module]:
    """The outermost Hugging Face models inside ``model`` that have parameters to train (and, with
    ``frozen``, those that have none: a frozen generator)."""
    from transformers import PreTrainedModel

    found: list[nn.Module] = []
    for module in model.modules():
        if not isinstance(module, PreTrainedModel) or any(
            module is not m and _inside(module, m) for m in found
        ):
            continue
        if frozen or any(p.requires_grad for p in module.parameters()):
            found.append(module)
    return found


def _inside(module: nn.Module, outer: nn.Module) -> bool:
    return any(module is m for m in outer.modules())


def set_attention(model: nn.Module, implementation: str) -> None:
    """Every attention layer of ``model`` runs ``implementation`` ("sdpa" or "eager"). Hugging Face
    layers read their config's ``_attn_implementation`` at each call."""
    from transformers import PreTrainedModel

    for module in model.modules():
        if isinstance(module, PreTrainedModel):
            module.set_attn_implementation(implementation)
    for module in model.modules():
        cfg = getattr(module, "config", None)
        if cfg is not None and hasattr(cfg, "_attn_implementation"):
            cfg._attn_implementation = implementation


def enable_checkpointing(model: nn.Module) -> int:
    """Gradient checkpointing of every trainable Hugging Face model inside ``model`` (torch's
    non-reentrant checkpoint, which restores the RNG state, so dropout recomputes the same
    masks); the number of models switched."""
    models = [m for m in trainable_hf_models(model) if getattr(m, "supports_gradient_checkpointing", False)]
    for m in models:
        kwargs = {"use_reentrant": False}
        if hasattr(m, "activation_checkpointing_enable"):  # its name from transformers 5.2x on
            m.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            m.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    return len(models)


def set_tf32(enabled: bool, device: torch.device) -> None:
    """TF32 matmuls and convolutions for fp32 work on a GPU (Ampere and newer); nothing on CPU,
    where "high" matmul precision may select other kernels."""
    if device.type != "cuda":
        return
    torch.set_float32_matmul_precision("high" if enabled else "highest")
    torch.backends.cudnn.allow_tf32 = enabled


def set_unpad(model: nn.Module, setting: str, device: torch.device) -> None:
    """Every module of ``model`` whose encoder calls can run packed (``dense_pt.models.unpad``) runs
    them packed or padded as ``setting`` resolves for its models on ``device``."""
    from dense_pt.models.unpad import Unpadded, resolve_unpad

    for module in model.modules():
        if isinstance(module, Unpadded):
            module.unpad = resolve_unpad(setting, module.unpad_models(), device)


def repeated_layers(model: nn.Module) -> list[nn.Module]:
    """The transformer layers of ``model``: every module of the class of a Hugging Face model's
    ``encoder.layer`` items (the encoder's, a generator's, and the decoders', which are copies or
    new instances of the encoder's layer class)."""
    classes: set[type] = set()
    for m in trainable_hf_models(model, frozen=True):
        layers = getattr(getattr(m.base_model, "encoder", None), "layer", None)
        if isinstance(layers, nn.ModuleList):
            classes |= {type(layer) for layer in layers}
    return [m for m in model.modules() if type(m) in classes]


def resolve_compile(mode: str, device: torch.device) -> str:
    """``torch_compile`` as it runs on ``device``: "off", "layers" or "model" ("auto": "layers" on the
    device types of ``AUTO_COMPILE_DEVICES``, else "off")."""
    if mode == "auto":
        return "layers" if device.type in AUTO_COMPILE_DEVICES else "off"
    return mode


def compile_model(model: nn.Module, mode: str) -> int:
    """Compile ``model`` in place (parameter names, hence checkpoints, stay the model's); the number
    of modules compiled. "layers" (regional): each transformer layer is its own compiled module; the
    layers of one class run the same code, so one graph (per shape and grad mode) serves all twelve
    of BERT-base: seconds to compile, not minutes. "model": each Hugging Face model whole (the
    encoder, a joint generator), as this switch did before; the heads, losses and decoders between
    them stay eager."""
    if mode == "layers":
        targets = repeated_layers(model)
    elif mode == "model":
        targets = trainable_hf_models(model)
    else:
        return 0
    for m in targets:
        m.compile(backend=COMPILE_BACKEND)
    return len(targets)


def apply_switches(model: nn.Module, cfg: TrainConfig, device: torch.device) -> str:
    """What ``cfg`` asks of ``model`` (already on ``device``), before the optimiser is built; the
    compile mode it runs ("off", "layers" or "model")."""
    if cfg.attn_implementation != "auto":
        set_attention(model, cfg.attn_implementation)
    set_unpad(model, cfg.unpad, device)
    if cfg.gradient_checkpointing:
        enable_checkpointing(model)
    set_tf32(cfg.tf32, device)
    mode = resolve_compile(cfg.torch_compile, device)
    compile_model(model, mode)
    return mode
