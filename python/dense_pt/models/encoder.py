"""The deep encoder: any local BERT-like Hugging Face checkpoint, or a ``config.json`` for a randomly
initialised one. Never downloads anything."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from dense_pt.errors import FormatError, InvalidArgumentError, MismatchError, not_found

# Attention implementations that accept an explicit [B, 1, Lq, Lk] mask (our decoders need one).
MASKABLE_ATTENTION = ("sdpa", "eager")


def load_encoder(init: str | Path) -> nn.Module:
    """A folder with ``config.json`` (+ weights) loads pre-trained; a ``.json`` file gives a random init.

    The model must be BERT-like: ``embeddings.word_embeddings`` and ``encoder.layer`` (BERT,
    RoBERTa, ELECTRA discriminators, MiniLM ...), because the decoders reuse its layer class and
    its embedding module.
    """
    from transformers import AutoConfig, AutoModel

    init = Path(init)
    if init.is_file():
        if init.suffix != ".json":
            raise InvalidArgumentError(f"{init}: expected a checkpoint folder or a config.json file")
        try:
            config = AutoConfig.from_pretrained(str(init))
        except (OSError, ValueError, json.JSONDecodeError) as exc:
            raise FormatError(f"not a model config: {exc}", path=init) from exc
        model = AutoModel.from_config(config)
    elif init.is_dir():
        if not (init / "config.json").is_file():
            raise FormatError("checkpoint folder has no config.json", path=init)
        model = AutoModel.from_pretrained(str(init), local_files_only=True)
    else:
        raise not_found(init, "no such model")
    if not (hasattr(model, "embeddings") and hasattr(getattr(model, "encoder", None), "layer")):
        raise InvalidArgumentError(
            f"{init}: {type(model).__name__} is not a BERT-like encoder (needs embeddings + encoder.layer)"
        )
    if model.config._attn_implementation not in MASKABLE_ATTENTION:
        model.config._attn_implementation = "sdpa"
    # The pooler is not trained by any objective: freeze it so DDP sees no unused parameters,
    # and keep its weights so the saved encoder is complete.
    pooler = getattr(model, "pooler", None)
    if pooler is not None:
        for p in pooler.parameters():
            p.requires_grad_(False)
    return model


def check_encoder_vocab(model: nn.Module, store, init: str | Path) -> None:
    """The store's token ids must index the encoder's embeddings, and a checkpoint shipping its own
    tokenizer must use the store's vocabulary (else pre-training would learn garbage)."""
    n_emb = model.get_input_embeddings().num_embeddings
    if store.vocab_size > n_emb:
        raise MismatchError(
            f"the corpus store's vocabulary has {store.vocab_size} tokens but the encoder {init} "
            f"embeds only {n_emb}"
        )
    init_tok = Path(init) / "tokenizer.json"
    if Path(init).is_dir() and init_tok.is_file():
        from dense_pt.data.tokenizer import load_tokenizer, vocab_hash

        if vocab_hash(load_tokenizer(init_tok)) != store.vocab_hash:
            raise MismatchError(
                f"the corpus store {store.path} was tokenized with another vocabulary than {init_tok}; "
                "rebuild the store with the model's tokenizer.json"
            )


def hidden_size(model: nn.Module) -> int:
    return int(model.config.hidden_size)


def padding_keep(attention_mask: torch.Tensor) -> torch.Tensor:
    """[B, L] padding mask (1 = token) -> bool [B, 1, 1, L]: every query may attend to every token."""
    return attention_mask.bool()[:, None, None, :]


def layer_mask(keep: torch.Tensor, like: torch.Tensor, attn_implementation: str) -> torch.Tensor:
    """A bool ``keep`` mask [B|1, 1, Lq, Lk] (True = may attend) in the form a Hugging Face attention
    layer takes: bool for sdpa, an additive float mask in ``like``'s dtype for eager."""
    if keep.dim() != 4:
        raise ValueError(f"keep mask must be 4-D [B, 1, Lq, Lk], got shape {tuple(keep.shape)}")
    keep = keep.bool()
    if attn_implementation == "eager":
        zero = torch.zeros((), dtype=like.dtype, device=like.device)
        neg = torch.tensor(torch.finfo(like.dtype).min, dtype=like.dtype, device=like.device)
        return torch.where(keep, zero, neg)
    return keep
