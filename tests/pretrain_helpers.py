"""Tiny random encoders and hand-built batches for the objective tests (numpy reference masking,
independent of the native collator)."""

from __future__ import annotations

import numpy as np

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
VOCAB = 64


def tiny_config(dropout: float = 0.0, layers: int = 3, vocab_size: int = VOCAB, **kw):
    from transformers import BertConfig

    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        **kw,
    )


def tiny_encoder(dropout: float = 0.0, layers: int = 3):
    from transformers import AutoModel

    return AutoModel.from_config(tiny_config(dropout, layers))


def tiny_generator(folder, vocab_size: int = VOCAB, pad: int = PAD) -> str:
    """A tiny random masked LM saved to ``folder``: a frozen generator for simlm / enc-dec-rtd."""
    import torch
    from transformers import BertForMaskedLM

    torch.manual_seed(7)
    cfg = tiny_config(layers=1, vocab_size=vocab_size, pad_token_id=pad)
    cfg.max_position_embeddings = 160
    BertForMaskedLM(cfg).save_pretrained(folder)
    return str(folder)


def special_ids():
    from dense_pt.objectives import SpecialIds

    return SpecialIds(cls=CLS, sep=SEP, pad=PAD, mask=MASK, unk=UNK, vocab_size=VOCAB)


def _topk(scores, maskable, k):
    order = np.argsort(-np.where(maskable, scores, -np.inf), kind="stable")
    out = np.zeros_like(maskable)
    out[order[:k]] = True
    return out


def make_batch(batch_size=6, length=20, seed=0, p_enc=0.3, p_dec=0.5, importance=None):
    """Every key the objectives read, built with plain numpy (reference masking)."""
    rng = np.random.default_rng(seed)
    ids = np.full((batch_size, length), PAD, dtype=np.int64)
    am = np.zeros((batch_size, length), dtype=np.int64)
    for b in range(batch_size):
        n = int(rng.integers(length // 2, length - 1))
        ids[b, 0], ids[b, 1 : n + 1], ids[b, n + 1] = CLS, rng.integers(5, VOCAB, n), SEP
        am[b, : n + 2] = 1
    special = (ids == CLS) | (ids == SEP) | (ids == PAD)
    maskable = ~special
    enc = np.zeros_like(maskable)
    dec = np.zeros_like(maskable)
    if importance is None:
        importance = rng.random(ids.shape)
    for b in range(batch_size):
        n = int(maskable[b].sum())
        scores = rng.random(length)
        dec[b] = _topk(scores, maskable[b], int(n * p_dec))
        enc[b] = _topk(np.where(dec[b], scores, -1), dec[b], int(n * p_enc))  # nested: enc in dec
    labels = np.where(enc, ids, -100)
    inp = ids.copy()
    u = rng.random(ids.shape)
    inp[enc & (u < 0.8)] = MASK
    rand = enc & (u >= 0.8) & (u < 0.9)
    inp[rand] = rng.integers(5, VOCAB, int(rand.sum()))
    dec_imp = np.zeros_like(maskable)
    for b in range(batch_size):
        dec_imp[b] = _topk(importance[b], maskable[b], int(maskable[b].sum() * p_dec))
    return {
        "original_ids": ids,
        "input_ids": inp,
        "attention_mask": am,
        "special_tokens_mask": special,
        "labels": labels,
        "dec_input_ids": np.where(dec_imp, MASK, ids),
        "dec_labels": np.where(dec_imp, ids, -100),
        "enc_mask": enc,
        "dec_mask": dec,
    }


def view_for(method: str, batch: dict) -> dict:
    """simlm / enc-dec-rtd read the generator's two inputs: the original ids with [MASK] at the
    encoder's (``input_ids``) and at the decoder's (``dec_input_ids``) masked positions, as the
    collator's default ``generator_fill="mask"`` gives; autoencoder reads the original ids."""
    b = dict(batch)
    if method in ("simlm", "enc-dec-rtd"):
        b["input_ids"] = np.where(batch["enc_mask"], MASK, batch["original_ids"])
        b["dec_input_ids"] = np.where(batch["dec_mask"], MASK, batch["original_ids"])
    if method == "autoencoder":
        b["input_ids"] = batch["original_ids"]
    if method == "seed":
        b["dec_input_ids"] = batch["original_ids"]  # SEED's decoder reads the clean passage
    return b


WORDS = (
    "protein cell gene expression tumor growth factor receptor binding immune response virus "
    "infection patient clinical trial dose treatment effect risk study analysis model data signal "
    "pathway mutation sequence structure membrane transport enzyme activity level increase decrease"
).split()


def synthetic_texts(n: int = 64, seed: int = 0) -> list[tuple[str, str]]:
    rng = np.random.default_rng(seed)
    return [(f"p{i}", " ".join(rng.choice(WORDS, int(rng.integers(12, 40))))) for i in range(n)]


def tiny_store(path, n: int = 64, with_importance: bool = True):
    from dense_pt.data.store import build_store_from_texts
    from dense_pt.data.tokenizer import train_wordpiece

    docs = synthetic_texts(n)
    tok = train_wordpiece([t for _, t in docs], vocab_size=120, min_frequency=1)
    store = build_store_from_texts(path, docs, tok)
    if with_importance:
        values, offsets = store.ragged("input_ids")
        imp = np.random.default_rng(1).random(len(values)).astype(np.float32)
        store.add_column("importance", imp, offsets)
    return store


def tiny_config_file(path, store, layers: int = 3) -> str:
    import json

    cfg = tiny_config(dropout=0.1, layers=layers).to_dict()
    cfg["vocab_size"] = store.vocab_size
    cfg["pad_token_id"] = store.special_tokens["pad"]
    cfg["max_position_embeddings"] = 160
    path.write_text(json.dumps(cfg))
    return str(path)


def write_queries(folder, docs, every: int = 3):
    """A queries folder (the expansion writer's format) with two queries (word runs of the passage)
    for every passage but each ``every``-th one."""
    from dense_pt.expansion.writer import QueryWriter

    writer = QueryWriter(folder, {"model": "hand-written", "prompt_hash": "-", "num_queries": 2})
    rows = []
    for i, (pid, text) in enumerate(docs):
        words = text.split()
        qs = [] if i % every == 0 else [" ".join(words[:3]), " ".join(words[4:6])]
        rows.append({"id": pid, "queries": qs, "raw": "", "model": "hand-written", "prompt_hash": "-"})
    writer.write(rows)
    return folder
