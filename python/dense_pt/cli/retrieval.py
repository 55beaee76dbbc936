"""`dense-pt bm25 | encode | search | mine-negatives | negatives-export`: first-stage retrieval."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from dense_pt.cli import app
from dense_pt.config.defaults import finetune as FT


@app.command()
def bm25(
    corpus: Path = typer.Argument(..., help="BEIR corpus.jsonl ({_id, title, text})."),
    queries: Path = typer.Option(..., help="Queries: BEIR jsonl or 'qid<TAB>text'."),
    out: Path = typer.Option(..., "--out", "-o", help="TREC run to write."),
    k: int = typer.Option(1000, "-k", "--k", min=1, help="Hits per query."),
    k1: float = typer.Option(
        0.9, min=0.0, help="Term-frequency saturation: 0 counts a term once, larger lets repeats count more."
    ),
    b: float = typer.Option(
        0.4, min=0.0, max=1.0, help="Length normalisation: 0 none, 1 full (scores scaled by passage length)."
    ),
    stem: bool = typer.Option(True, help="English Snowball stemming (PyStemmer), if installed."),
) -> None:
    """BM25 (bm25s, Lucene variant) over a corpus: a TREC run."""
    from dense_pt import logs
    from dense_pt.retrieval.bm25 import bm25 as run_bm25

    run_bm25(corpus, queries, out, k=k, k1=k1, b=b, stem=stem)
    logs.status(f"wrote {out}")


@app.command()
def encode(
    model: Path = typer.Argument(..., help="Local HF model folder (with tokenizer.json)."),
    source: Path = typer.Argument(..., help="Corpus store folder, or a queries file (jsonl / tsv)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder of .npy shards + manifest (resumable)."),
    pooling: str = typer.Option(
        "auto", help="cls | mean | auto (from the model's sentence-transformers files)."
    ),
    normalize: bool | None = typer.Option(None, "--normalize/--no-normalize", help="L2-normalise."),
    batch_size: int = typer.Option(
        64, min=1, help="Sequences per forward pass (lower it if the GPU or CPU runs out of memory)."
    ),
    max_length: int | None = typer.Option(
        None,
        help="Tokens per sequence, [CLS] and [SEP] included (default: the lengths the retriever was trained "
        "with, from its retriever.json; else its sentence-transformers max_seq_length; else 32 / 144).",
    ),
    shard_size: int = typer.Option(100_000, min=1, help="Rows per shard file."),
    dtype: str = typer.Option("float16", help="float16 | float32."),
    device: str | None = typer.Option(None, help="cpu / cuda (default: cuda when available)."),
) -> None:
    """Encode passages (a store) or queries into memory-mapped embedding shards."""
    from dense_pt import logs
    from dense_pt.retrieval.encode import encode as run_encode

    run_encode(model, source, out, pooling, normalize, batch_size, max_length, shard_size, dtype, device)
    logs.status(f"wrote {out}")


@app.command()
def search(
    queries: Path = typer.Argument(..., help="Query embeddings folder (dense-pt encode)."),
    passages: Path = typer.Argument(..., help="Passage embeddings folder (dense-pt encode)."),
    out: Path = typer.Option(..., "--out", "-o", help="TREC run to write."),
    k: int = typer.Option(1000, "-k", "--k", min=1, help="Hits per query."),
    metric: str | None = typer.Option(None, help="ip | cosine (default: cosine if normalised, else ip)."),
    max_memory_gb: float | None = typer.Option(
        None, help="Search the passages in chunks of at most this many GB (a positive number)."
    ),
) -> None:
    """Exact faiss search (flat inner product), chunked with a top-k merge when asked."""
    from dense_pt import logs
    from dense_pt.retrieval.search import search as run_search

    run_search(queries, passages, out, k=k, metric=metric, max_memory_gb=max_memory_gb)
    logs.status(f"wrote {out}")


@app.command("mine-negatives")
def mine_negatives(
    run: Path = typer.Argument(..., help="TREC run to mine from (BM25 or dense)."),
    qrels: Path = typer.Option(..., help="Judgements; every positive is excluded by id."),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Negatives file (.dpneg); a manifest is written beside it."
    ),
    depth: int = typer.Option(
        FT.NEGATIVES_DEPTH, help="Candidates considered (SimLM: the top 200; see --pool)."
    ),
    pool: str = typer.Option(
        "rank",
        help="rank: the run's top DEPTH hits, positives then dropped (SimLM's code) | rank+positives: the top "
        "DEPTH + P hits, at most DEPTH survivors (sentence-transformers' range_max) | filtered: the first DEPTH "
        "candidates that pass the filters.",
    ),
    skip_top: int = typer.Option(
        0, help="Skip the first N candidates left (sentence-transformers' range_min)."
    ),
    num: int = typer.Option(0, help="Negatives kept per query (0: all of the pool)."),
    seed: int = typer.Option(
        0, help="Seed of --sampling random (which negatives are kept); the same seed keeps the same ones."
    ),
    sampling: str = typer.Option("random", help="random | top (with --num)."),
    absolute_margin: float | None = typer.Option(
        None, help="Keep only if score + M <= the positive's score (lowest positive)."
    ),
    relative_margin: float | None = typer.Option(
        None, help="Keep only if score <= s+ - |s+| * R (see --relative-form)."
    ),
    relative_form: str = typer.Option(
        "magnitude",
        help="magnitude: s+ - |s+| R (sentence-transformers today) | signed: s+ (1 - R) (before its fix).",
    ),
    max_score: float | None = typer.Option(None, help="Drop candidates scoring above this."),
    min_score: float | None = typer.Option(None, help="Drop candidates scoring below this."),
    query_embeddings: Path | None = typer.Option(
        None, help="The run's query embeddings (dense-pt encode): score positives missing from the run."
    ),
    passage_embeddings: Path | None = typer.Option(
        None, help="The run's passage embeddings (dense-pt encode)."
    ),
    corpus: Path | None = typer.Option(None, help="Corpus store: refuse ids it does not hold."),
    text: Path | None = typer.Option(None, help="Also export 'qid<TAB>pid<TAB>score' text here."),
) -> None:
    """Mine hard negatives from a run, excluding judged positives. With a margin, a positive that
    the run does not contain is scored from --query-embeddings / --passage-embeddings."""
    from dense_pt import logs
    from dense_pt.data import load_qrels, load_run
    from dense_pt.errors import InvalidArgumentError
    from dense_pt.progress import Progress
    from dense_pt.retrieval import negatives as neg

    known = None
    if corpus is not None:
        from dense_pt.data.store import CorpusStore

        known = set(CorpusStore.open(corpus).ids.to_pylist())
    if (query_embeddings is None) != (passage_embeddings is None):
        raise InvalidArgumentError("give both --query-embeddings and --passage-embeddings, or neither")
    scorer = None
    if query_embeddings is not None and passage_embeddings is not None:
        from dense_pt.retrieval.search import PairScorer

        scorer = PairScorer.open(query_embeddings, passage_embeddings)
    params: dict[str, Any] = dict(
        depth=depth, pool=pool, skip_top=skip_top, num=num, seed=seed, sampling=sampling,
        absolute_margin=absolute_margin, relative_margin=relative_margin, relative_form=relative_form,
        max_score=max_score, min_score=min_score,
    )  # fmt: skip
    with Progress("mine-negatives", "queries") as progress:
        progress.update("reading the run", 0)
        run_map, qrels_map = load_run(run), load_qrels(qrels)
        progress.update("mining", 0, len(run_map))
        table = neg.mine_negatives(run_map, qrels_map, known_ids=known, scorer=scorer, **params)
        progress.update("mining", len(run_map), len(run_map))
    neg.write_negatives(out, table)
    neg.write_manifest(Path(f"{out}.manifest.json"), run, qrels, params, table.stats)
    if text is not None:
        neg.export_text(out, text)
    logs.status(mining_summary(out, table.stats))


def mining_summary(out: Path, stats: dict) -> str:
    """The miner's statistics as one readable line (all of them are in the manifest too)."""
    q, n = stats["queries"], stats["negatives"]
    parts = [
        f"{n:,} negatives for {q:,} queries ({n / max(q, 1):,.1f} per query)",
        f"{stats['excluded_positives']:,} judged positives excluded",
        f"{stats['filtered_by_margin_or_score']:,} candidates filtered by margin or score",
    ]
    if stats.get("queries_with_fewer_than_num"):
        parts.append(f"{stats['queries_with_fewer_than_num']:,} queries with fewer than --num")
    if stats.get("queries_without_positive_score"):
        parts.append(f"{stats['queries_without_positive_score']:,} queries whose positive has no score")
    return f"wrote {out}: " + "; ".join(parts)


@app.command("negatives-export")
def negatives_export(
    path: Path = typer.Argument(..., help="Negatives file (.dpneg)."),
    out: Path = typer.Option(..., "--out", "-o", help="Text file 'qid<TAB>pid<TAB>score'."),
) -> None:
    """Export a binary negatives file as text."""
    from dense_pt.retrieval.negatives import export_text

    export_text(path, out)
