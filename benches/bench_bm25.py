"""BM25 at MS MARCO's scale: our engine (rust/core/src/bm25, `dense-pt bm25`) against plain bm25s,
side by side in one run, each engine in a subprocess of its own (so its peak RSS is its own).

    python benches/bench_bm25.py compare [--passages 150000 --queries 20000 --k 200]
    python benches/bench_bm25.py scale --scale 0.1 [--k 200 --threads 2]
    python benches/bench_bm25.py against /path/to/other/checkout/python [--passages 150000 ...]

`compare`: the synthetic MS MARCO (benches/msmarco_synth.py) cut to the issue's shape (150k
passages, 20k queries of one target passage each, depth 200), every engine from the corpus file to
a written TREC run: ours (index build, then search on 1 and on 2 threads, reusing the index) and
bm25s (numpy backend, Lucene, k1 0.9, b 0.4, English stopwords, PyStemmer: what `dense-pt bm25`
ran before, on one thread as it ran), then how many queries' top-k agree.
`against`: the same shape, this checkout's engine against another checkout's (its `python` folder,
with its built `_native`: e.g. main's, before a change of the index format), side by side: index
size, build and search time, and whether the two runs are the same bytes (the scores bit for bit).
`scale`: our engine alone at a scale of the synthetic MS MARCO (0.1: 884,182 passages and
50,294 training queries): index build time, peak RSS and size, then search throughput and peak RSS.

Times are wall seconds; queries/s counts the search phase (bm25s: its tokenization of the queries
and retrieve; ours: analysis, search and run writing); peak RSS is each child's VmHWM.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCHES = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHES))


def peak_rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


# ---- children: one engine each ----------------------------------------------------------------
def child_ours(a: argparse.Namespace) -> dict:
    from dense_pt.retrieval.bm25 import bm25, bm25_index

    t0 = time.perf_counter()
    if a.phase == "build":
        idx = bm25_index(a.corpus, a.index)
        size = sum(f.stat().st_size for f in Path(a.index).iterdir())
        return {"build_s": time.perf_counter() - t0, "index_bytes": size, "passages": idx.num_docs}
    try:
        from dense_pt.config.retrieval import BM25Command
    except ImportError:  # `against` a checkout from before the settings went whole (issue 32)
        bm25(a.corpus, a.queries, a.out, index=a.index, k=a.k, threads=a.threads)  # type: ignore[call-arg]
    else:
        bm25(a.corpus, a.queries, a.out, BM25Command(k=a.k, threads=a.threads), index=a.index)
    return {"search_s": time.perf_counter() - t0}


def child_bm25s(a: argparse.Namespace) -> dict:
    import bm25s
    import Stemmer

    from dense_pt.data import corpus_texts, load_queries
    from dense_pt.runs import write_run

    stem = Stemmer.Stemmer("english")
    t0 = time.perf_counter()
    docs = list(corpus_texts(a.corpus))
    pids = [p for p, _ in docs]
    tok = bm25s.tokenize([t for _, t in docs], stopwords="en", stemmer=stem, show_progress=False)
    del docs
    r = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
    r.index(tok, show_progress=False)
    del tok
    t1 = time.perf_counter()
    queries = load_queries(a.queries)
    qids = list(queries)
    qtok = bm25s.tokenize([queries[q] for q in qids], stopwords="en", stemmer=stem, show_progress=False)
    found, scores = r.retrieve(qtok, k=a.k, show_progress=False, n_threads=a.threads)
    run = {q: {pids[int(d)]: float(s) for d, s in zip(found[i], scores[i], strict=True) if s > 0}
           for i, q in enumerate(qids)}  # fmt: skip
    write_run(a.out, run, tag="bm25s")
    return {"build_s": t1 - t0, "search_s": time.perf_counter() - t1}


def run_child(engine: str, python: Path | None = None, **kw) -> dict:
    """One engine in a child process (``python``: the package folder it imports dense_pt from)."""
    argv = [sys.executable, __file__, "child", "--engine", engine]
    for key, value in kw.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RAYON_NUM_THREADS": str(kw.get("threads", 1))}
    if python is not None:
        env["PYTHONPATH"] = str(python)
    t0 = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{engine} failed:\n{out.stderr[-3000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["wall_s"] = time.perf_counter() - t0
    return res


# ---- the comparison ---------------------------------------------------------------------------
def agreement(ours: Path, theirs: Path, k: int) -> tuple[int, int]:
    """(queries whose top-k passage sets are equal apart from ties at the k-th score, queries)."""
    from dense_pt.runs import load_run

    a, b = load_run(ours), load_run(theirs)
    same = 0
    for q in set(a) | set(b):
        x, y = a.get(q, {}), b.get(q, {})
        cut = min(y.values()) * (1 + 1e-5) if len(y) == k else float("-inf")
        same += {p for p, s in x.items() if s > cut} == {p for p, s in y.items() if s > cut} and len(
            x
        ) == len(y)
    return same, len(set(a) | set(b))


def compare(a: argparse.Namespace) -> None:
    import msmarco_synth as synth

    sizes = synth.Counts(a.passages, a.queries, synth.MIN_DEV_QUERIES)
    data = synth.ensure(a.data / f"synth-{a.passages}-{a.queries}", 1.0, seed=a.seed, sizes=sizes, log=None)
    corpus, queries = data / "collection.tsv", data / "queries.train.tsv"
    for f in (corpus, queries):
        f.read_bytes()  # warm the page cache for every engine alike
    work = Path(tempfile.mkdtemp(prefix="bench-bm25-", dir=a.data))
    common = {"corpus": corpus, "queries": queries, "k": a.k}
    rows = []
    build = run_child("ours", phase="build", index=work / "index", **common)
    for threads in (1, 2):
        res = run_child("ours", phase="search", index=work / "index", out=work / f"ours{threads}.trec",
                        threads=threads, **common)  # fmt: skip
        rows.append((f"ours, {threads} thread{'s' * (threads > 1)}", build, res))
    res = run_child("bm25s", out=work / "bm25s1.trec", threads=1, **common)
    rows.append(("bm25s, 1 thread", res, res))
    same, n = agreement(work / "ours1.trec", work / "bm25s1.trec", a.k)
    print(
        f"\n{a.passages:,} passages x {a.queries:,} queries, depth {a.k} (synthetic MS MARCO, seed {a.seed})"
    )
    print(f"{'engine':<16} {'index s':>8} {'search s':>9} {'total s':>8} {'queries/s':>10} {'peak RSS':>9}")
    for name, b, s in rows:
        total = b["build_s"] + s["search_s"]
        rss = max(b["peak_rss"], s["peak_rss"]) / 2**20
        print(f"{name:<16} {b['build_s']:8.1f} {s['search_s']:9.1f} {total:8.1f} "
              f"{a.queries / s['search_s']:10,.0f} {rss:7,.0f} MB")  # fmt: skip
    base = rows[2][1]["build_s"] + rows[2][2]["search_s"]
    ours1 = rows[0][1]["build_s"] + rows[0][2]["search_s"]
    print(
        f"end to end, 1 thread each: ours {base / ours1:.1f}x faster than bm25s; search alone "
        f"{rows[2][2]['search_s'] / rows[0][2]['search_s']:.1f}x; index {build['index_bytes'] / 2**20:,.0f} MB"
    )
    print(f"top-{a.k} equal to bm25s's apart from ties at the cutoff: {same:,} of {n:,} queries")


def against(a: argparse.Namespace) -> None:
    import msmarco_synth as synth

    sizes = synth.Counts(a.passages, a.queries, synth.MIN_DEV_QUERIES)
    data = synth.ensure(a.data / f"synth-{a.passages}-{a.queries}", 1.0, seed=a.seed, sizes=sizes, log=None)
    common = {"corpus": data / "collection.tsv", "queries": data / "queries.train.tsv", "k": a.k}
    work = Path(tempfile.mkdtemp(prefix="bench-bm25-", dir=a.data))
    here = BENCHES.parent / "python"
    print(
        f"\n{a.passages:,} passages x {a.queries:,} queries, depth {a.k} (synthetic MS MARCO, seed {a.seed})"
    )
    print(
        f"{'engine':<10} {'index MB':>9} {'bytes/posting':>14} {'build s':>8} {'search s 1t':>12} {'search s 2t':>12}"
    )
    runs = {}
    for name, python in (("other", a.other), ("this", here)):
        index = work / f"index-{name}"
        build = run_child("ours", python, phase="build", index=index, **common)
        postings = json.loads((index / "manifest.json").read_text())["stats"]["num_postings"]
        times = []
        for threads in (1, 2):
            out = work / f"{name}{threads}.trec"
            res = run_child("ours", python, phase="search", index=index, out=out, threads=threads, **common)
            times.append(res["search_s"])
            runs[name, threads] = out.read_bytes()
        print(f"{name:<10} {build['index_bytes'] / 2**20:9.1f} {build['index_bytes'] / postings:14.2f} "
              f"{build['build_s']:8.1f} {times[0]:12.1f} {times[1]:12.1f}")  # fmt: skip
    same = all(runs["this", t] == runs["other", t] for t in (1, 2))
    print(f"runs the same bytes (every score bit for bit): {same}; other = {a.other}")


def scale(a: argparse.Namespace) -> None:
    import msmarco_synth as synth

    data = synth.ensure(a.data / f"synth-{a.scale}", a.scale, seed=a.seed, log=print)
    corpus, queries = data / "collection.tsv", data / "queries.train.tsv"
    work = Path(tempfile.mkdtemp(prefix="bench-bm25-", dir=a.data))
    c = synth.counts(a.scale)
    common = {"corpus": corpus, "queries": queries, "k": a.k, "index": work / "index"}
    build = run_child("ours", phase="build", **common)
    search = run_child("ours", phase="search", out=work / "run.trec", threads=a.threads, **common)
    print(f"\nscale {a.scale}: {c.passages:,} passages, {c.train:,} training queries, depth {a.k}")
    print(f"index build: {build['build_s']:.1f} s, peak RSS {build['peak_rss'] / 2**20:,.0f} MB, "
          f"index {build['index_bytes'] / 2**20:,.0f} MB")  # fmt: skip
    print(f"search on {a.threads} threads: {search['search_s']:.1f} s, {c.train / search['search_s']:,.0f} "
          f"queries/s, peak RSS {search['peak_rss'] / 2**20:,.0f} MB (run written as TREC)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--passages", type=int, default=150_000)
    c.add_argument("--queries", type=int, default=20_000)
    o = sub.add_parser("against")
    o.add_argument("other", type=Path, help="another checkout's python folder (with its _native built)")
    o.add_argument("--passages", type=int, default=150_000)
    o.add_argument("--queries", type=int, default=20_000)
    s = sub.add_parser("scale")
    s.add_argument("--scale", type=float, default=0.1)
    s.add_argument("--threads", type=int, default=2)
    for p in (c, o, s):
        p.add_argument("--k", type=int, default=200)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "dense-pt-bench-bm25")
    ch = sub.add_parser("child")
    ch.add_argument("--engine", choices=("ours", "bm25s"))
    ch.add_argument("--phase", choices=("build", "search"), default="search")
    for name in ("corpus", "queries", "out", "index"):
        ch.add_argument(f"--{name}", type=Path)
    ch.add_argument("--k", type=int)
    ch.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    if a.cmd == "child":
        res = (child_ours if a.engine == "ours" else child_bm25s)(a)
        print(json.dumps({**res, "peak_rss": peak_rss()}))
        return
    a.data.mkdir(parents=True, exist_ok=True)
    {"compare": compare, "against": against, "scale": scale}[a.cmd](a)


if __name__ == "__main__":
    main()
