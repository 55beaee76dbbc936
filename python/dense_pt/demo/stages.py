"""The demo's stages, in order: each ``stage(ctx: DemoContext) -> dict`` reads what earlier stages
put on the context (paths, tokenizer, store), writes its artifacts into its own subfolder of
``ctx.out``, records what later stages need on the context, and returns a small summary dict
(printed in the final table and saved in ``<out>/summary.json``). A stage that finds its
up-to-date output from an earlier run skips the work and says so with ``"status": "up to date"``;
``force`` redoes everything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dense_pt.demo.context import DemoContext, Stage, stamp_matches
from dense_pt.errors import FormatError


# ---- stage: data -----------------------------------------------------------------------------
def stage_data(ctx: DemoContext) -> dict[str, Any]:
    """The BEIR folder to use: ``--corpus`` as given (validated), or the generated demo corpus."""
    from dense_pt import __version__
    from dense_pt.data.judgements import read_qrels
    from dense_pt.data.readers import read_corpus, read_queries
    from dense_pt.demo.corpus import write_demo_beir
    from dense_pt.fsutil import write_json_atomic

    status = "ran"
    if ctx.corpus is not None:
        ctx.data_dir = Path(ctx.corpus)
        if not (ctx.data_dir / "corpus.jsonl").exists():
            raise FormatError("--corpus must be a BEIR folder with corpus.jsonl", path=ctx.data_dir)
        status = "user corpus"
    else:
        ctx.data_dir = ctx.out / "data"
        stamp = {"generator": "dense_pt.demo.corpus", "seed": ctx.seed, "dense_pt_version": __version__}
        stamp_path = ctx.out / "data.json"
        if not ctx.force and ctx.data_dir.exists() and stamp_matches(stamp_path, stamp):
            status = "up to date"
        else:
            write_demo_beir(ctx.data_dir, seed=ctx.seed, force=True)
            write_json_atomic(stamp_path, stamp)
    n_passages = sum(1 for _ in read_corpus(ctx.data_dir / "corpus.jsonl"))
    summary: dict[str, Any] = {"status": status, "folder": str(ctx.data_dir), "passages": n_passages}
    if (ctx.data_dir / "queries.jsonl").exists():
        qids = {q.id for q in read_queries(ctx.data_dir / "queries.jsonl")}
        summary["queries"] = len(qids)
        for split_file in sorted((ctx.data_dir / "qrels").glob("*.tsv")):
            split = split_file.stem
            n = sum(1 for _ in read_qrels(split_file, query_ids=qids))
            ctx.qrels[split] = split_file
            summary[f"qrels {split}"] = n
    return summary


# ---- stage: tokenizer ------------------------------------------------------------------------
def stage_tokenizer(ctx: DemoContext) -> dict[str, Any]:
    """Train a WordPiece tokenizer on the corpus and the training queries (so the queries'
    paraphrase words get tokens of their own; dev/test queries stay unseen). Skipped when those
    inputs and the vocabulary size are unchanged."""
    from itertools import chain

    from dense_pt.artifacts.checksums import file_digest
    from dense_pt.data.judgements import read_qrels
    from dense_pt.data.readers import passage_text, read_corpus, read_queries
    from dense_pt.data.tokenizer import load_tokenizer, train_wordpiece
    from dense_pt.fsutil import atomic_file, write_json_atomic

    assert ctx.data_dir is not None, "the data stage runs first"
    folder = ctx.stage_dir("tokenizer")
    ctx.tokenizer_path = folder / "tokenizer.json"
    corpus = ctx.data_dir / "corpus.jsonl"
    queries = ctx.data_dir / "queries.jsonl"
    train_qrels = ctx.qrels.get("train")
    tok_qrels = train_qrels if queries.exists() else None  # train queries join the corpus
    use_queries = tok_qrels is not None
    stamp = {
        "corpus_sha256": file_digest(corpus, "sha256"),
        "train_queries_sha256": [file_digest(queries, "sha256"), file_digest(tok_qrels, "sha256")]
        if tok_qrels is not None
        else None,
        "vocab_size": ctx.vocab_size,
    }
    if not ctx.force and ctx.tokenizer_path.exists() and stamp_matches(folder / "stamp.json", stamp):
        tok, status = load_tokenizer(ctx.tokenizer_path), "up to date"
    else:
        texts: Any = (passage_text(p) for p in read_corpus(corpus))
        if tok_qrels is not None:
            train_ids = {j.qid for j in read_qrels(tok_qrels)}
            texts = chain(texts, (q.text for q in read_queries(queries) if q.id in train_ids))
        tok = train_wordpiece(texts, vocab_size=ctx.vocab_size)
        with atomic_file(ctx.tokenizer_path, "w", encoding="utf-8") as f:
            f.write(tok.to_str())
        write_json_atomic(folder / "stamp.json", stamp)
        status = "ran"
    return {
        "status": status,
        "vocab": tok.get_vocab_size(),
        "trained on": "corpus + train queries" if use_queries else "corpus",
        "file": str(ctx.tokenizer_path),
    }


# ---- stage: store ----------------------------------------------------------------------------
def stage_store(ctx: DemoContext) -> dict[str, Any]:
    """Tokenize the corpus into a corpus store (a no-op when it is up to date)."""
    from dense_pt.data.build import build_corpus_store, corpus_info

    assert ctx.data_dir is not None and ctx.tokenizer_path is not None
    ctx.store_path = ctx.out / "store"
    res = build_corpus_store(
        ctx.data_dir / "corpus.jsonl", ctx.tokenizer_path, ctx.store_path, force=ctx.force
    )
    info = corpus_info(res.store)
    return {
        "status": "ran" if res.built else "up to date",
        "rows": info["rows"],
        "tokens": info["tokens"],
        "mean length": round(info["length"]["mean"], 1),
        "p90 length": info["length"]["p90"],
        "folder": str(ctx.store_path),
    }


# ---- stage: pmi -------------------------------------------------------------------------------
def stage_pmi(ctx: DemoContext) -> dict[str, Any]:
    """n-gram table over the store and the AMI `importance` column (CDMAE's masking signal)."""
    from dense_pt.demo.pmi import demo_stage

    assert ctx.store_path is not None
    return demo_stage(ctx.store_path, ctx.stage_dir("pmi"), force=ctx.force)


def stage_pretrain(ctx: DemoContext) -> dict[str, Any]:
    """A short CDMAE pre-training of a tiny encoder built from a config; puts the encoder folder in
    ``ctx.artifacts["pretrained_encoder"]`` for the fine-tuning stage."""
    from dense_pt.demo.pretrain import demo_stage

    if ctx.store_path is None:
        raise RuntimeError("the pretrain stage needs the store stage before it")
    summary = demo_stage(ctx.store_path, ctx.stage_dir("pretrain"), seed=ctx.seed, force=ctx.force)
    ctx.artifacts["pretrained_encoder"] = Path(summary["encoder"])
    return summary


def stage_finetune(ctx: DemoContext) -> dict[str, Any]:
    """The fine-tuning pipeline (BM25 -> R1 -> mine -> R2 -> re-ranker -> scores -> distill) on the
    data stage's train/dev splits, starting from the pre-trained encoder; dev metrics per stage."""
    from dense_pt.demo.finetune import finetune_demo_stage

    encoder = ctx.artifacts.get("pretrained_encoder")
    if ctx.data_dir is None or encoder is None:
        raise RuntimeError("the finetune stage needs the data and pretrain stages before it")
    return finetune_demo_stage(ctx.data_dir, ctx.qrels, encoder, ctx.stage_dir("finetune"),
                               steps=ctx.finetune_steps, seed=ctx.seed, force=ctx.force)  # fmt: skip


STAGES: list[Stage] = [
    ("data", stage_data),
    ("tokenizer", stage_tokenizer),
    ("store", stage_store),
    ("pmi", stage_pmi),
    ("pretrain", stage_pretrain),
    ("finetune", stage_finetune),
]
