"""ANCE negatives (Xiong et al., ICLR 2021) in their synchronous form: every ``every`` training steps
the model being trained re-encodes the corpus, searches the training queries and mines fresh hard
negatives with the stage's mining settings; training then continues on them. ANCE itself keeps
training while separate GPUs rebuild the index from the latest checkpoint and swaps the negatives
in when they are ready; here the training waits for the refresh, so the negatives a step sees
depend only on the step, and a run is reproducible and resumable.

A refresh at step ``s`` is the command-line chain run on the weights of step ``s`` (the checkpoint
saved there), in ``OUT/refresh/step-<s>/``:

    model/            the weights at step s as a retriever folder (its lengths and pooling)
    queries.jsonl     the training queries
    emb_passages/     ``dense-pt encode`` of the corpus store (shards split over torchrun's processes)
    emb_queries/      ``dense-pt encode`` of the queries
    negatives.dpneg   ``dense-pt search -k depth+P`` then ``dense-pt negatives mine`` with the stage's
                      settings and the training seed (P: the most positives a training query has)
    refresh.json      written last: the refresh is complete

Once complete only ``negatives.dpneg`` and ``refresh.json`` stay (the rest is rebuilt from
checkpoint ``s`` by doing the refresh again), and the folders of refreshes before the previous one
are removed. A run killed at any point resumes from its latest checkpoint: a refresh that checkpoint
already passed is read back, one at the checkpoint's own step is finished (or redone) from its
weights, so the resumed run trains on the same negatives as an uninterrupted one.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dense_pt.config.finetune import RefreshSettings
from dense_pt.config.retrieval import MineSettings
from dense_pt.errors import DensePtError
from dense_pt.fsutil import atomic_file, write_json_atomic

DONE = "refresh.json"
EXPORTED = "exported.json"  # the model folder of a refresh is complete


def search_depth(mine: MineSettings, qrels: Mapping[str, Mapping[str, int]]) -> int:
    """Hits searched per query: the mining depth plus the most positives a query has, so the pool
    holds ``depth`` non-positives even where every positive ranks first."""
    return mine.depth + max((sum(r > 0 for r in ds.values()) for ds in qrels.values()), default=0)


class NegativesRefresh:
    """The trainer's callback (``__call__``, after each step) and start hook (``on_start``, after a
    resume) that refresh ``sampler``'s negatives. ``export(folder)`` writes the model being trained as
    a retriever folder; ``store`` is the corpus store (its path and ids); ``queries`` and ``qrels`` are
    the training queries' texts and judgements (the sampler's queries)."""

    def __init__(
        self, out: Path, every: int, settings: RefreshSettings, seed: int, store: Any, queries: Mapping[str, str],
        qrels: Mapping[str, Mapping[str, int]], sampler: Any, export: Callable[[Path], None], progress: bool = False,
    ):  # fmt: skip
        self.root, self.every, self.mine, self.seed = Path(out) / "refresh", every, settings.mine, seed
        self.store, self.queries, self.qrels = store, queries, qrels
        self.sampler, self.export = sampler, export
        self.batch_size, self.shard_size, self.progress = settings.batch_size, settings.shard_size, progress
        self.k = search_depth(settings.mine, qrels)
        self.history: list[dict[str, Any]] = []
        self._index: dict[str, int] | None = None

    def folder(self, step: int) -> Path:
        return self.root / f"step-{step:08d}"

    def record(self) -> dict[str, Any]:
        """The settings and the refreshes this process applied, for the stage's manifest."""
        return {"every": self.every, "mine": self.mine.model_dump(), "k": self.k, "seed": self.seed,
                "synchronous": True, "refreshes": self.history}  # fmt: skip

    # --- trainer hooks --------------------------------------------------------------------------

    def on_start(self, trainer: Any) -> None:
        """After the trainer resumed at step c: the negatives of the latest refresh at or before c."""
        last = trainer.step // self.every * self.every
        if last == 0:
            return
        if not (self.folder(last) / DONE).exists():
            if last != trainer.step:  # the run went past it: its weights are gone with older checkpoints
                raise DensePtError(
                    f"{self.folder(last)}: the refresh at step {last} is missing, but the run continued "
                    f"from it (checkpoint {trainer.step}); start the stage again in a new folder"
                )
            self._refresh(trainer, last)
        self._apply(trainer, last)

    def __call__(self, trainer: Any, step: int, record: Any) -> None:
        if step % self.every or step >= trainer.config.max_steps:
            return
        if step % trainer.config.save_every:
            trainer.save()  # the refresh reads these weights: a run killed from now on resumes here
        self._refresh(trainer, step)
        self._apply(trainer, step)
        trainer.restart_batches()  # the batches collated ahead hold the old negatives

    # --- one refresh ----------------------------------------------------------------------------

    def _refresh(self, trainer: Any, step: int) -> None:
        """encode + search + negatives mine on the weights at ``step``, every process encoding its
        share of the shards; leaves ``negatives.dpneg`` and ``refresh.json`` in the step's folder."""
        import torch

        from dense_pt.training.checkpoint import capture_rng, restore_rng

        dist, folder, t0 = trainer.dist, self.folder(step), time.perf_counter()
        rng = capture_rng()  # loading models may draw random initialisations: keep training's streams
        with torch.no_grad():
            if dist.is_main:
                self._export(folder)
            dist.barrier()
            for source, emb in ((self.store.path, "emb_passages"), (folder / "queries.jsonl", "emb_queries")):
                self._encode(folder, source, folder / emb, str(trainer.device), dist.rank, dist.world_size)
            dist.barrier()
            if dist.is_main:
                self._mine(folder, step, dist.world_size, time.perf_counter() - t0)
            dist.barrier()
        restore_rng(rng)

    def _export(self, folder: Path) -> None:
        """The model folder and the queries file, unless a killed refresh already wrote them."""
        if (folder / "model" / EXPORTED).exists():
            return
        if folder.exists():  # an export cut short: this refresh starts over
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        self.export(folder / "model")
        with atomic_file(folder / "queries.jsonl", "w", encoding="utf-8") as f:
            for q in self.sampler.qids:
                f.write(json.dumps({"_id": q, "text": self.queries[q]}) + "\n")
        write_json_atomic(folder / "model" / EXPORTED, {"complete": True})

    def _encode(self, folder: Path, source: Path, out: Path, device: str, rank: int, world: int) -> None:
        """One process's share of the shards; under torchrun the shards are cut so that every
        process gets some (``shard_size`` rows at most)."""
        from dense_pt.config.retrieval import EncodeSettings
        from dense_pt.retrieval.encode import MANIFEST, encode

        manifest = out / MANIFEST
        if manifest.exists() and json.loads(manifest.read_text()).get("complete"):
            return  # finished before an interruption
        rows = len(self.store) if source == self.store.path else len(self.sampler.qids)
        shard = self.shard_size if world == 1 else max(1, min(self.shard_size, -(-rows // world)))
        s = EncodeSettings(batch_size=self.batch_size, shard_size=shard, device=device)
        encode(folder / "model", source, out, s, progress=self.progress and rank == 0, part=(rank, world))

    def _mine(self, folder: Path, step: int, world: int, encode_s: float) -> None:
        from dense_pt.config.retrieval import SearchSettings
        from dense_pt.retrieval.encode import merge_parts
        from dense_pt.retrieval.negatives import mine, write_negatives
        from dense_pt.retrieval.search import PairScorer, search

        emb_q, emb_p = folder / "emb_queries", folder / "emb_passages"
        if world > 1:
            for emb in (emb_q, emb_p):
                if not (emb / "manifest.json").exists() or list(emb.glob("manifest.part-*.json")):
                    merge_parts(emb)
        m = self.mine
        run = search(emb_q, emb_p, None, SearchSettings(k=self.k))
        scorer = None
        if m.absolute_margin is not None or m.relative_margin is not None:
            scorer = PairScorer.open(emb_q, emb_p)
        mined = mine(run, self.qrels, m.command(self.seed), scorer=scorer)
        write_negatives(folder / "negatives.dpneg", mined)
        write_json_atomic(folder / DONE, {"step": step, "k": self.k, "seed": self.seed, "mine": m.model_dump(),
                                          "stats": mined.stats, "wall_s": round(encode_s, 3)})  # fmt: skip
        for name in ("model", "emb_passages", "emb_queries", "queries.jsonl"):
            path = folder / name
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
        for old in sorted(self.root.glob("step-*"))[:-2]:  # keep this refresh and the one before
            shutil.rmtree(old)

    def _apply(self, trainer: Any, step: int) -> None:
        """The sampler's negatives := the refresh's (store rows, judged positives left out)."""
        from dense_pt.retrieval.negatives import read_negatives

        folder = self.folder(step)
        table = read_negatives(folder / "negatives.dpneg")
        if self._index is None:
            self._index = {pid: i for i, pid in enumerate(self.store.ids.to_pylist())}
        index, s = self._index, self.sampler
        rows: list[np.ndarray] = []
        for q in s.qids:
            judged = self.qrels[q]
            rows.append(
                np.asarray([index[d] for d in table.pids(q) if judged.get(d, 0) <= 0], dtype=np.int64)
            )
        s.negatives = rows
        short = sum(len(r) < s.group_size - 1 for r in rows)
        info = json.loads((folder / DONE).read_text())
        self.history.append({"step": step, "stats": info["stats"], "queries_filled": short})


def training_qrels(qrels: Mapping[str, Mapping[str, int]], qids: Sequence[str]) -> dict[str, dict[str, int]]:
    """The judgements of the queries the stage trains on (mining reads these only)."""
    return {q: dict(qrels[q]) for q in qids}
