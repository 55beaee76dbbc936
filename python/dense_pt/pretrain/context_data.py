"""Batches for the two methods that read a passage's *context* (``querygen``, ``contrastive``), and
the spans-then-queries curriculum as one batch source whose context switches at the planned step.

Per stage (``dense_pt.expansion.curriculum.CurriculumStage``) the context of a passage is, as in the LLM
expansion paper's curriculum (coarse-grained first, then the LLM queries):

- ``passage`` (``querygen``): the passage itself, the coarse context of bottlenecked query
  generation: the decoder generates the (clean, cropped) passage the encoder read from h_cls
  alone (decoder input ``[h_cls, x_1 .. x_n, SEP]``);
- ``spans`` (``contrastive``): a random span of the passage (the native collator's
  ``span_input_ids``, one span per passage), contrasted with the passage;
- ``queries``: the passage's LLM queries (``dense_pt.expansion.query_data.QueryTokens``):
  ``querygen`` generates all of them (``[h_cls, q_1, SEP, ..., q_N, SEP]``), ``contrastive``
  contrasts the passage with one of them, chosen from (seed, passage id, epoch). Only passages that
  have queries take part.

:class:`CurriculumSource` treats the whole run as a single "epoch" of ``max_steps * grad_accum``
rounds of micro-batches, so the trainer's data position (round ``k``) fixes the step
(``k // grad_accum``), hence the stage; inside a stage, rows are shuffled per stage epoch exactly as
``IndexedBatchSource`` does. A killed run therefore resumes in the right stage, at the right batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dense_pt.errors import InvalidArgumentError
from dense_pt.expansion.curriculum import CurriculumStage, stage_at
from dense_pt.objectives import METHOD_KEYS, MethodOptions
from dense_pt.training.data import epoch_order

if TYPE_CHECKING:
    from dense_pt.config.pretrain import PretrainSettings

IGNORE = -100
CONTEXT_METHODS = ("querygen", "contrastive")
# The context sources of each method (the paper: the passage for query generation, spans for
# contrastive pre-training; then the LLM queries).
METHOD_SOURCES = {"querygen": ("passage", "queries"), "contrastive": ("spans", "queries")}
# Stage k's collator epochs are numbered from k * EPOCH_STRIDE, so two stages never share masks.
EPOCH_STRIDE = 1_000_000

MakeBatch = Callable[[np.ndarray, int], dict[str, Any]]


def next_token_labels(input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """Causal LM labels: position t predicts the token at t + 1 (-100 at the last real token and pad)."""
    labels = np.full_like(input_ids, IGNORE)
    labels[:, :-1] = np.where(attention_mask[:, 1:].astype(bool), input_ids[:, 1:], IGNORE)
    return labels


class StageBatches:
    """``rows, epoch -> batch`` for one method and one context source."""

    def __init__(
        self,
        store,
        method: str,
        source: str,
        opts: MethodOptions,
        max_length: int,
        seed: int,
        queries=None,  # QueryTokens, needed for source == "queries"
        pad_to_multiple_of: int | None = None,  # the collator's views (the LLM queries are padded alone)
    ):
        from dense_pt.collate import Collator
        from dense_pt.pretrain.data import padding

        if method not in CONTEXT_METHODS:
            raise InvalidArgumentError(
                f"{method} reads no context; context batches are for {CONTEXT_METHODS}"
            )
        if source not in METHOD_SOURCES[method]:
            raise InvalidArgumentError(
                f"{method} has no {source!r} context (its sources: {', '.join(METHOD_SOURCES[method])})"
            )
        if source == "queries" and queries is None:
            raise InvalidArgumentError(f"the {source!r} stage of {method} needs --queries QUERIES_DIR")
        self.method, self.source, self.queries = method, source, queries
        self.max_length, self.seed = max_length, seed
        self.special = dict(store.special_tokens)
        if source == "spans":  # one span per passage
            self.collator = Collator(
                store, "contrastive", opts, max_length=max_length, seed=seed, num_spans=1,
                **padding(pad_to_multiple_of),
            )  # fmt: skip
        else:  # the passage stage reads the clean crop the encoder's masked view was made from
            self.collator = Collator(
                store, "mlm", opts, max_length=max_length, seed=seed, return_original=source == "passage",
                **padding(pad_to_multiple_of),
            )  # fmt: skip
        self.keys = METHOD_KEYS[method]

    def __call__(self, rows: np.ndarray, epoch: int) -> dict[str, Any]:
        batch = self.collator(rows, epoch=epoch)
        cls, sep, pad = self.special["cls"], self.special["sep"], self.special["pad"]
        if self.source == "spans":
            batch["ctx_input_ids"] = batch.pop("span_input_ids").astype(np.int64)
            batch["ctx_attention_mask"] = batch.pop("span_attention_mask").astype(np.int64)
        elif self.source == "passage":  # [CLS] x_1 .. x_n [SEP]: position 0 is the slot h_cls fills
            ids, am = batch.pop("original_ids"), batch["attention_mask"]
            batch["dec_input_ids"], batch["dec_attention_mask"] = ids, am.copy()
            batch["dec_labels"] = next_token_labels(ids, am)
        elif self.method == "contrastive":
            batch.update(self.queries.context_batch(rows, self.seed, epoch, cls, sep, pad, self.max_length))
        else:
            batch.update(self.queries.decoder_batch(rows, sep, pad, self.max_length))
        missing = [k for k in self.keys if k not in batch]
        if missing:
            raise InvalidArgumentError(f"the {self.source} batch lacks {missing} (has {sorted(batch)})")
        return batch


class CurriculumSource:
    """A trainer ``BatchSource`` over consecutive stages, each with its own rows and ``make_batch``."""

    def __init__(
        self,
        stages: Sequence[CurriculumStage],
        stage_rows: Sequence[np.ndarray],
        stage_batches: Sequence[MakeBatch],
        batch_size: int,
        grad_accum: int = 1,
        seed: int = 0,
        num_workers: int = 0,
        prefetch_factor: int = 2,
        pin_memory: bool = False,
    ):
        if not (len(stages) == len(stage_rows) == len(stage_batches)):
            raise InvalidArgumentError("one row set and one batch function per stage")
        if batch_size < 1 or grad_accum < 1:
            raise InvalidArgumentError("batch_size and grad_accum must be >= 1")
        self.stages = list(stages)
        self.stage_rows = [np.asarray(r, dtype=np.int64) for r in stage_rows]
        self.stage_batches = list(stage_batches)
        self.batch_size, self.grad_accum, self.seed = batch_size, grad_accum, seed
        self.num_workers, self.prefetch_factor, self.pin_memory = num_workers, prefetch_factor, pin_memory

    def rounds_per_epoch(self, world_size: int) -> int:
        for stage, rows in zip(self.stages, self.stage_rows, strict=True):
            if len(rows) < self.batch_size * world_size:
                raise InvalidArgumentError(
                    f"the {stage.source} stage has {len(rows)} passages, fewer than one batch "
                    f"({self.batch_size} x {world_size})"
                )
        return self.stages[-1].end * self.grad_accum

    def locate(self, k: int, rank: int, world_size: int) -> tuple[int, np.ndarray, int]:
        """Round ``k`` of the run on ``rank``: (stage index, corpus rows, collator epoch)."""
        stage = stage_at(self.stages, k // self.grad_accum)
        index = self.stages.index(stage)
        rows = self.stage_rows[index]
        j = k - stage.start * self.grad_accum  # rounds into this stage
        per_epoch = len(rows) // (self.batch_size * world_size)
        epoch, g = divmod(j, per_epoch)
        g = g * world_size + rank
        order = epoch_order(len(rows), self.seed + index, epoch)
        picked = rows[order[g * self.batch_size : (g + 1) * self.batch_size]]
        return index, picked, index * EPOCH_STRIDE + epoch

    def batch(self, k: int, rank: int, world_size: int) -> dict[str, Any]:
        index, rows, epoch = self.locate(k, rank, world_size)
        return self.stage_batches[index](rows, epoch)

    def iter_epoch(self, epoch: int, start: int, rank: int, world_size: int) -> Iterator[dict[str, Any]]:
        if epoch > 0:
            raise InvalidArgumentError(
                f"the curriculum covers {self.stages[-1].end} steps; the run asked for more "
                "(max_steps cannot change once a curriculum run started)"
            )
        n = self.rounds_per_epoch(world_size)
        if start >= n:
            return iter(())
        dataset = _Rounds(self, rank, world_size, n)
        if self.num_workers == 0:
            return (dataset[k] for k in range(start, n))
        from dense_pt.training.data import worker_batches

        return worker_batches(self, dataset, start, n)


class _Rounds:
    """Map-style dataset: item ``k`` is this rank's micro-batch of round ``k``."""

    def __init__(self, source: CurriculumSource, rank: int, world_size: int, n: int):
        self.source, self.rank, self.world, self.n = source, rank, world_size, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, k: int) -> dict[str, Any]:
        return self.source.batch(k, self.rank, self.world)


def default_curriculum(method: str, has_queries: bool) -> str:
    """Without ``--curriculum``: the LLM queries when there are some, else (contrastive) spans."""
    if has_queries:
        return "queries:1"
    if method == "querygen":
        raise InvalidArgumentError(
            "querygen generates LLM queries: pass --queries QUERIES_DIR (dense-pt expand), "
            'or --curriculum "passage:1" to generate the passages themselves'
        )
    return "spans:1"


def plan_curriculum(cfg: PretrainSettings) -> list[CurriculumStage]:
    """The stages of a ``PretrainSettings`` of a context method (validated). CurriculumStage schedules: one
    stage follows ``train.schedule``; a curriculum follows the paper (cosine, then constant) unless
    ``stage_schedules`` says otherwise."""
    from dense_pt.expansion.curriculum import parse_curriculum, plan_stages

    spec = cfg.curriculum or default_curriculum(cfg.method, cfg.queries is not None)
    items = parse_curriculum(spec)
    wrong = [src for src, _ in items if src not in METHOD_SOURCES[cfg.method]]
    if wrong:
        hint = {"spans": "spans are contrastive pre-training's", "passage": "the passage is querygen's"}
        raise InvalidArgumentError(
            f"--curriculum {spec!r}: {cfg.method} reads no {wrong[0]!r} context "
            f"({hint[wrong[0]]}; {cfg.method}'s sources: {', '.join(METHOD_SOURCES[cfg.method])})"
        )
    if cfg.stage_schedules:
        schedules = [s.strip() for s in cfg.stage_schedules.split(",")]
    elif len(items) == 1:
        schedules = [cfg.train.schedule]
    else:
        schedules = None  # the paper's curriculum schedules
    stages = plan_stages(spec, cfg.train.max_steps, schedules)
    if any(s.source == "queries" for s in stages) and cfg.queries is None:
        raise InvalidArgumentError(f"--curriculum {spec!r} has a queries stage: pass --queries QUERIES_DIR")
    return stages


def warmup_steps(first: CurriculumStage, warmup: float) -> int:
    """Warm-up steps of a curriculum run: ``warmup`` steps when >= 1, else that fraction of the
    FIRST stage (the paper trains stage 1 "with the same hyper-parameter settings" as a whole run)."""
    return int(warmup) if warmup >= 1 else round(warmup * first.steps)


def switch_steps(stages: Sequence[CurriculumStage]) -> list[int]:
    """The steps at which a later stage starts."""
    return [s.start for s in stages[1:]]


def build_source(
    cfg: PretrainSettings, store: Any, stages: Sequence[CurriculumStage], pin_memory: bool = False
) -> CurriculumSource:
    """Rows and batch functions of every stage, from the config's store and queries folder."""
    from dense_pt.expansion.query_data import QueryTokens
    from dense_pt.expansion.writer import load_pseudo_queries

    queries = None
    if cfg.queries is not None:
        queries = QueryTokens.build(store, load_pseudo_queries(cfg.queries), cfg.max_query_tokens)
    all_rows = np.arange(len(store), dtype=np.int64)
    rows, makers = [], []
    for stage in stages:
        if stage.source == "queries":
            if queries is None:  # plan_curriculum() refuses such a curriculum; a config built by hand may not
                raise InvalidArgumentError(f"the 'queries' stage of {cfg.method} needs --queries QUERIES_DIR")
            with_q = queries.rows_with_queries()
            if len(with_q) == 0:
                raise InvalidArgumentError(f"no passage of {store.path} has a query in {cfg.queries}")
            rows.append(with_q)
        else:
            rows.append(all_rows)
        makers.append(
            StageBatches(
                store,
                cfg.method,
                stage.source,
                cfg.options,
                cfg.length(),
                cfg.train.seed,
                queries=queries,
                pad_to_multiple_of=cfg.pad_to_multiple_of,
            )
        )
    return CurriculumSource(
        stages,
        rows,
        makers,
        cfg.train.batch_size,
        grad_accum=cfg.train.grad_accum,
        seed=cfg.train.seed,
        num_workers=cfg.train.num_workers,
        prefetch_factor=cfg.train.prefetch_factor,
        pin_memory=pin_memory,
    )


def lr_lambda(
    stages: Sequence[CurriculumStage], warmup: int, stage_warmup: float = 0
) -> Callable[[int], float]:
    """The curriculum's learning-rate multiplier per step, ``warmup`` steps of warm-up in the first
    stage and ``stage_warmup`` (steps, or a fraction of the stage) in each later one (clamped to the
    last step: the scheduler is stepped once more after the final step)."""
    from dense_pt.expansion.curriculum import curriculum_lr_factor

    last = stages[-1].end - 1
    return lambda step: curriculum_lr_factor(stages, min(step, last), warmup, stage_warmup)


plan = plan_curriculum  # the old name (the pipeline's plan is pipeline.runner.plan)
