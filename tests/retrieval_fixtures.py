"""Tiny, deterministic retrieval fixtures: a synthetic corpus with queries and qrels, a WordPiece
tokenizer trained on it, a random-init BERT saved as a local HF folder, and its corpus store."""

from __future__ import annotations

import json
import random
from pathlib import Path

TOPICS = [
    "protein folding enzyme amino acid structure",
    "vaccine immune antibody response infection",
    "climate carbon ocean temperature warming",
    "neural network training gradient layer",
    "galaxy star telescope orbit planet",
    "soil crop wheat harvest farming",
    "cancer tumor cell therapy drug",
    "bridge steel concrete load engineering",
]
FILLER = "the of and a in to with for on study results show new method data analysis".split()


def corpus_and_queries(n_per_topic: int = 6, seed: int = 0):
    rng = random.Random(seed)
    docs, queries, qrels = [], {}, {}
    for t, topic in enumerate(TOPICS):
        words = topic.split()
        for j in range(n_per_topic):
            text = " ".join(rng.choice(words + FILLER) for _ in range(rng.randint(8, 30)))
            docs.append((f"d{t}_{j}", f"{words[j % len(words)]} {text}"))
        for j in range(2):
            qid = f"q{t}_{j}"
            queries[qid] = " ".join(rng.sample(words, 3))
            qrels[qid] = {f"d{t}_{j}": 1, f"d{t}_{j + 2}": 2}
    return docs, queries, qrels


def write_beir(root: Path, docs, queries, qrels) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "corpus.jsonl", "w") as f:
        for pid, text in docs:
            f.write(json.dumps({"_id": pid, "title": "", "text": text}) + "\n")
    with open(root / "queries.jsonl", "w") as f:
        for qid, text in queries.items():
            f.write(json.dumps({"_id": qid, "text": text}) + "\n")
    (root / "qrels").mkdir(exist_ok=True)
    with open(root / "qrels" / "train.tsv", "w") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for q, ds in qrels.items():
            for d, r in ds.items():
                f.write(f"{q}\t{d}\t{r}\n")
    return root


def tiny_model(out: Path, texts, hidden: int = 32, layers: int = 2, seed: int = 0) -> Path:
    """A random-init BERT + a WordPiece tokenizer trained on ``texts``, saved as an HF folder."""
    import torch
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    from dense_pt.data.tokenizer import train_wordpiece

    tok = train_wordpiece(texts, vocab_size=300, min_frequency=1)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        mask_token="[MASK]",
    )
    cfg = BertConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=hidden * 2,
        max_position_embeddings=128,
    )
    torch.manual_seed(seed)
    model = BertModel(cfg)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    fast.save_pretrained(str(out))
    return out


def tiny_setup(tmp: Path):
    """(beir folder, model folder, store folder, queries, qrels)."""
    from tokenizers import Tokenizer

    from dense_pt.data.store import build_store_from_texts

    docs, queries, qrels = corpus_and_queries()
    beir = write_beir(tmp / "beir", docs, queries, qrels)
    model = tiny_model(tmp / "model", [t for _, t in docs] + list(queries.values()))
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    store = tmp / "store"
    build_store_from_texts(store, docs, tok, max_length=64)
    return beir, model, store, queries, qrels
