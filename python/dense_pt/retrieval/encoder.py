"""A bi-encoder over a Hugging Face backbone: loading, pooling, batching, and saving in a layout
that both ``AutoModel.from_pretrained`` and ``SentenceTransformer(path)`` load.

Pooling is ``cls`` (the [CLS] vector, SimLM/CDMAE) or ``mean`` (masked mean, all-MiniLM-L6-v2);
``normalize`` L2-normalises embeddings (cosine similarity). A folder written by
sentence-transformers (``modules.json`` + ``1_Pooling/config.json`` + ``Normalize``) is read with
its own pooling and normalisation when ``pooling="auto"``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dense_pt.artifacts.manifest import inside
from dense_pt.errors import FormatError, InvalidArgumentError, MismatchError

POOLINGS = ("cls", "mean")
# The lengths a retriever was trained with, beside its weights (written by fine-tuning, read by encoding).
RETRIEVER_LENGTHS = "retriever.json"


@dataclass
class EncoderSpec:
    pooling: str
    normalize: bool


def detect_spec(path: str | Path, pooling: str = "auto", normalize: bool | None = None) -> EncoderSpec:
    """Pooling/normalisation of a checkpoint: explicit values win, else its sentence-transformers
    modules, else (``cls``, no normalisation)."""
    path = Path(path)
    found_pool, found_norm = "cls", False
    modules = path / "modules.json"
    if modules.exists():
        try:
            mods = json.loads(modules.read_text())
        except json.JSONDecodeError as exc:
            raise FormatError(f"invalid JSON ({exc})", modules) from None
        for m in mods:
            kind = m.get("type", "")
            if kind.endswith("Pooling"):
                cfg = json.loads((inside(path, m.get("path"), modules) / "config.json").read_text())
                mode = cfg.get("pooling_mode")  # sentence-transformers >= 6: "cls", "mean" or a list
                if cfg.get("pooling_mode_cls_token") or mode in ("cls", ["cls"]):
                    found_pool = "cls"
                elif cfg.get("pooling_mode_mean_tokens") or mode in ("mean", ["mean"]):
                    found_pool = "mean"
                else:
                    raise FormatError("only cls or mean pooling is supported", path / m["path"])
            if kind.endswith("Normalize"):
                found_norm = True
    if pooling == "auto":
        pooling = found_pool
    if pooling not in POOLINGS:
        raise InvalidArgumentError(f"pooling must be one of {POOLINGS} or 'auto', got {pooling!r}")
    return EncoderSpec(pooling, found_norm if normalize is None else normalize)


def pool(hidden: Any, mask: Any, pooling: str, normalize: bool) -> Any:
    """[batch, seq, dim] hidden states -> [batch, dim] embeddings."""
    import torch

    if pooling == "cls":
        out = hidden[:, 0]
    else:
        m = mask.unsqueeze(-1).to(hidden.dtype)
        out = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
    if normalize:
        out = torch.nn.functional.normalize(out, dim=-1)
    return out


def load_backbone(path: str | Path, device: str = "cpu", dtype: Any = None) -> Any:
    """The encoder as an ``AutoModel`` (a local folder only: never downloads)."""
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    path = Path(path)
    if not (path / "config.json").exists():
        raise FormatError("not a model folder (no config.json)", path)
    hf_logging.disable_progress_bar()  # "Loading weights" bars: noise in a log (and not ours)
    model = AutoModel.from_pretrained(str(path), local_files_only=True, dtype=dtype)
    return model.to(device).eval()


def load_hf_tokenizer(path: str | Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def check_vocab(model_dir: str | Path, store_vocab_hash: str) -> None:
    """Refuse a store tokenized with another vocabulary than the model's tokenizer."""
    from dense_pt.data.tokenizer import vocab_hash

    tok_file = Path(model_dir) / "tokenizer.json"
    if not tok_file.exists():
        raise FormatError("model folder has no tokenizer.json (a fast tokenizer is required)", model_dir)
    from tokenizers import Tokenizer

    if vocab_hash(Tokenizer.from_file(str(tok_file))) != store_vocab_hash:
        raise MismatchError(
            f"{model_dir}: the corpus store was tokenized with another vocabulary than this model's"
        )


def pad_arrays(
    seqs: Sequence[np.ndarray], cls: int, sep: int, pad: int, max_length: int
) -> tuple[np.ndarray, np.ndarray]:
    """[CLS] + content[: max_length - 2] + [SEP], right-padded: (input_ids, attention_mask) int64."""
    lens = [min(len(s), max_length - 2) + 2 for s in seqs]
    width = max(lens)
    ids = np.full((len(seqs), width), pad, dtype=np.int64)
    mask = np.zeros((len(seqs), width), dtype=np.int64)
    for i, s in enumerate(seqs):
        n = lens[i] - 2
        ids[i, 0] = cls
        ids[i, 1 : n + 1] = s[:n]
        ids[i, n + 1] = sep
        mask[i, : n + 2] = 1
    return ids, mask


def pad_batch(seqs: Sequence[np.ndarray], cls: int, sep: int, pad: int, max_length: int) -> tuple[Any, Any]:
    """``pad_arrays`` as torch tensors."""
    import torch

    ids, mask = pad_arrays(seqs, cls, sep, pad, max_length)
    return torch.from_numpy(ids), torch.from_numpy(mask)


def save_sentence_transformer(
    model: Any, tokenizer: Any, out: str | Path, pooling: str, normalize: bool, max_seq_length: int,
    query_max_length: int | None = None,
) -> None:  # fmt: skip
    """Write the backbone (safetensors) + tokenizer, then the model as sentence-transformers saves it,
    so ``SentenceTransformer(out)`` reproduces our pooling, normalisation and lengths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    write_pooling_modules(
        out, int(model.config.hidden_size), pooling, normalize, max_seq_length, query_max_length
    )


def _st_modules() -> tuple[Any, Any, Any]:
    """(Transformer, Pooling, Normalize) of the installed sentence-transformers (v6 moved them out
    of ``sentence_transformers.models``, which now warns)."""
    try:
        from sentence_transformers.base.modules import Normalize, Transformer
        from sentence_transformers.sentence_transformer.modules import Pooling
    except ImportError:
        from sentence_transformers.models import Normalize, Pooling, Transformer
    return Transformer, Pooling, Normalize


def task_lengths(
    transformer_cls: Any, max_seq_length: int, query_max_length: int | None, limit: int | None
) -> dict[str, int]:  # fmt: skip
    """The per-side lengths for sentence-transformers' ``Transformer`` where it has them (6.x:
    ``query_length`` / ``document_length`` in ``sentence_bert_config.json``, applied by
    ``encode_query`` / ``encode_document``); none for an older one, whose one ``max_seq_length``
    is the passage length (the query length then lives in ``retriever.json`` only). Each is capped
    at the model's positions (``limit``), as sentence-transformers caps ``max_seq_length`` itself:
    it does not cap these, and a longer input would index past the position table."""
    keys = getattr(transformer_cls, "config_keys", ())
    if query_max_length is None or "query_length" not in keys or "document_length" not in keys:
        return {}
    cap = limit if limit is not None else max(query_max_length, max_seq_length)
    return {"query_length": min(query_max_length, cap), "document_length": min(max_seq_length, cap)}


def write_pooling_modules(
    out: Path, dim: int, pooling: str, normalize: bool, max_seq_length: int, query_max_length: int | None = None
) -> None:  # fmt: skip
    """Turn the Hugging Face checkpoint in ``out`` into a sentence-transformers folder through its own
    ``save`` (module files, ``model_type``, versions and configs in the layout the installed version
    expects; the tokenizer's ``model_max_length`` = ``max_seq_length``, the passage length), so
    ``detect_spec`` (fine-tuning, encoding) and ``SentenceTransformer(out)`` see how it pools and
    how long its inputs are: with ``query_max_length``, its queries' length too where the installed
    version keeps one (``task_lengths``). The model card stays ours (``create_model_card=False``).
    Without sentence-transformers installed (it needs scipy and scikit-learn, which a lent GPU
    machine lacks), ``_write_classic_modules`` writes its classic layout (one length: the passage's)."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        _write_classic_modules(out, dim, pooling, normalize, max_seq_length)
        return
    from transformers.utils import logging as hf_logging

    transformer_cls, pooling_cls, normalize_cls = _st_modules()
    limit = position_limit(json.loads((out / "config.json").read_text(encoding="utf-8")))
    lengths = task_lengths(transformer_cls, max_seq_length, query_max_length, limit)
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # re-reading the checkpoint just written is not news
    try:
        transformer = transformer_cls(str(out), max_seq_length=max_seq_length, **lengths)
        modules = [transformer, pooling_cls(dim, pooling)]
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    if normalize:
        modules.append(normalize_cls())
    model = SentenceTransformer(
        modules=modules, device="cpu", similarity_fn_name="cosine" if normalize else "dot"
    )
    model.save(str(out), create_model_card=False)


def _write_classic_modules(out: Path, dim: int, pooling: str, normalize: bool, max_seq_length: int) -> None:
    """The sentence-transformers files of a Transformer -> Pooling (-> Normalize) model in the
    layout every sentence-transformers version reads (all-MiniLM-L6-v2's own): ``modules.json``,
    ``sentence_bert_config.json``, ``1_Pooling/config.json``, ``2_Normalize``; the tokenizer's
    ``model_max_length`` = ``max_seq_length``."""
    import torch
    import transformers

    from dense_pt.fsutil import write_json_atomic

    kinds = [("", "Transformer"), ("1_Pooling", "Pooling")] + (
        [("2_Normalize", "Normalize")] if normalize else []
    )
    modules = [{"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
               for i, (path, kind) in enumerate(kinds)]  # fmt: skip
    write_json_atomic(out / "modules.json", modules)
    write_json_atomic(
        out / "sentence_bert_config.json", {"max_seq_length": max_seq_length, "do_lower_case": False}
    )
    modes = (
        "cls_token",
        "mean_tokens",
        "max_tokens",
        "mean_sqrt_len_tokens",
        "weightedmean_tokens",
        "lasttoken",
    )
    chosen = {"cls": "cls_token", "mean": "mean_tokens"}[pooling]
    write_json_atomic(out / "1_Pooling" / "config.json", {"word_embedding_dimension": dim,
                      **{f"pooling_mode_{m}": m == chosen for m in modes}, "include_prompt": True})  # fmt: skip
    if normalize:
        (out / "2_Normalize").mkdir(exist_ok=True)
    versions = {"pytorch": torch.__version__, "transformers": transformers.__version__}
    write_json_atomic(out / "config_sentence_transformers.json", {"__version__": versions, "prompts": {},
                      "default_prompt_name": None, "similarity_fn_name": "cosine" if normalize else "dot"})  # fmt: skip
    tok = out / "tokenizer_config.json"
    if tok.exists():
        write_json_atomic(
            tok, {**json.loads(tok.read_text(encoding="utf-8")), "model_max_length": max_seq_length}
        )


# Models whose position table has pad_token_id + 1 leading slots no sequence can use.
_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert")


def position_limit(config: dict[str, Any]) -> int | None:
    """The longest sequence the model's position embeddings cover, [CLS] and [SEP] included."""
    n = config.get("max_position_embeddings")
    if not isinstance(n, int):
        return None
    if config.get("model_type") in _OFFSET_POSITIONS:
        n -= int(config.get("pad_token_id") or 1) + 1
    return n
