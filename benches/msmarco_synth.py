"""A seeded synthetic MS MARCO passage ranking collection of the real size: nothing is downloaded.

    python benches/msmarco_synth.py --scale 0.01 --out /tmp/msmarco-0.01 [--seed 0]

writes into ``--out`` (``round(count * scale)`` rows of each; 0.01, 0.1 and 1 are the sizes the
benchmarks use, any scale in [0.001, 1] works):

  collection.tsv          pid<TAB>text        8,841,823 passages at scale 1
  queries.train.tsv       qid<TAB>text          502,939 training queries
  queries.dev.small.tsv   qid<TAB>text            6,980 dev queries (at least 10)
  qrels.train.tsv         qid 0 pid 1         one relevant passage per query (MS MARCO's format,
  qrels.dev.small.tsv                         tab-separated)
  synth.json              scale, seed, counts and the generator version (``ensure`` reuses a folder
                          only when these match)

Passages: words drawn independently from SciFact's vocabulary (the lower-cased words of
../shared/data/beir-scifact/corpus.jsonl with their counts, so Zipf frequencies and real English
sub-words for the BERT tokenizer), lengths log-normal with MS MARCO's shape (mean ~56 words, median
~50, a long tail clipped at 400). Queries: 3-12 words (mean ~5.7), most drawn without replacement
from one target passage, preferring its rarer words (weight count^-1/2, as a user would type the
content words), plus a few off-passage words from the whole vocabulary (binomial, p 0.15; at
least two words always come from the target), in random order. Query ids and passage ids are
disjoint integer ranges; each query's target is a distinct passage.

Differences from the real collection that matter for benchmarks: the vocabulary is SciFact's 32k
words, so no term is rarer than ~1 in 1.2M words and posting lists are longer than MS MARCO's
(which has millions of distinct terms, most of them rare). BM25 pruning has less to skip here than
on the real data: a throughput measured on this corpus is a conservative one.

Generation is vectorised with numpy over chunks of passages (the text bytes are gathered from one
buffer of the vocabulary, never joined word by word in Python) and written as it goes: memory is
bounded by the chunk, and the queries are held only as a small int32 matrix until they are
written. ``generate`` and ``ensure`` are importable for the other benchmarks.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

VERSION = 1
MSMARCO_PASSAGES = 8_841_823
MSMARCO_TRAIN_QUERIES = 502_939
MSMARCO_DEV_QUERIES = 6_980
MIN_DEV_QUERIES = 10
SCALE_RANGE = (0.001, 1.0)


def find_scifact() -> Path:
    """SciFact in $DENSE_PT_SHARED (the shared folder or its data/) or ``shared/data`` beside the
    repo or one of its parents (as tests/conftest.py looks)."""
    env = os.environ.get("DENSE_PT_SHARED")
    roots = [Path(env) / "data", Path(env)] if env else []
    roots += [parent / "shared" / "data" for parent in Path(__file__).resolve().parents[1].parents]
    for root in roots:
        if (root / "beir-scifact" / "corpus.jsonl").is_file():
            return root / "beir-scifact"
    return roots[-1] / "beir-scifact"


DEFAULT_SOURCE = find_scifact()
# Passage length in words: log-normal, mean exp(MU + SIGMA^2 / 2) ~ 56 before clipping.
LEN_SIGMA = 0.5
LEN_MU = math.log(56.0) - LEN_SIGMA**2 / 2
LEN_MIN, LEN_MAX = 2, 400
Q_MIN, Q_MAX, Q_P = 3, 12, 0.3  # query words: Q_MIN + Binomial(Q_MAX - Q_MIN, Q_P)
OFF_P = 0.15  # each query word is off the target passage with this probability
MIN_ON = 2  # words always taken from the target passage
CHUNK = 16_384  # passages generated and written at once
WORD_RE = re.compile(r"[a-z]+|[0-9]+")
FILES = (
    "collection.tsv",
    "queries.train.tsv",
    "queries.dev.small.tsv",
    "qrels.train.tsv",
    "qrels.dev.small.tsv",
)


@dataclass(frozen=True)
class Counts:
    passages: int
    train: int
    dev: int


def counts(scale: float) -> Counts:
    """Rows of each file at ``scale`` (MS MARCO's sizes at 1)."""
    lo, hi = SCALE_RANGE
    if not lo <= scale <= hi:
        raise ValueError(f"scale must be in [{lo}, {hi}], got {scale}")
    n = round(MSMARCO_PASSAGES * scale)
    train = round(MSMARCO_TRAIN_QUERIES * scale)
    dev = max(round(MSMARCO_DEV_QUERIES * scale), MIN_DEV_QUERIES)
    return Counts(n, train, dev)


@dataclass(frozen=True)
class Vocabulary:
    """Words with their sampling tables and the byte buffer the text is gathered from."""

    blob: np.ndarray  # uint8: every word followed by one space
    offset: np.ndarray  # int64: where each word starts in blob
    size: np.ndarray  # int64: bytes of each word, its space included
    cdf: np.ndarray  # float64: cumulative word probabilities (Zipf: the source's counts)
    query_weight: np.ndarray  # float64: log of count^-1/2, the preference among a passage's words


def vocabulary(source: Path = DEFAULT_SOURCE) -> Vocabulary:
    """The lower-cased words of a BEIR corpus (title and text) with their counts, most frequent
    first (ties by word, so the table and hence the output do not depend on dict order)."""
    path = source / "corpus.jsonl" if source.is_dir() else source
    found: dict[str, int] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            obj = json.loads(line)
            for w in WORD_RE.findall(f"{obj.get('title', '')} {obj.get('text', '')}".lower()):
                found[w] = found.get(w, 0) + 1
    words = sorted(found, key=lambda w: (-found[w], w))
    count = np.array([found[w] for w in words], dtype=np.float64)
    encoded = [w.encode("ascii") + b" " for w in words]
    size = np.array([len(e) for e in encoded], dtype=np.int64)
    offset = np.cumsum(size) - size
    blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    cdf = np.cumsum(count / count.sum())
    cdf[-1] = 1.0
    return Vocabulary(blob, offset, size, cdf, -0.5 * np.log(count))


def draw_words(rng: np.random.Generator, vocab: Vocabulary, n: int) -> np.ndarray:
    """``n`` word ids with the vocabulary's frequencies."""
    return np.searchsorted(vocab.cdf, rng.random(n), side="right").astype(np.int32)


def render(vocab: Vocabulary, words: np.ndarray, per_line: np.ndarray, prefixes: list[str]) -> bytes:
    """Lines ``prefix + w1 w2 ... wn + newline``: ``words`` flat, ``per_line[i]`` (>= 1) of them on
    line i. The bytes are gathered from the vocabulary's buffer in one vectorised pass."""
    pre = "".join(prefixes).encode("ascii")
    pre_size = np.fromiter((len(p) for p in prefixes), dtype=np.int64, count=len(prefixes))
    pre_off = np.cumsum(pre_size) - pre_size + len(vocab.blob)
    lines = len(per_line)
    seg_count = lines + len(words)
    first_word = np.cumsum(per_line) - per_line
    is_prefix = np.zeros(seg_count, dtype=bool)
    is_prefix[first_word + np.arange(lines)] = True
    seg_off = np.empty(seg_count, dtype=np.int64)
    seg_size = np.empty(seg_count, dtype=np.int64)
    seg_off[is_prefix], seg_size[is_prefix] = pre_off, pre_size
    seg_off[~is_prefix], seg_size[~is_prefix] = vocab.offset[words], vocab.size[words]
    out_start = np.cumsum(seg_size) - seg_size
    total = int(seg_size.sum())
    src = np.repeat(seg_off - out_start, seg_size) + np.arange(total, dtype=np.int64)
    out = np.concatenate([vocab.blob, np.frombuffer(pre, dtype=np.uint8)])[src]
    line_end = np.cumsum(np.bincount(np.cumsum(is_prefix) - 1, weights=seg_size).astype(np.int64)) - 1
    out[line_end] = ord("\n")  # each line's last word ends in a space: make it the newline
    return out.tobytes()


@dataclass
class QueryPlan:
    """Who asks what: each query's target passage, word count and how many words come from it."""

    target: np.ndarray  # int64 passage index, distinct
    length: np.ndarray  # int64 words
    on: np.ndarray  # int64 words from the target (the rest drawn from the whole vocabulary)
    words: np.ndarray  # int32 (queries, Q_MAX), -1 past the length; filled as passages are drawn


def plan_queries(rng: np.random.Generator, c: Counts) -> QueryPlan:
    nq = c.train + c.dev
    if nq > c.passages:
        raise ValueError(f"{nq} queries need as many distinct target passages, only {c.passages}")
    target = rng.choice(c.passages, size=nq, replace=False).astype(np.int64)
    length = Q_MIN + rng.binomial(Q_MAX - Q_MIN, Q_P, size=nq)
    on = np.maximum(length - rng.binomial(length, OFF_P), MIN_ON)
    return QueryPlan(target, length, on, np.full((nq, Q_MAX), -1, dtype=np.int32))


def passage_lengths(rng: np.random.Generator, n: int) -> np.ndarray:
    raw = rng.lognormal(LEN_MU, LEN_SIGMA, size=n)
    return np.clip(np.rint(raw), LEN_MIN, LEN_MAX).astype(np.int64)


def take_query_words(
    rng: np.random.Generator,
    vocab: Vocabulary,
    plan: QueryPlan,
    queries: np.ndarray,
    words: np.ndarray,
    start: np.ndarray,
    length: np.ndarray,
) -> None:
    """For each query (its target's tokens at ``words[start : start + length]``), its on-passage
    words: a weighted draw without replacement over the target's positions (Gumbel top-k, keys
    log weight + Gumbel noise), vectorised over the queries of one chunk."""
    if len(queries) == 0:
        return
    on = np.minimum(plan.on[queries], length)
    seg = np.repeat(np.arange(len(queries)), length)
    seg_first = np.cumsum(length) - length
    within = np.arange(len(seg)) - seg_first[seg]
    tok = words[start[seg] + within]
    keys = vocab.query_weight[tok] + rng.gumbel(size=len(tok))
    order = np.lexsort((-keys, seg))
    rank = np.arange(len(order)) - seg_first[seg[order]]
    keep = order[rank < on[seg[order]]]
    plan.words[queries[seg[keep]], rank[rank < on[seg[order]]]] = tok[keep]
    plan.on[queries] = on


def write_collection(out: Path, c: Counts, vocab: Vocabulary, plan: QueryPlan, seed: int, log) -> None:
    by_target = np.argsort(plan.target, kind="stable")
    sorted_target = plan.target[by_target]
    tmp = out / "collection.tsv.tmp"
    t0 = time.perf_counter()
    with open(tmp, "wb") as f:
        for i, lo in enumerate(range(0, c.passages, CHUNK)):
            hi = min(lo + CHUNK, c.passages)
            rng = np.random.default_rng([seed, 1, i])
            length = passage_lengths(rng, hi - lo)
            words = draw_words(rng, vocab, int(length.sum()))
            f.write(render(vocab, words, length, [f"{p}\t" for p in range(lo, hi)]))
            a, b = np.searchsorted(sorted_target, [lo, hi])
            q = by_target[a:b]
            first = np.cumsum(length) - length
            local = plan.target[q] - lo
            take_query_words(rng, vocab, plan, q, words, first[local], length[local])
            if log and (i % 64 == 63 or hi == c.passages):
                rate = hi / (time.perf_counter() - t0)
                log(f"  passages {hi:,}/{c.passages:,} ({rate:,.0f}/s)")
    os.replace(tmp, out / "collection.tsv")


def finish_queries(rng: np.random.Generator, vocab: Vocabulary, plan: QueryPlan) -> None:
    """Fill the off-passage words and shuffle each query's words."""
    nq = len(plan.target)
    slot = np.arange(Q_MAX)[None, :]
    off = (slot >= plan.on[:, None]) & (slot < plan.length[:, None])
    plan.words[off] = draw_words(rng, vocab, int(off.sum()))
    keys = rng.random((nq, Q_MAX))
    keys[plan.words < 0] = 2.0  # padding sorts last
    plan.words[:] = np.take_along_axis(plan.words, np.argsort(keys, axis=1), axis=1)


def write_queries(out: Path, c: Counts, vocab: Vocabulary, plan: QueryPlan) -> None:
    for name, qrels, lo, hi in (
        ("queries.train.tsv", "qrels.train.tsv", 0, c.train),
        ("queries.dev.small.tsv", "qrels.dev.small.tsv", c.train, c.train + c.dev),
    ):
        rows = plan.words[lo:hi]
        qids = range(lo, hi)
        text = render(vocab, rows[rows >= 0], plan.length[lo:hi], [f"{q}\t" for q in qids])
        judged = "".join(f"{q}\t0\t{p}\t1\n" for q, p in zip(qids, plan.target[lo:hi].tolist(), strict=True))
        for fname, data in ((name, text), (qrels, judged.encode("ascii"))):
            (out / f"{fname}.tmp").write_bytes(data)
            os.replace(out / f"{fname}.tmp", out / fname)


def generate(
    out: str | Path,
    scale: float,
    seed: int = 0,
    source: Path = DEFAULT_SOURCE,
    log=None,
    sizes: Counts | None = None,
) -> Path:
    """Write the synthetic collection into ``out`` (created if needed); returns ``out``. Query ids
    are ``0 .. train-1`` (train) then ``train .. train+dev-1`` (dev); passage ids ``0 .. n-1``.
    ``sizes`` overrides the row counts of ``scale`` (a benchmark's own shape, e.g. 150k passages
    and 20k queries)."""
    c = sizes or counts(scale)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "synth.json").unlink(missing_ok=True)  # a folder without it is incomplete
    vocab = vocabulary(source)
    plan = plan_queries(np.random.default_rng([seed, 0]), c)
    write_collection(out, c, vocab, plan, seed, log)
    finish_queries(np.random.default_rng([seed, 2]), vocab, plan)
    write_queries(out, c, vocab, plan)
    meta = {"version": VERSION, "scale": scale, "seed": seed, **asdict(c)}
    (out / "synth.json").write_text(json.dumps(meta, indent=1) + "\n")
    return out


def ensure(
    out: str | Path,
    scale: float,
    seed: int = 0,
    source: Path = DEFAULT_SOURCE,
    log=None,
    sizes: Counts | None = None,
) -> Path:
    """``generate`` unless ``out`` already holds this scale (or sizes), seed and generator version."""
    out = Path(out)
    try:
        meta = json.loads((out / "synth.json").read_text())
    except (OSError, ValueError):
        meta = None
    want = {"version": VERSION, "scale": scale, "seed": seed, **asdict(sizes or counts(scale))}
    if meta == want and all((out / f).is_file() for f in FILES):
        return out
    return generate(out, scale, seed, source, log, sizes)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, required=True, help="fraction of MS MARCO's size (0.001-1)")
    ap.add_argument("--out", type=Path, required=True, help="folder to write")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="BEIR corpus giving the words")
    args = ap.parse_args(argv)
    try:
        c = counts(args.scale)
    except ValueError as e:
        ap.error(str(e))
    if not args.source.exists():
        sys.exit(f"msmarco_synth: {args.source} not found (the words come from SciFact's corpus)")
    t0 = time.perf_counter()
    print(f"synthetic MS MARCO x{args.scale}: {c.passages:,} passages, {c.train:,} train, {c.dev:,} dev")
    generate(args.out, args.scale, args.seed, args.source, log=print)
    print(f"wrote {args.out} in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
