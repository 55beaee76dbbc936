"""Benchmarks of the native maskers and the collator against numpy and Hugging Face.

Same process, same arrays, each candidate timed as the median of `--reps` repetitions (after a
warm-up), ratios printed. Pinned to one CPU core (and torch to one thread) so that the numbers
compare one core with one core.

    python benches/bench_masking.py [--reps 50] [--corpus ../shared/data/beir-scifact/corpus.jsonl]

Data: the SciFact abstracts (5,183 passages), a WordPiece vocabulary (8,000) trained on them on the
fly, a corpus store built from them, and an IDF-style importance column (-log document frequency
of each token) standing in for the PMI column.
"""

from __future__ import annotations

import argparse
import json
import os

# One core for every candidate: no idle BLAS/OpenMP worker threads spinning on the other core and
# adding CPU time to whichever candidate happens to be measured (set before numpy is imported).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from dense_pt.collate import Collator  # noqa: E402
from dense_pt.data.store import build_store_from_texts  # noqa: E402
from dense_pt.data.tokenizer import train_wordpiece  # noqa: E402
from dense_pt.masking import importance_mask, random_mask, replace  # noqa: E402

SPECIALS = [0, 1, 2, 3, 4]  # [PAD] [UNK] [CLS] [SEP] [MASK]


def median_times(fns, reps: int) -> list[float]:
    """Median CPU time of each candidate, interleaved rep by rep so that load changes on a shared
    machine hit every candidate alike. The process is pinned to one core, so its CPU time is the
    work of every thread it runs."""
    for fn in fns:
        fn()  # warm-up
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(reps):
        for fn, ts in zip(fns, times, strict=True):
            t = time.process_time()
            fn()
            ts.append(time.process_time() - t)
    return [statistics.median(ts) for ts in times]


# ---- numpy references (vectorised, what one would write without the native code) ----------------
def numpy_importance_mask(importance, attention_mask, special, p, sigma, rng):
    maskable = attention_mask.astype(bool) & ~special
    k = np.floor(maskable.sum(1) * p).astype(np.int64)
    scores = importance + sigma * rng.standard_normal(importance.shape)
    scores[~maskable] = -np.inf
    order = np.argsort(-scores, axis=1, kind="stable")  # ties: earlier position first
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.broadcast_to(np.arange(order.shape[1]), order.shape), axis=1)
    return ranks < k[:, None]


def numpy_random_mask(attention_mask, special, p, rng):
    maskable = attention_mask.astype(bool) & ~special
    k = np.floor(maskable.sum(1) * p).astype(np.int64)
    keys = np.where(maskable, rng.random(maskable.shape), 2.0)
    ranks = np.argsort(np.argsort(keys, axis=1), axis=1)
    return ranks < k[:, None]


def numpy_replace(ids, mask, mask_id, regular, rng, mask_prob=0.8, random_prob=0.1):
    """``regular``: the non-special ids, computed once outside the timed call."""
    u = rng.random(ids.shape)
    labels = np.where(mask, ids, -100)
    new = ids.copy()
    new[mask & (u < mask_prob)] = mask_id
    rand = mask & (u >= mask_prob) & (u < mask_prob + random_prob)
    new[rand] = regular[rng.integers(0, len(regular), size=int(rand.sum()))]
    return new, labels


def load_texts(path: Path) -> list[tuple[str, str]]:
    docs = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            docs.append((d["_id"], (d.get("title", "") + " " + d["text"]).strip()))
    return docs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument(
        "--corpus", type=Path, default=None, help="SciFact corpus.jsonl (default: ../shared/data)"
    )
    ap.add_argument("--batch", type=int, default=128)
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    import torch

    torch.set_num_threads(1)
    reps, B = args.reps, args.batch
    if args.corpus is None:
        for base in (Path(__file__).resolve().parents[1].parent, Path("/work")):
            candidate = base / "shared/data/beir-scifact/corpus.jsonl"
            if candidate.exists():
                args.corpus = candidate
                break
        else:
            sys.exit("SciFact corpus not found: pass --corpus")
    rows_out = []

    def report(name, native_s, other_s, other_name):
        ratio = other_s / native_s
        rows_out.append((name, native_s, other_s, other_name, ratio))
        print(
            f"{name:<44} native {native_s * 1e6:9.1f} us | {other_name} {other_s * 1e6:10.1f} us | {ratio:6.1f}x"
        )

    # ---- 1. maskers on a 128 x 150 batch ------------------------------------------------------
    rng = np.random.default_rng(0)
    L = 150
    ids = rng.integers(5, 30_000, size=(B, L))
    lens = rng.integers(60, L + 1, size=B)
    att = (np.arange(L)[None, :] < lens[:, None]).astype(np.int64)
    special = np.zeros((B, L), dtype=bool)
    special[:, 0] = True
    special[np.arange(B), lens - 1] = True
    imp = rng.random((B, L)).astype(np.float32)
    np_rng = np.random.default_rng(1)
    t_nat, t_np = median_times(
        [
            lambda: importance_mask(ids, att, imp, 0.5, 7, 1.0, special),
            lambda: numpy_importance_mask(imp, att, special, 0.5, 1.0, np_rng),
        ],
        reps,
    )
    report(f"importance_mask {B}x{L} p=0.5 sigma=1", t_nat, t_np, "numpy")

    def native_rr():
        m = random_mask(ids, att, 0.3, 7, special)
        return replace(ids, m, 4, 30_000, 7, special_ids=SPECIALS)

    regular = np.setdiff1d(np.arange(30_000), SPECIALS)

    def numpy_rr():
        m = numpy_random_mask(att, special, 0.3, np_rng)
        return numpy_replace(ids, m, 4, regular, np_rng)

    native_s, numpy_s = median_times([native_rr, numpy_rr], reps)
    report(f"random_mask + replace {B}x{L} p=0.3", native_s, numpy_s, "numpy")

    # ---- 2. the collator vs HF DataCollatorForLanguageModeling ----------------------------------
    from transformers import BertTokenizerFast, DataCollatorForLanguageModeling

    docs = load_texts(args.corpus)
    tok = train_wordpiece((t for _, t in docs), vocab_size=8000)
    with tempfile.TemporaryDirectory() as tmp:
        store = build_store_from_texts(Path(tmp) / "store", docs, tok)
        values, offsets = store.ragged("input_ids")
        # IDF-style importance: -log(document frequency) of each token, as float16.
        df = np.zeros(store.vocab_size)
        for i in range(len(store)):
            df[np.unique(values[offsets[i] : offsets[i + 1]])] += 1
        idf = -np.log((df + 1) / (len(store) + 1))
        store.add_column("importance", idf[values].astype(np.float16), offsets)
        collator = Collator(store, "cdmae", max_length=144, seed=0, crop="head")
        batches = [rng.choice(len(store), size=B, replace=False) for _ in range(reps + 1)]

        hf_tok = BertTokenizerFast(
            tokenizer_object=tok,
            unk_token="[UNK]",
            cls_token="[CLS]",
            sep_token="[SEP]",
            pad_token="[PAD]",
            mask_token="[MASK]",
        )
        hf = DataCollatorForLanguageModeling(hf_tok, mlm_probability=0.3, seed=0)
        cls, sep = store.special_tokens["cls"], store.special_tokens["sep"]
        # The same sequences, already tokenized and head-cropped the same way ([CLS] x [SEP]).
        examples = [
            [{"input_ids": [cls, *values[offsets[i] : offsets[i + 1]][:142].tolist(), sep]} for i in b]
            for b in batches
        ]
        mlm = Collator(store, "mlm", max_length=144, seed=0, crop="head")
        counters = [iter(range(10**9)) for _ in range(3)]
        t_col, t_mlm, t_hf = median_times(
            [
                lambda: collator(batches[next(counters[0]) % len(batches)]),
                lambda: mlm(batches[next(counters[1]) % len(batches)]),
                lambda: hf(examples[next(counters[2]) % len(examples)]),
            ],
            reps,
        )
        report(f"collator cdmae (2 views) vs HF MLM, B={B} L<=144", t_col, t_hf, "HF")
        report(f"collator mlm (same work as HF), B={B} L<=144", t_mlm, t_hf, "HF")

        # ---- 3. throughput on one core at length 144 (every row filled: pad to 144) ------------
        long_rows = np.flatnonzero(np.diff(offsets) >= 142)
        full = Collator(store, "cdmae", max_length=144, seed=0, pad_to="max_length")
        n_batches = 200
        picks = [rng.choice(long_rows, size=B) for _ in range(n_batches)]
        t = time.process_time()
        for epoch, rows in enumerate(picks):
            full(rows, epoch=epoch)
        el = time.process_time() - t
        seq_s = n_batches * B / el
        print(
            f"collator cdmae throughput, one core, L=144: {seq_s:,.0f} sequences/s ({el / n_batches * 1e3:.2f} ms per batch of {B})"
        )
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
