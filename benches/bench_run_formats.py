"""Which columnar format holds runs: Arrow IPC or Parquet, measured side by side in one process.

A run shaped like MS MARCO's training run (502,939 queries x 200 hits = 100M rows) at reduced
scale: ``--queries`` x ``--depth`` rows of (qid utf8, docid utf8, score float64, rank int32), MS
MARCO-like integer ids written as text, BM25-like float64 scores. Each candidate writes the run in
query chunks of ``--chunk`` queries (one record batch / row group each), then reads it back in
chunks (every column materialised: scores and ranks as numpy, ids as Arrow arrays), then reads
the slice of 100 random queries (what a merge of passage shards or a fusion does). Prints write
and read seconds, the file's size and bytes per row, with TREC text (today's ``write_run``) as the
baseline when ``--trec`` is given.

    nice python benches/bench_run_formats.py --queries 50000 --depth 200 --trec
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

SCHEMA = pa.schema([("qid", pa.utf8()), ("docid", pa.utf8()), ("score", pa.float64()), ("rank", pa.int32())])


# (name, file suffix, write, read, slice rows or None)
Candidate = tuple[
    str, str, Callable[[Path], None], Callable[[Path], int], Callable[[Path, np.ndarray], None] | None
]


def make_chunks(n_queries: int, depth: int, chunk: int, seed: int = 0) -> list[pa.RecordBatch]:
    rng = np.random.default_rng(seed)
    out = []
    for a in range(0, n_queries, chunk):
        nq = min(chunk, n_queries - a)
        qids = np.repeat(np.arange(a, a + nq) * 7 + 1_000_000, depth).astype(str)
        # distinct passages per query: a random start and a fixed stride through the collection
        start = rng.integers(0, 8_841_823, size=(nq, 1))
        docs = ((start + np.arange(depth) * 40_009) % 8_841_823).ravel().astype(str)
        scores = np.sort(rng.gamma(4.0, 4.0, size=(nq, depth)), axis=1)[:, ::-1].ravel()
        ranks = np.tile(np.arange(1, depth + 1, dtype=np.int32), nq)
        out.append(
            pa.record_batch([pa.array(qids), pa.array(docs), pa.array(scores), pa.array(ranks)], SCHEMA)
        )
    return out


def touch(b) -> int:
    """Read every byte of a chunk (a memory-mapped file is otherwise only mapped, not read)."""
    import pyarrow.compute as pc

    float(b.column("score").to_numpy().sum())
    int(b.column("rank").to_numpy().sum())
    pc.max(b.column("docid")), pc.max(b.column("qid"))
    return b.num_rows


def write_ipc(path: Path, batches: list[pa.RecordBatch], compression: str | None) -> None:
    opts = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, SCHEMA, options=opts) as w:
        for b in batches:
            w.write_batch(b)


def read_ipc(path: Path) -> int:
    n = 0
    with pa.memory_map(str(path)) as src:
        r = pa.ipc.open_file(src)
        for i in range(r.num_record_batches):
            n += touch(r.get_batch(i))
    return n


def slice_ipc(path: Path, picks: np.ndarray) -> None:
    with pa.memory_map(str(path)) as src:
        r = pa.ipc.open_file(src)
        for i in picks:
            r.get_batch(int(i)).slice(0, 10).column("score").to_numpy()


def write_parquet(path: Path, batches: list[pa.RecordBatch], compression: str) -> None:
    import pyarrow.parquet as pq

    with pq.ParquetWriter(str(path), SCHEMA, compression=compression) as w:
        for b in batches:
            w.write_batch(b, row_group_size=len(b))


def read_parquet(path: Path) -> int:
    import pyarrow.parquet as pq

    n = 0
    f = pq.ParquetFile(str(path))
    for i in range(f.num_row_groups):
        n += touch(f.read_row_group(i))
    return n


def slice_parquet(path: Path, picks: np.ndarray) -> None:
    import pyarrow.parquet as pq

    f = pq.ParquetFile(str(path))
    for i in picks:
        f.read_row_group(int(i)).slice(0, 10).column("score").to_numpy()


def write_trec(path: Path, batches: list[pa.RecordBatch]) -> None:
    from dense_pt.runs import format_score

    with open(path, "w", encoding="utf-8") as f:
        for b in batches:
            q, d, s, r = (b.column(i).to_pylist() for i in range(4))
            f.writelines(
                f"{qq} Q0 {dd} {rr} {format_score(ss)} dense-pt\n"
                for qq, dd, ss, rr in zip(q, d, s, r, strict=True)
            )


def read_trec(path: Path) -> int:
    from dense_pt.runs import read_run

    return sum(c.num_rows for c in read_run(path))


def timed(fn, *a) -> float:
    t = time.perf_counter()
    fn(*a)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=50_000)
    ap.add_argument("--depth", type=int, default=200)
    ap.add_argument("--chunk", type=int, default=1000, help="queries per record batch / row group")
    ap.add_argument("--trec", action="store_true", help="also time today's TREC text writer and reader")
    ap.add_argument("--work", type=Path, default=None)
    args = ap.parse_args()
    batches = make_chunks(args.queries, args.depth, args.chunk)
    rows = args.queries * args.depth
    work = Path(tempfile.mkdtemp(prefix="runfmt-", dir=args.work))
    picks = np.random.default_rng(1).integers(0, len(batches), size=100)
    cands: list[Candidate] = [
        ("arrow ipc", ".arrow", lambda p: write_ipc(p, batches, None), read_ipc, slice_ipc),
        ("arrow ipc lz4", ".arrow", lambda p: write_ipc(p, batches, "lz4"), read_ipc, slice_ipc),
        ("arrow ipc zstd", ".arrow", lambda p: write_ipc(p, batches, "zstd"), read_ipc, slice_ipc),
        (
            "parquet snappy",
            ".parquet",
            lambda p: write_parquet(p, batches, "snappy"),
            read_parquet,
            slice_parquet,
        ),
        (
            "parquet zstd",
            ".parquet",
            lambda p: write_parquet(p, batches, "zstd"),
            read_parquet,
            slice_parquet,
        ),
    ]
    if args.trec:
        cands.append(("trec text (today)", ".trec", lambda p: write_trec(p, batches), read_trec, None))
    print(
        f"{rows:,} rows ({args.queries:,} queries x {args.depth}), {len(batches)} chunks of {args.chunk} queries"
    )
    print(f"{'format':<20} {'write s':>8} {'read s':>8} {'100 slices s':>13} {'MB':>8} {'B/row':>6}")
    for i, (name, suffix, write, read, sl) in enumerate(cands):
        path = work / f"run{i}{suffix}"
        w = timed(write, path)
        os.sync()
        r = timed(read, path)
        s = timed(sl, path, picks) if sl else float("nan")
        size = path.stat().st_size
        print(f"{name:<20} {w:>8.2f} {r:>8.2f} {s:>13.3f} {size / 1e6:>8.1f} {size / rows:>6.1f}", flush=True)
        path.unlink()
    work.rmdir()


if __name__ == "__main__":
    main()
