"""Unpadded encoding: the real tokens of every row packed into one ``[tokens, hidden]`` tensor
through the embeddings, each layer's linear layers and norms, and an attention that lets each token
see its own row only (MosaicBERT's and ModernBERT's scheme). On MS MARCO-like passages half of a
padded batch is padding (issue 28); here no GEMM runs on it.

The Hugging Face model stays the model: every weight used is its own module's (``embeddings``,
``encoder.layer[i].attention.self.query`` ...), called on the packed tensor, so checkpoints load
and save unchanged and the padded path (``model(...)``) remains available on the same object.

Attention: SDPA over a nested jagged tensor (``torch.nested.nested_tensor_from_jagged`` with the
rows' cumulative lengths as offsets). Why this one of torch's three variable-length options:

- it runs wherever torch runs: on CUDA SDPA dispatches jagged inputs to the flash or
  memory-efficient variable-length kernels; on CPU it falls back to the math kernel row by row,
  so the CPU tests exercise the very code path the GPU runs;
- it takes ``dropout_p``, so attention-probability dropout trains as in the padded model;
- ``torch.nn.attention.varlen.varlen_attn`` (torch >= 2.10) is flash/cuDNN only: on CPU it raises
  NotImplementedError, and it has no dropout argument (BERT trains with 0.1);
- FlexAttention with a document mask needs ``torch.compile`` to be fast and a block mask rebuilt
  for every batch's lengths.

On an H100 (2026-11-28, BENCHMARKS.md "The device check") this path measured 3.6-4x *slower*
than the padded one on MS MARCO-like lengths: it is host-bound (three nested tensors per layer,
pageable copies), so ``unpad = "auto"`` stays padded there.

Only BERT's architecture is packed here (``model_type`` "bert" or "electra", whose layers are
BERT's; absolute positions, encoder only); other checkpoints keep the padded path under
``unpad = "auto"`` and are refused with one line under ``"on"``. Callers that need [CLS] or a few
positions still get ``[B, L, H]`` back (one scatter); the generators' heads run on the sampled
positions only. Position ids are each token's column in its padded row, the padded model's own
ids, so right-padded rows restart at 0 and any mask gives the padded model's numbers exactly.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from dense_pt.errors import InvalidArgumentError

# SDPA's CPU fallback for jagged inputs builds a strided nested tensor row by row, which warns that
# that (other) layout is a prototype: nothing the user can act on.
warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors is in prototype stage")

# The device types on which ``unpad = "auto"`` packs. Empty until a device check measures the packed
# path ahead of the padded one on that device (benches/gpu_check.py, its MS MARCO-like rows): a speed
# is measured, never assumed. On an H100 it measured 0.25x the padded path's real tokens/s (mlm,
# 2026-11-28): "cuda" goes here once a faster packed attention is measured ahead.
AUTO_UNPAD_DEVICES: tuple[str, ...] = ()
PACKED_MODEL_TYPES = ("bert", "electra")  # ELECTRA's layers are BERT's, with an embedding projection
# The encoders, the re-ranker's classifier (``sequence_logits``), the generators (``masked_lm_logits``).
PACKED_CLASSES = (
    "BertModel",
    "ElectraModel",
    "BertForSequenceClassification",
    "BertForMaskedLM",
    "ElectraForMaskedLM",
)


class Unpadded:
    """A training module whose encoder calls go through :func:`encode_tokens`;
    ``dense_pt.training.switches.apply_switches`` sets ``unpad`` from the ``unpad`` setting."""

    unpad: bool = False

    def unpad_models(self) -> list[nn.Module]:
        """The Hugging Face models its encoder calls run (each must support packing to turn it on)."""
        raise NotImplementedError


def unpad_refusal(model: nn.Module) -> str | None:
    """Why ``model`` cannot run packed (one line naming its type), or None when it can."""
    base = getattr(model, "base_model", model)
    cfg = getattr(base, "config", None)
    kind = getattr(cfg, "model_type", None)
    name = type(model).__name__
    if kind not in PACKED_MODEL_TYPES:
        return f"unpad: {name} (model_type {kind!r}) has no unpadded path (BERT or ELECTRA only); use unpad = auto or off"
    if getattr(cfg, "is_decoder", False) or getattr(cfg, "position_embedding_type", "absolute") != "absolute":
        return (
            f"unpad: {name} is a decoder or has relative positions: no unpadded path; use unpad = auto or off"
        )
    if name not in PACKED_CLASSES:
        return (
            f"unpad: {name} has no unpadded path (only {', '.join(PACKED_CLASSES)}); use unpad = auto or off"
        )
    return None


def resolve_unpad(setting: str, models: list[nn.Module], device: torch.device | str) -> bool:
    """``"off"``: padded. ``"on"``: packed, or one line naming the model that cannot be.
    ``"auto"``: packed on the device types of ``AUTO_UNPAD_DEVICES`` (none yet) when every model
    supports it, else padded (on CPU the math kernel runs row by row)."""
    if setting == "off":
        return False
    reasons = [r for m in models if (r := unpad_refusal(m)) is not None]
    if setting == "on":
        if reasons:
            raise InvalidArgumentError(reasons[0])
        return True
    if setting != "auto":
        raise InvalidArgumentError(f"unpad must be auto, on or off, got {setting!r}")
    return torch.device(device).type in AUTO_UNPAD_DEVICES and not reasons


@dataclass(frozen=True)
class Packing:
    """Where the real tokens of a ``[B, L]`` mask sit: ``flat`` their indices in the flattened
    batch (row-major), ``offsets`` [B + 1] the rows' cumulative lengths."""

    flat: torch.Tensor
    offsets: torch.Tensor
    shape: tuple[int, int]
    min_len: int
    max_len: int

    @classmethod
    def of(cls, attention_mask: torch.Tensor) -> Packing:
        keep = attention_mask.bool()
        lengths = keep.sum(1)
        offsets = F.pad(lengths.cumsum(0), (1, 0))
        lo, hi = (int(v) for v in torch.stack([lengths.min(), lengths.max()]).tolist())
        b, length = keep.shape
        return cls(keep.reshape(-1).nonzero().squeeze(1), offsets, (b, length), lo, hi)

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """[B, L, ...] -> [tokens, ...]."""
        return x.reshape(-1, *x.shape[2:]).index_select(0, self.flat)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """[tokens, H] -> [B, L, H] with zeros at the padding."""
        b, length = self.shape
        out = x.new_zeros(b * length, *x.shape[1:]).index_copy(0, self.flat, x)
        return out.view(b, length, *x.shape[1:])

    def jagged(self, x: torch.Tensor) -> torch.Tensor:
        """[tokens, heads, d] -> a nested [B, heads, j, d] (SDPA's layout)."""
        nt = torch.nested.nested_tensor_from_jagged(
            x, self.offsets, min_seqlen=self.min_len, max_seqlen=self.max_len
        )
        return nt.transpose(1, 2)


def packed_layer(layer: nn.Module, x: torch.Tensor, packing: Packing) -> torch.Tensor:
    """One ``BertLayer`` on packed tokens ``x`` [tokens, H], through the layer's own submodules."""
    att = layer.attention.self
    t = x.shape[0]

    def heads(linear: nn.Module) -> torch.Tensor:
        return packing.jagged(linear(x).view(t, att.num_attention_heads, att.attention_head_size))

    q, k, v = heads(att.query), heads(att.key), heads(att.value)
    # the padded layer's attention dropout: its module's p (transformers 5); the SDPA layer of
    # transformers 4 reads its own ``dropout_prob`` instead
    p = getattr(att, "dropout_prob", att.dropout.p) if att.training else 0.0
    # ``scaling`` from transformers 5 on; before, BERT's 1 / sqrt(head size), SDPA's own default
    scale = getattr(att, "scaling", 1 / math.sqrt(att.attention_head_size))
    o = F.scaled_dot_product_attention(q, k, v, dropout_p=p, scale=scale)
    o = o.transpose(1, 2).values().reshape(t, -1)
    a = layer.attention.output(o, x)
    return layer.output(layer.intermediate(a), a)


def _run_layer(layer: nn.Module, x: torch.Tensor, packing: Packing) -> torch.Tensor:
    if getattr(layer, "gradient_checkpointing", False) and layer.training and torch.is_grad_enabled():
        # non-reentrant, RNG restored (the same dropout masks), as the model's own checkpointing;
        # the determinism check reads saved tensors' sizes, which a nested tensor does not have
        return checkpoint(packed_layer, layer, x, packing, use_reentrant=False, determinism_check="none")
    return packed_layer(layer, x, packing)


def encode_tokens(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    unpad: bool,
    token_type_ids: torch.Tensor | None = None,
    output_hidden_states: bool = False,
) -> Any:
    """Every encoder call of the training modules and of encoding: the model's output with
    ``last_hidden_state`` [B, L, H] (and ``hidden_states``, embeddings first, when asked), padded
    (``model(...)`` itself) or packed and scattered back (zeros at the padding, which no caller
    reads). A batch with an empty row runs padded (a packed row needs a token)."""
    kw: dict[str, Any] = {"output_hidden_states": True} if output_hidden_states else {}
    if token_type_ids is not None:
        kw["token_type_ids"] = token_type_ids
    if not unpad:
        return model(input_ids=input_ids, attention_mask=attention_mask, **kw)
    packing = Packing.of(attention_mask)
    if packing.min_len == 0:
        return model(input_ids=input_ids, attention_mask=attention_mask, **kw)
    from transformers.modeling_outputs import BaseModelOutput

    base = getattr(model, "base_model", model)
    ids = packing.pack(input_ids)
    types = packing.pack(token_type_ids) if token_type_ids is not None else torch.zeros_like(ids)
    positions = packing.flat % packing.shape[1]  # the padded model's ids: the column in the row
    x = base.embeddings(input_ids=ids[None], position_ids=positions[None], token_type_ids=types[None])[0]
    if hasattr(base, "embeddings_project"):  # ELECTRA with embedding_size != hidden_size
        x = base.embeddings_project(x)
    states = [x]
    for layer in base.encoder.layer:
        x = _run_layer(layer, x, packing)
        states.append(x)
    hidden = tuple(packing.unpack(s) for s in states) if output_hidden_states else None
    return BaseModelOutput(last_hidden_state=packing.unpack(x), hidden_states=hidden)


def sequence_logits(
    model: nn.Module, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor, *, unpad: bool
) -> torch.Tensor:
    """A sequence classifier's logits [B, labels]: ``model(...)`` padded; packed for
    ``BertForSequenceClassification`` (its encoder packed, then its own pooler, dropout and
    classifier on the [CLS] states)."""
    if not unpad:
        return model(input_ids=ids, attention_mask=mask, token_type_ids=types).logits
    seq = encode_tokens(model.bert, ids, mask, unpad=True, token_type_ids=types).last_hidden_state
    return model.classifier(model.dropout(model.bert.pooler(seq)))


def masked_lm_logits(
    mlm: nn.Module, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, *, unpad: bool
) -> torch.Tensor:
    """A masked LM's logits [N, vocab] at the ``positions`` [B, L] (bool) only: ``mlm(...)``
    padded; packed for ``BertForMaskedLM`` / ``ElectraForMaskedLM`` (their own prediction heads on
    the selected states: no [B, L, vocab] tensor)."""
    if not unpad:
        return mlm(input_ids=ids, attention_mask=mask).logits[positions]
    seq = encode_tokens(mlm.base_model, ids, mask, unpad=True).last_hidden_state[positions]
    if hasattr(mlm, "generator_lm_head"):  # ELECTRA's generator head
        return mlm.generator_lm_head(mlm.generator_predictions(seq))
    return mlm.cls(seq)
