"""Corpus build throughput: where the time goes, side by side in one run.

Candidates on the same corpus and tokenizer:
  read          stream the corpus file through read_corpus (parsing + checks only)
  encode        tokenizers' encode_batch alone (the floor)
  encode+words  encode_texts: ids and word ids, vectorized over each batch (what build uses)
  encode+loop   the same with the per-token Python loop for word ids (the previous implementation)
  build         build_corpus_store end to end (read + encode + Arrow write + sha256), --force

Usage:
  python benches/bench_corpus_build.py CORPUS [--tokenizer tok.json] [--vocab-size 8000] [--threads T]
(without --tokenizer one is trained on the corpus first, not timed).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from dense_pt.config.corpus import CorpusSettings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--tokenizer", type=Path)
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from dense_pt.data.build import build_corpus_store, set_tokenizer_threads, train_tokenizer_on_corpus
    from dense_pt.data.readers import passage_text, read_corpus
    from dense_pt.data.tokenizer import _word_index, encode_texts, load_tokenizer

    set_tokenizer_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="bench-corpus-"))
    tok_path = args.tokenizer
    if tok_path is None:
        tok_path = tmp / "tok.json"
        train_tokenizer_on_corpus(args.corpus, tok_path, vocab_size=args.vocab_size)
    tok = load_tokenizer(tok_path)
    texts = [passage_text(p) for p in read_corpus(args.corpus)]
    n = len(texts)
    bs = args.batch_size

    def batches():
        for i in range(0, n, bs):
            yield texts[i : i + bs]

    def c_read():
        sum(1 for _ in read_corpus(args.corpus))

    def c_encode():
        for b in batches():
            tok.encode_batch(b, add_special_tokens=False)

    def c_words():
        for b in batches():
            encode_texts(tok, b)

    def c_loop():
        for b in batches():
            for e in tok.encode_batch(b, add_special_tokens=False):
                np.asarray(e.ids, dtype=np.uint32)
                _word_index(e.word_ids)

    def c_build():
        build_corpus_store(args.corpus, tok_path, tmp / "store", CorpusSettings(batch_size=bs), force=True)

    cands = [
        ("read", c_read),
        ("encode", c_encode),
        ("encode+words", c_words),
        ("encode+loop", c_loop),
        ("build", c_build),
    ]
    best: dict[str, float] = {}
    for _ in range(args.repeats):
        for name, fn in cands:
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            best[name] = min(best.get(name, float("inf")), dt)
    floor = best["encode"]
    print(
        f"corpus {args.corpus} ({n:,} passages), threads={args.threads or 'default'}, batch={bs}, best of {args.repeats}"
    )
    print(f"{'candidate':<14}{'seconds':>9}{'passages/s':>12}{'x encode':>10}")
    for name, _ in cands:
        print(f"{name:<14}{best[name]:>9.2f}{n / best[name]:>12,.0f}{best[name] / floor:>10.2f}")


if __name__ == "__main__":
    main()
