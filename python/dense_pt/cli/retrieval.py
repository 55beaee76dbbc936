"""`dense-pt bm25 | encode | search` and `dense-pt negatives mine | export`: first-stage retrieval and
the hard negatives mined from its runs (`mine-negatives` and `negatives-export` are the old names,
kept as hidden aliases)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from dense_pt.cli import alias, app
from dense_pt.cli.options import (
    FORCE_DIR_HELP,
    config_option,
    force_option,
    load_settings,
    model_options,
    set_option,
    split,
    with_model_options,
)
from dense_pt.cli.output import emit, json_option
from dense_pt.config.retrieval import BM25Command, EncodeSettings, MineCommand, SearchSettings


def bm25(
    corpus: Path = typer.Argument(
        ..., help="Corpus: BEIR corpus.jsonl ({_id, title, text}) or 'pid<TAB>text'."
    ),
    queries: Path | None = typer.Option(
        None,
        help="Queries: BEIR jsonl or 'qid<TAB>text' (without --queries and --out: build the index only).",
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Run to write (.arrow: Arrow; any other name: TREC text)."
    ),
    index: Path | None = typer.Option(
        None,
        "--index",
        help="Index folder, built once and reused while the corpus and settings match (default: in "
        "dense-pt's cache, $XDG_CACHE_HOME/dense-pt/bm25 or ~/.cache/dense-pt/bm25; never beside the corpus).",
    ),
    force: bool = force_option(),
    as_json: bool = json_option(),
    config: Path | None = config_option(),
    set_: list[str] = set_option(),
    **values: Any,
) -> None:
    """BM25 (bm25s's Lucene variant and tokenization; MaxScore over an index kept on disk): a run, Arrow or TREC text."""
    from dense_pt import logs
    from dense_pt.artifacts import check_output_file
    from dense_pt.retrieval.bm25 import bm25 as run_bm25
    from dense_pt.retrieval.bm25 import bm25_index

    s = load_settings(BM25Command, config, set_, split(values, BM25), "dense-pt bm25")
    if queries is None and out is None:
        from dense_pt.errors import InvalidArgumentError

        if s.query_shard is not None:  # building the index only: there are no queries to slice
            raise InvalidArgumentError("--query-shard slices the queries: give --queries and --out too")
        idx = bm25_index(corpus, index, s)
        done = f"index ready at {idx.path} ({idx.num_docs:,} passages)"
        emit({"index": idx.path, "passages": idx.num_docs}, as_json, lambda: logs.status(done))
        return
    if queries is None or out is None:
        raise typer.BadParameter("give both --queries and --out (or neither, to build the index only)")
    check_output_file(out, force)
    run_bm25(corpus, queries, out, s, index=index)
    emit({"out": out, "query_shard": s.query_shard}, as_json, lambda: logs.status(f"wrote {out}"))


BM25 = [("top", BM25Command)]
app.command()(with_model_options(bm25, model_options(BM25, flags={"k": ["-k"]})))


def encode(
    model: Path = typer.Argument(..., help="Local HF model folder (with tokenizer.json)."),
    source: Path = typer.Argument(..., help="Corpus store folder, or a queries file (jsonl / tsv)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder of .npy shards + manifest (resumable)."),
    force: bool = force_option(FORCE_DIR_HELP),
    as_json: bool = json_option(),
    config: Path | None = config_option(),
    set_: list[str] = set_option(),
    **values: Any,
) -> None:
    """Encode passages (a store) or queries into memory-mapped embedding shards."""
    from dense_pt import logs
    from dense_pt.artifacts import claimed
    from dense_pt.retrieval.encode import encode as run_encode

    s = load_settings(EncodeSettings, config, set_, split(values, ENCODE), "dense-pt encode")
    with claimed(out, "embeddings", "encode", force=force):
        run_encode(model, source, out, s)
    emit(_encoded(out), as_json, lambda: logs.status(f"wrote {out}"))


def _encoded(out: Path) -> dict[str, Any]:
    """What ``encode`` wrote, from its manifest (a rank's part of a sharded run has none yet)."""
    from dense_pt import artifacts

    m = artifacts.read(out)
    if m is None or "shards" not in m:
        return {"out": out}
    keys = ("num_rows", "dim", "pooling", "normalize", "complete", "elapsed_s")
    return {
        "out": out,
        "kind": m["settings"].get("kind"),
        **{k: m.get(k) for k in keys},
        "shards": len(m["shards"]),
    }


def search(
    queries: Path = typer.Argument(..., help="Query embeddings folder (dense-pt encode)."),
    passages: Path = typer.Argument(..., help="Passage embeddings folder (dense-pt encode)."),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Run to write (.arrow: Arrow; any other name: TREC text)."
    ),
    force: bool = force_option(),
    as_json: bool = json_option(),
    config: Path | None = config_option(),
    set_: list[str] = set_option(),
    **values: Any,
) -> None:
    """Exact faiss search (flat inner product), chunked with a top-k merge when asked."""
    from dense_pt import logs
    from dense_pt.artifacts import check_output_file
    from dense_pt.retrieval.search import search_file as run_search

    s = load_settings(SearchSettings, config, set_, split(values, SEARCH), "dense-pt search")
    check_output_file(out, force)
    written = run_search(queries, passages, out, s)
    result = {"out": out, "queries": written.queries, "hits": written.hits}
    emit(result, as_json, lambda: logs.status(f"wrote {out}"))


ENCODE, SEARCH = [("top", EncodeSettings)], [("top", SearchSettings)]
app.command()(with_model_options(encode, model_options(ENCODE)))
app.command()(with_model_options(search, model_options(SEARCH, flags={"k": ["-k"]})))


def mine_negatives(
    run: Path = typer.Argument(..., help="Run to mine from (BM25 or dense; Arrow or TREC text)."),
    qrels: Path = typer.Option(..., help="Judgements; every positive is excluded by id."),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Negatives file (.dpneg); a manifest is written beside it."
    ),
    query_embeddings: Path | None = typer.Option(
        None, help="The run's query embeddings (dense-pt encode): score positives missing from the run."
    ),
    passage_embeddings: Path | None = typer.Option(
        None, help="The run's passage embeddings (dense-pt encode)."
    ),
    corpus: Path | None = typer.Option(None, help="Corpus store: refuse ids it does not hold."),
    text: Path | None = typer.Option(None, help="Also export 'qid<TAB>pid<TAB>score' text here."),
    force: bool = force_option("Replace the output files (OUT, its manifest, --text) if they exist."),
    as_json: bool = json_option(),
    config: Path | None = config_option(),
    set_: list[str] = set_option(),
    **values: Any,
) -> None:
    """Mine hard negatives from a run, excluding judged positives. With a margin, a positive that
    the run does not contain is scored from --query-embeddings / --passage-embeddings."""
    from dense_pt import logs
    from dense_pt.artifacts import check_output_file
    from dense_pt.data import load_qrels
    from dense_pt.errors import InvalidArgumentError
    from dense_pt.progress import Progress
    from dense_pt.retrieval import negatives as neg

    settings = load_settings(MineCommand, config, set_, split(values, MINE), "dense-pt negatives mine")
    for path in (out, Path(f"{out}.manifest.json"), *([text] if text is not None else [])):
        check_output_file(path, force)
    known = None
    if corpus is not None:
        from dense_pt.data.store import CorpusStore

        known = CorpusStore.open(corpus).ids  # an Arrow array: no Python string per passage
    if (query_embeddings is None) != (passage_embeddings is None):
        raise InvalidArgumentError("give both --query-embeddings and --passage-embeddings, or neither")
    scorer = None
    if query_embeddings is not None and passage_embeddings is not None:
        from dense_pt.retrieval.search import PairScorer

        scorer = PairScorer.open(query_embeddings, passage_embeddings)
    with Progress("negatives mine", "queries") as progress:
        progress.update("reading the judgements", 0)
        qrels_map = load_qrels(qrels)
    mined = neg.mine(run, qrels_map, settings, known_ids=known, scorer=scorer)
    neg.write_negatives(out, mined)
    neg.write_manifest(out, run, qrels, settings.model_dump(), mined.stats)
    if text is not None:
        neg.export_text(out, text)
    result = {"out": out, "manifest": Path(f"{out}.manifest.json"), "text": text, "stats": mined.stats}
    emit(result, as_json, lambda: logs.status(mining_summary(out, mined.stats)))


MINE = [("top", MineCommand)]
negatives_app = typer.Typer(
    help="Hard negatives: mine them from a run, export them as text.", no_args_is_help=True
)
app.add_typer(negatives_app, name="negatives")
_mine = with_model_options(mine_negatives, model_options(MINE))
negatives_app.command("mine")(_mine)
alias(app, "mine-negatives", _mine, ("negatives", "mine"))


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


def negatives_export(
    path: Path = typer.Argument(..., help="Negatives file (.dpneg)."),
    out: Path = typer.Option(..., "--out", "-o", help="Text file 'qid<TAB>pid<TAB>score'."),
    force: bool = force_option(),
    as_json: bool = json_option(),
) -> None:
    """Export a binary negatives file as text."""
    from dense_pt import logs
    from dense_pt.artifacts import check_output_file
    from dense_pt.retrieval.negatives import export_text

    check_output_file(out, force)
    export_text(path, out)
    emit({"out": out, "negatives": path}, as_json, lambda: logs.status(f"wrote {out}"))


negatives_app.command("export")(negatives_export)
alias(app, "negatives-export", negatives_export, ("negatives", "export"))
