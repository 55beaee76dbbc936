"""Test fixtures for the fine-tuning pipeline: a topic-word synthetic corpus (each query judged on two
passages, graded 1 and 2), a tiny random BERT with a WordPiece tokenizer, a pipeline config sized
for them, and ``run_small_pipeline`` that chains them. Test-only: ``dense-pt demo`` uses the
generated demo corpus of ``dense_pt.demo``. Benches import this module by adding tests/ to sys.path."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dense_pt.pipeline.config import ResolvedPipeline

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


def synthetic_corpus(n_per_topic: int = 6, queries_per_topic: int = 2, seed: int = 0):
    """(docs [(id, text)], queries {qid: text}, qrels {qid: {pid: rel}}): topic words make
    relevance learnable; each query has two judged passages (graded 1 and 2)."""
    rng = random.Random(seed)
    docs, queries, qrels = [], {}, {}
    for t, topic in enumerate(TOPICS):
        words = topic.split()
        for j in range(n_per_topic):
            text = " ".join(rng.choice(words + FILLER) for _ in range(rng.randint(8, 30)))
            docs.append((f"d{t}_{j}", f"{words[j % len(words)]} {text}"))
        for j in range(queries_per_topic):
            qid = f"q{t}_{j}"
            queries[qid] = " ".join(rng.sample(words, 3))
            qrels[qid] = {f"d{t}_{j % n_per_topic}": 1, f"d{t}_{(j + 2) % n_per_topic}": 2}
    return docs, queries, qrels


def write_beir(root: Path, docs, queries, qrels) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as f:
        for pid, text in docs:
            f.write(json.dumps({"_id": pid, "title": "", "text": text}) + "\n")
    with open(root / "queries.jsonl", "w", encoding="utf-8") as f:
        for qid, text in queries.items():
            f.write(json.dumps({"_id": qid, "text": text}) + "\n")
    (root / "qrels").mkdir(exist_ok=True)
    with open(root / "qrels" / "train.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for q, ds in qrels.items():
            for d, r in ds.items():
                f.write(f"{q}\t{d}\t{r}\n")
    return root


def tiny_model(
    out: Path, texts, hidden: int = 32, layers: int = 2, seed: int = 0, vocab_size: int = 300
) -> Path:
    """A random-init BERT + a WordPiece tokenizer trained on ``texts``, saved as an HF folder."""
    import torch
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    from dense_pt.data.tokenizer import train_wordpiece

    tok = train_wordpiece(texts, vocab_size=vocab_size, min_frequency=1)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
        pad_token="[PAD]", mask_token="[MASK]",
    )  # fmt: skip
    cfg = BertConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=2, intermediate_size=hidden * 2, max_position_embeddings=128,
    )  # fmt: skip
    torch.manual_seed(seed)
    model = BertModel(cfg)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    fast.save_pretrained(str(out))
    return out


def small_config(
    out: Path,
    beir: Path,
    model: Path,
    steps: int = 20,
    seed: int = 13,
    pretrain: dict[str, Any] | None = None,
) -> ResolvedPipeline:
    """A pipeline configuration sized for the synthetic corpus and a tiny model (``pretrain``: an optional
    ``[pretrain]`` table)."""
    from dense_pt.pipeline.config import validate_config

    train = {"max_steps": steps, "batch_size": 8, "lr": 5e-4, "warmup": 0.1, "save_every": max(1, steps // 2),
             "log_every": 5, "precision": "fp32"}  # fmt: skip
    raw = {
        "out": str(out),
        "seed": seed,
        "data": {"corpus": str(beir / "corpus.jsonl"), "queries": str(beir / "queries.jsonl"),
                 "qrels": str(beir / "qrels" / "train.tsv"), "dev_fraction": 0.25, "max_length": 64},
        "model": {"init": str(model)},
        "eval": {"k": 20, "measures": ["nDCG@10", "R@20", "RR@10"]},
        "encode": {"batch_size": 32},
        "mine": {"depth": 20, "num": 8, "bm25_depth": 20},
        "r1": {"group_size": 4, "query_max_length": 16, "passage_max_length": 64, "train": train},
        "r2": {"group_size": 4, "query_max_length": 16, "passage_max_length": 64, "train": train},
        # no ELECTRA checkpoint here: the re-ranker starts from the tiny model too
        # the authors' procedure in miniature: train on the top half (a quarter of 4 is the positive alone)
        "reranker": {"init": "model", "group_size": 4, "forward_factor": 2, "query_max_length": 16, "max_length": 64, "depth": 20,
                     "num": 8, "rerank_depth": 20, "score_num": 6, "train": train},
        "distill": {"group_size": 4, "query_max_length": 16, "passage_max_length": 64, "train": train},
    }  # fmt: skip
    if pretrain:
        raw["pretrain"] = pretrain
    return validate_config(raw, out.parent.resolve(), "small pipeline config")


def run_small_pipeline(out: str | Path, corpus: str | Path | None = None, steps: int = 20, progress: bool = False,
               log=print) -> dict[str, Any]:  # fmt: skip
    """Run the whole fine-tuning chain on the synthetic corpus (or a BEIR folder) with a tiny random
    model; returns the stage manifests (``["distill"]["metrics"]`` etc.). Minutes on 2 cores."""
    from dense_pt.pipeline.run import run_pipeline

    out = Path(out)
    if corpus is None:
        docs, queries, qrels = synthetic_corpus(n_per_topic=8, queries_per_topic=4)
        beir = write_beir(out / "data", docs, queries, qrels)
        texts = [t for _, t in docs] + list(queries.values())
    else:
        beir = Path(corpus)
        texts = [
            json.loads(x).get("text", "") for x in (beir / "corpus.jsonl").read_text().splitlines()[:20000]
        ]
    model = out / "tiny-model"
    if not (model / "config.json").exists():
        tiny_model(model, texts)
    return run_pipeline(small_config(out / "pipeline", beir, model, steps), progress=progress, log=log)
