"""SciFact, for real: train a WordPiece tokenizer on the corpus, build the store, count 1-4-grams,
score AMI, and show the `pmi inspect` view of two passages. Checks that content words outrank
stop words (mean AMI over the whole corpus and within the two passages).

    nice python benches/pmi_scifact.py --corpus ../shared/data/beir-scifact/corpus.jsonl

Equivalent CLI, once the store exists:
    dense-pt pmi build bench-output/scifact-store --out bench-output/scifact.ngram --threads 2
    dense-pt pmi score bench-output/scifact-store --table bench-output/scifact.ngram
    dense-pt pmi inspect bench-output/scifact.ngram --tokenizer bench-output/scifact-store --text "..."
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from rich.console import Console

from dense_pt.config.pmi import PmiBuild
from dense_pt.data.store import CorpusStore, build_store_from_texts
from dense_pt.data.tokenizer import train_wordpiece
from dense_pt.pmi import NgramTable, build, score
from dense_pt.pmi.inspect import render

# A small, standard English function-word list (articles, prepositions, pronouns, auxiliaries).
STOP = set(
    """a an the of in on at to for from by with and or but nor as is are was were be been being
    this that these those it its which who whom whose what when where while than then there here
    has have had do does did not no can could may might will would shall should must also into
    onto over under between among through during after before such both each other more most
    very only however thus""".split()
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", type=Path, default=Path("../shared/data/beir-scifact/corpus.jsonl"))
    ap.add_argument("--work", type=Path, default=Path("bench-output"))
    ap.add_argument("--vocab-size", type=int, default=16000)
    ap.add_argument("--passages", type=int, nargs=2, default=[0, 1], help="Row indices to show.")
    ap.add_argument("--chars", type=int, default=420, help="Characters of each passage shown.")
    args = ap.parse_args()
    console = Console(width=120)

    docs = []
    with args.corpus.open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            docs.append((d["_id"], (d["title"] + " " + d["text"]).strip()))
    t0 = time.perf_counter()
    tok = train_wordpiece((t for _, t in docs), vocab_size=args.vocab_size)
    store_path = args.work / "scifact-store"
    store = build_store_from_texts(store_path, docs, tok, force=True)
    console.print(
        f"store: {len(store):,} passages, {store.manifest['num_tokens']:,} tokens ({time.perf_counter() - t0:.1f} s)"
    )

    table_path = args.work / "scifact.ngram"
    stats = build(store, table_path, PmiBuild(max_n=4, min_count=1, threads=2))
    console.print(f"table: N_n {stats['totals']}, stored {stats['entries']}, {stats['seconds']:.2f} s")
    res = score(store, table_path, window=4, threads=2)
    console.print(f"score: {res['tokens']:,} tokens at {res['tokens_per_s']:,.0f} tokens/s")

    # Content vs stop words over the whole corpus: whole-word tokens only (no ## pieces).
    store = CorpusStore.open(store_path)
    values, _ = store.ragged()
    imp, _ = store.ragged("importance")
    vocab = {i: t for t, i in tok.get_vocab().items()}
    is_word = np.array([vocab.get(i, "").isalpha() for i in range(store.vocab_size)])
    is_stop = np.array([vocab.get(i, "") in STOP for i in range(store.vocab_size)])
    words = is_word[values]
    stop = is_stop[values]
    m_stop = float(imp[stop].mean())
    m_content = float(imp[words & ~stop].mean())
    console.print(
        f"mean AMI over the corpus: content words {m_content:.3f} vs stop words {m_stop:.3f} "
        f"({int((words & ~stop).sum()):,} vs {int(stop.sum()):,} tokens)"
    )

    table = NgramTable.open(table_path)
    texts = [docs[i][1][: args.chars].rsplit(" ", 1)[0] for i in args.passages]
    render(table, tokenizer=store_path, texts=texts, top=5, top_min_count=20, console=console)
    for text in texts:
        enc = tok.encode(text, add_special_tokens=False)
        a = table.ami(np.array(enc.ids, np.uint32))
        s = np.array([t in STOP for t in enc.tokens])
        w = np.array([t.isalpha() for t in enc.tokens])
        console.print(
            f"passage check: content words mean AMI {a[w & ~s].mean():.3f} > stop words {a[s].mean():.3f}: "
            f"{bool(a[w & ~s].mean() > a[s].mean())}"
        )


if __name__ == "__main__":
    main()
