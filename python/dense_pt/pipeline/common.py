"""What several pipeline stages share: where the upstream stages leave their files, the model every
retriever starts from, evaluation on the dev split, encoding + search, mining, and one retriever
training stage (R1, R2 and the distilled retriever differ only in their negatives or teacher)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dense_pt.config.finetune import RefreshSettings
from dense_pt.config.pipeline import DistillTable, RerankerTable, RetrieverTable
from dense_pt.config.train import TrainConfig
from dense_pt.errors import DensePtError
from dense_pt.pipeline.config import ResolvedPipeline, settings
from dense_pt.pipeline.runner import C, Context, fingerprint

if TYPE_CHECKING:  # numpy and pyarrow stay out of `dense-pt --help`'s imports
    from dense_pt.runs import RunSource

Ctx = Context[ResolvedPipeline]  # what every pipeline stage is handed
Trained = RetrieverTable | DistillTable  # a table that trains a retriever

# --- where things are ------------------------------------------------------------------------


def init_model(ctx: Ctx) -> Path:
    return ctx.cfg.model.init


def store(ctx: Ctx) -> Path:
    return ctx.out / "store" / "store"


def split_file(ctx: Context[C], name: str) -> Path:
    """``train.qrels``, ``dev.qrels``, ``dev_queries.jsonl`` or ``judged_queries.jsonl``."""
    return ctx.out / "split" / name


def split_inputs(ctx: Ctx) -> dict[str, str]:
    """The inputs of every stage that reads the split and the queries."""
    return {"split": ctx.fp("split"), "queries": ctx.file_hash(ctx.cfg.data.queries)}


def model_fingerprint(path: Path) -> str:
    """The files of a model folder (or a config.json), hashed."""
    from dense_pt.artifacts.checksums import file_digest

    files = path.iterdir() if path.is_dir() else [path]
    return fingerprint(sorted((p.name, file_digest(p, "sha256")) for p in files if p.is_file()))


def init_fingerprint(ctx: Ctx) -> str:
    return ctx.memo(("model", init_model(ctx)), lambda: model_fingerprint(init_model(ctx)))


def base_model(ctx: Ctx) -> tuple[Path, str]:
    """The model every retriever starts from and its fingerprint: the pre-trained encoder when the
    pipeline pre-trains one, else ``[model] init``."""
    if ctx.planned("pretrain"):
        return ctx.out / "pretrain" / "run" / "encoder", ctx.fp("pretrain")
    return init_model(ctx), init_fingerprint(ctx)


def k_eval(cfg: ResolvedPipeline) -> int:
    return cfg.eval.k


def k_search(cfg: ResolvedPipeline) -> int:
    """How deep the dense stages search: enough for evaluation, mining and re-ranking."""
    return max(k_eval(cfg), cfg.mine.depth + 10, cfg.reranker.depth + 10)


def train_ids(ctx: Ctx) -> list[str]:
    from dense_pt.data import load_qrels

    return sorted(load_qrels(split_file(ctx, "train.qrels")))


# --- evaluation, retrieval, mining -------------------------------------------------------------


def evaluate(ctx: Context[C], run: RunSource, dev_qrels: Path | None = None) -> dict[str, float]:
    """``run``'s measures on the dev split (the queries of ``run`` outside it are ignored); ``run``
    a run file (streamed a chunk of queries at a time), a mapping or chunks."""
    from dense_pt.data import load_qrels
    from dense_pt.evaluation import evaluate_run
    from dense_pt.runs import read_run

    dev = load_qrels(dev_qrels or split_file(ctx, "dev.qrels"))
    sub = (c.select(dev) for c in read_run(run))
    ev = ctx.cfg.eval
    return evaluate_run(sub, dev, ev.measures, tie_break=ev.tie_break, rel_level=ev.rel_level).measures


RUN_FILE = "run.arrow"  # every stage's run (the re-ranker's dev run: RERANKED_FILE)
RERANKED_FILE = "dev_reranked.arrow"


def run_file(folder: Path, name: str = RUN_FILE) -> Path:
    """The run a finished stage left in ``folder`` (a ``.trec`` one in a folder finished before
    runs were Arrow files: ``runner.existing_run``)."""
    from dense_pt.pipeline.runner import existing_run

    return existing_run(folder / name)


def encode_lengths(sec: Trained) -> dict[str, int]:
    """A retriever is encoded with the lengths it was trained with (SimLM: 32 / 144 for both)."""
    return {"query_max_length": sec.query_max_length, "passage_max_length": sec.passage_max_length}


def encode_and_search(
    ctx: Ctx, model: Path, folder: Path, queries: Path, k: int, lengths_of: Trained
) -> Path:
    """Encode corpus + queries with ``model`` (resumable) and search: the run file for all queries,
    with the lengths of the retriever table ``lengths_of`` (the stage's own; zero-shot: R1's)."""
    from dense_pt.config.retrieval import EncodeSettings, SearchSettings
    from dense_pt.retrieval.encode import encode
    from dense_pt.retrieval.search import search_file

    batch_size = ctx.cfg.encode.batch_size
    for source, emb, length in ((store(ctx), "emb_passages", lengths_of.passage_max_length),
                                (queries, "emb_queries", lengths_of.query_max_length)):  # fmt: skip
        encode(model, source, folder / emb, EncodeSettings(batch_size=batch_size, max_length=length),
               progress=ctx.progress)  # fmt: skip
    return search_file(
        folder / "emb_queries", folder / "emb_passages", folder / RUN_FILE, SearchSettings(k=k)
    ).out


def mine_from(ctx: Ctx, run_path: Path, out: Path, depth: int, num: int, dense: Path | None) -> dict:
    """Negatives from a run. ``dense``: the stage folder holding the run's embeddings; the
    [mine] filters apply to dense runs only (a margin in cosine units means nothing for BM25
    scores), and positives missing from the run are scored from those embeddings."""
    from dense_pt.config.retrieval import MineCommand, MineSettings
    from dense_pt.data import load_qrels
    from dense_pt.retrieval.negatives import mine, write_negatives
    from dense_pt.retrieval.search import PairScorer

    m = ctx.cfg.mine
    scorer = None
    if dense is not None and (m.absolute_margin is not None or m.relative_margin is not None):
        scorer = PairScorer.open(dense / "emb_queries", dense / "emb_passages")
    used = set(MineSettings.model_fields) - (set() if dense is not None else MineSettings.FILTERS)
    settings = MineCommand(**{**m.model_dump(include=used), "depth": depth, "num": num, "seed": ctx.seed})
    mined = mine(run_path, load_qrels(split_file(ctx, "train.qrels")), settings, scorer=scorer)
    write_negatives(out, mined)
    return mined.stats


# --- training ----------------------------------------------------------------------------------


def train_config(sec: Trained | RerankerTable, seed: int) -> TrainConfig:
    """The stage's engine settings: its ``train`` table (the keys set) over TrainConfig's defaults."""
    return TrainConfig.load({"seed": seed, **sec.train.model_dump(exclude_none=True)}, prefix="train")


def with_loss(sec: Trained) -> dict[str, Any]:
    """A retriever stage's settings plus what its loss name means: the fingerprint changes (and the
    stage is redone) when a loss name comes to mean another formula, as ``simlm`` did."""
    from dense_pt.objectives.retrieval import resolve_loss

    return {**settings(sec), "loss_source": resolve_loss(sec.loss).source}


def refresh_settings(ctx: Ctx, sec: Trained) -> RefreshSettings | None:
    """How a refreshing stage (``refresh_every``: ANCE negatives) refreshes: mined with ``[mine]``'s
    settings (filters included, as for every dense run), encoded with ``[encode]``'s batch size."""
    from dense_pt.config.finetune import RefreshSettings
    from dense_pt.config.retrieval import MineSettings

    if getattr(sec, "refresh_every", None) is None:
        return None
    mine = MineSettings.model_validate(ctx.cfg.mine.model_dump(include=set(MineSettings.model_fields)))
    return RefreshSettings(mine=mine, batch_size=ctx.cfg.encode.batch_size)


def refresh_params(ctx: Ctx, sec: Trained) -> dict[str, Any]:
    """What a refreshing stage's fingerprint adds: the mining and encoding settings it uses."""
    if getattr(sec, "refresh_every", None) is None:
        return {}
    return {"refresh": {"mine": settings(ctx.cfg.mine), "encode_batch_size": ctx.cfg.encode.batch_size}}


def train_retriever_stage(
    ctx: Ctx, folder: Path, sec: Trained, init: Path, negatives: Path | None = None,
    teacher: Path | None = None, mined: dict | None = None,
) -> dict:  # fmt: skip
    """Train a retriever from ``init`` on ``negatives`` (or, distilling, on ``teacher``'s scores) with
    the stage's table whole as its settings, then retrieve for every judged query with it and
    evaluate on the dev split."""
    from dense_pt.config.finetune import DistillInputs, RetrieverInputs
    from dense_pt.finetune.stages import train_distill, train_retriever

    paths: dict[str, Any] = dict(
        model=init, corpus=store(ctx), queries=ctx.cfg.data.queries, qrels=split_file(ctx, "train.qrels"),
        out=folder / "train", restrict_to=train_ids(ctx), pooling=ctx.cfg.model.pooling,
    )  # fmt: skip
    train, progress = train_config(sec, ctx.seed), ctx.progress
    if isinstance(sec, DistillTable):
        assert teacher is not None  # the distillation stage reads the re-ranker's scores
        m = train_distill(DistillInputs(**paths, scores=teacher), sec, train, progress=progress)
    else:
        inputs = RetrieverInputs(**paths, negatives=negatives)
        m = train_retriever(inputs, sec, train, refresh_settings(ctx, sec), progress=progress)
    run = encode_and_search(ctx, folder / "train" / "model", folder, split_file(ctx, "judged_queries.jsonl"),
                   k_search(ctx.cfg), sec)  # fmt: skip
    return {"metrics": evaluate(ctx, run), "negatives": mined, "train_steps": m["steps"],
            "train_wall_s": m["wall_s"]}  # fmt: skip


def reranker_init(cfg: ResolvedPipeline) -> Path | None:
    """The re-ranker's initial checkpoint (None: the pipeline's model), resolved and checked before
    the first stage runs: a missing checkpoint or a vocabulary other than the corpus store's would
    otherwise fail only after hours of R1 and R2."""
    from dense_pt.finetune.checkpoints import resolve_checkpoint

    sec = cfg.reranker
    if not sec.enabled or sec.init == "model":
        return None
    path = resolve_checkpoint(sec.init, None, "[reranker] init")
    if path.is_dir():
        _check_same_vocabulary(path, cfg.model.init)
    return path


def _check_same_vocabulary(path: Path, init: Path) -> None:
    from tokenizers import Tokenizer

    from dense_pt.data.tokenizer import vocab_hash

    mine, base = path / "tokenizer.json", init / "tokenizer.json"
    if not mine.exists():
        raise DensePtError(f"[reranker] init {path}: no tokenizer.json (a fast tokenizer is needed)")
    if base.exists() and vocab_hash(Tokenizer.from_file(str(mine))) != vocab_hash(
        Tokenizer.from_file(str(base))
    ):
        raise DensePtError(
            f"[reranker] init {path} has another vocabulary than [model] init {init}, whose tokenizer "
            "builds the corpus store every stage reads: pick a re-ranker with the same vocabulary"
        )


def queries_subset(src: Path, dst: Path, keep: set[str]) -> Path:
    from dense_pt.data import load_queries
    from dense_pt.fsutil import atomic_file

    qs = load_queries(src)
    with atomic_file(dst, "w", encoding="utf-8") as f:
        for q, t in qs.items():
            if q in keep:
                f.write(json.dumps({"_id": q, "text": t}) + "\n")
    return dst
