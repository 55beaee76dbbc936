"""Writing a pre-trained model: the encoder as a Hugging Face checkpoint plus tokenizer
(``AutoModel`` / ``AutoTokenizer.from_pretrained`` load it), the decoder or head beside it with its
own config (so a person can inspect it, or ``load_objective`` can rebuild the whole model), and a
jointly trained generator as a masked-LM checkpoint (reusable as ``--generator DIR/generator``).
Every folder is written under a temporary name and renamed into place."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from dense_pt.artifacts.replace import atomic_dir
from dense_pt.fsutil import write_json_atomic

HEAD_FORMAT = "dense-pt-pretrain-head/1"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


def write_tokenizer(folder: Path, store, init: str | Path, max_length: int) -> None:
    """The model's own tokenizer files when the checkpoint ships them with the store's vocabulary
    (keeps lower-casing and other settings), else the store's tokenizer through transformers'
    ``save_pretrained``, its special tokens named from the store and ``model_max_length`` the
    pre-training length."""
    init = Path(init)
    if init.is_dir() and (init / "tokenizer_config.json").is_file() and (init / "tokenizer.json").is_file():
        for name in _TOKENIZER_FILES:
            if (init / name).is_file():
                shutil.copy2(init / name, folder / name)
        return
    from dense_pt.data.tokenizer import hf_fast_tokenizer

    hf_fast_tokenizer(store.tokenizer(), store.special_tokens, max_length).save_pretrained(str(folder))


def write_pooling(folder: Path, objective, init: str | Path, max_length: int) -> None:
    """Record what the bottleneck read (``pooling``) as the encoder's sentence-transformers pooling,
    so fine-tuning, encoding and ``SentenceTransformer(folder)`` use the vector that was trained.
    Normalisation stays the starting checkpoint's own."""
    from dense_pt.retrieval.encoder import detect_spec, write_pooling_modules

    init = Path(init)
    own = detect_spec(init) if init.is_dir() else None
    # a method without a bottleneck (mlm) keeps the checkpoint's pooling
    pooling = getattr(objective.opts, "pooling", None) or (own.pooling if own else "cls")
    normalize = own.normalize if own else False
    write_pooling_modules(folder, objective.hidden, pooling, normalize, max_length)


def _card(
    folder: Path, objective, store, init: str | Path, summary: dict[str, Any], config: dict | None
) -> None:
    from dense_pt.model_card import write_model_card
    from dense_pt.objectives import profile

    paper = (config or {}).get("paper")
    prof = profile(objective.method, paper)
    write_model_card(
        folder, "encoder", f"{objective.method} pre-trained encoder", init, objective.method,
        f"{prof.title}; defaults from profile '{prof.paper}' (dense_pt.config.defaults.objectives)",
        {"corpus store": str(Path(store.path).resolve()), "passages": len(store), "steps": summary.get("steps")},
        config or objective.describe(),
    )  # fmt: skip


def export_model(
    objective, out: Path, store, init: str | Path, max_length: int, summary: dict[str, Any],
    config: dict[str, Any] | None = None,
) -> dict:  # fmt: skip
    """Write ``out/encoder`` (with its model card), ``out/decoder`` (when the method has one) and
    ``out/generator``. ``config``: the run's resolved configuration, for the card."""
    from safetensors.torch import save_file
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one shard: a progress bar is noise
    out = Path(out)
    written = {}
    with atomic_dir(out / "encoder", force=True) as tmp:
        objective.encoder.save_pretrained(str(tmp), safe_serialization=True)
        write_tokenizer(tmp, store, init, max_length)
        write_pooling(tmp, objective, init, max_length)
        _card(tmp, objective, store, init, summary, config)
    written["encoder"] = str(out / "encoder")

    with atomic_dir(out / "decoder", force=True) as tmp:
        save_file(objective.sidecar_state(), str(tmp / "model.safetensors"), metadata={"format": HEAD_FORMAT})
        desc = objective.describe()
        for name in ("decoder", "head"):
            module = getattr(objective, name, None)
            if module is not None and hasattr(module, "describe"):
                desc[name] = module.describe()
        desc.update({"format": HEAD_FORMAT, "encoder": "../encoder", "summary": summary})
        write_json_atomic(tmp / "config.json", desc)
    written["decoder"] = str(out / "decoder")

    generator = getattr(objective, "generator", None)
    if generator is not None and generator.joint:
        with atomic_dir(out / "generator", force=True) as tmp:
            generator.mlm.save_pretrained(str(tmp), safe_serialization=True)
            write_tokenizer(tmp, store, init, max_length)
        written["generator"] = str(out / "generator")
    return written


def load_objective(out: str | Path, device: str = "cpu"):
    """Rebuild the whole pre-training model (encoder + decoder/head + generator) from an export."""
    from safetensors.torch import load_file

    from dense_pt.models.encoder import load_encoder
    from dense_pt.objectives import MethodOptions, SpecialIds, build_objective

    out = Path(out)
    desc = json.loads((out / "decoder" / "config.json").read_text(encoding="utf-8"))
    opts = MethodOptions(**desc["options"])
    if opts.generator == "joint" and (out / "generator").is_dir():
        opts.generator = str(out / "generator")
    encoder = load_encoder(out / "encoder")
    special = SpecialIds(**desc["summary"]["special_ids"])
    objective = build_objective(desc["method"], encoder, special, opts)
    missing, unexpected = objective.load_state_dict(
        load_file(str(out / "decoder" / "model.safetensors")), strict=False
    )
    bad = [k for k in missing if not k.startswith(("encoder.", "generator."))]
    if bad or unexpected:
        raise ValueError(
            f"decoder weights do not match the method: missing {bad[:5]}, unexpected {unexpected[:5]}"
        )
    return objective.to(device)
