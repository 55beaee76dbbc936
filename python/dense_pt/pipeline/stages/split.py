"""split: the judged queries divided into training and dev queries (a seeded fraction, or a fixed
dev qrels file), with the query files the retrieval stages search for."""

from __future__ import annotations

from pathlib import Path

from dense_pt.errors import DensePtError
from dense_pt.pipeline import common as C
from dense_pt.pipeline.runner import Stage


def dev_split(qids: list[str], fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """A fixed, seeded split of the judged query ids: (train, dev)."""
    import numpy as np

    order = sorted(qids)
    perm = np.random.default_rng(seed).permutation(len(order))
    n_dev = max(1, round(fraction * len(order)))
    dev = sorted(order[i] for i in perm[:n_dev])
    dev_set = set(dev)
    return [q for q in order if q not in dev_set], dev


def write_qrels(path: Path, qrels: dict[str, dict[str, int]], qids: list[str]) -> None:
    from dense_pt.fsutil import atomic_file

    with atomic_file(path, "w", encoding="utf-8") as f:
        for q in qids:
            for d, r in qrels[q].items():
                f.write(f"{q} 0 {d} {r}\n")


def _dev_path(ctx: C.Ctx) -> Path | None:
    return ctx.cfg.data.dev_qrels


def inputs(ctx: C.Ctx) -> dict:
    out = {"qrels": ctx.file_hash(ctx.cfg.data.qrels)}
    dev = _dev_path(ctx)
    if dev is not None:
        out["dev_qrels"] = ctx.file_hash(dev)
    return out


def params(ctx: C.Ctx) -> dict:
    data = ctx.cfg.data
    if _dev_path(ctx) is not None:
        return {"dev": "fixed"}
    out: dict = {"dev_fraction": data.dev_fraction}
    if data.split_seed is not None:  # a study fixes the split across seeds
        out["split_seed"] = data.split_seed
    return out


def run(ctx: C.Ctx, folder: Path) -> dict:
    from dense_pt.data import load_qrels

    data, qrels_path, dev_path = ctx.cfg.data, ctx.cfg.data.qrels, _dev_path(ctx)
    qrels = load_qrels(qrels_path)
    if dev_path is None:
        seed = ctx.seed if data.split_seed is None else data.split_seed
        train, dev = dev_split(list(qrels), data.dev_fraction, seed)
    else:  # a fixed dev split (e.g. BEIR's qrels/dev.tsv): train on all of ``qrels``
        dev_judged = load_qrels(dev_path)
        overlap = set(qrels) & set(dev_judged)
        if overlap:
            raise DensePtError(f"{dev_path}: {len(overlap)} dev queries are also in {qrels_path}")
        train, dev = sorted(qrels), sorted(dev_judged)
        qrels = {**qrels, **dev_judged}
    write_qrels(folder / "train.qrels", qrels, train)
    write_qrels(folder / "dev.qrels", qrels, dev)
    queries = ctx.cfg.data.queries
    C.queries_subset(queries, folder / "dev_queries.jsonl", set(dev))
    C.queries_subset(queries, folder / "judged_queries.jsonl", set(qrels))
    return {"train_queries": len(train), "dev_queries": len(dev)}


STAGE = Stage(
    name="split",
    doc="divide the judged queries into training and dev queries",
    reads=(),
    config=("data",),
    outputs=("train.qrels", "dev.qrels", "dev_queries.jsonl", "judged_queries.jsonl"),
    inputs=inputs,
    params=params,
    run=run,
)
