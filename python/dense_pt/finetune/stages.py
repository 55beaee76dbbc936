"""The fine-tuning stages as Python functions (the CLI and the pipeline call these).

Each takes its validated models whole: what it reads and writes (``RetrieverInputs`` ...), its
settings (``RetrieverSettings`` ...: a command's or a pipeline table's model is one) and the
engine's ``TrainConfig``; ``dense_pt.config.finetune`` holds them.

* ``train_retriever``: bi-encoder with a retriever loss (``simlm``, ``simlm-eq3``, ``infonce``,
  ``triplet``; ``dense_pt.objectives.retrieval``) over groups of 1 positive + n-1 negatives
  (negatives file) plus in-batch and cross-device negatives;
* ``train_reranker``: cross-encoder with SimLM's listwise loss over groups drawn from a
  retriever's mined top-k;
* ``score_negatives``: the re-ranker's raw logits for (query, positives + mined negatives);
* ``train_distill``: the retriever trained with KL(p_ranker || p_ret) + alpha * its contrastive
  loss (SimLM eq. 5 with ``simlm``, CDMAE eq. 11 with ``infonce``).

Every stage writes ``OUT/checkpoints`` (the engine's, resumable), ``OUT/log.jsonl``, the final
model in ``OUT/model`` (retrievers load with ``SentenceTransformer(OUT/model)``; the re-ranker
with ``AutoModelForSequenceClassification`` and sentence-transformers' ``CrossEncoder``) and
``OUT/manifest.json`` (inputs and their hashes, settings, result).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dense_pt import __version__, artifacts
from dense_pt.artifacts.checksums import file_digest
from dense_pt.config.base import Model
from dense_pt.config.defaults import finetune as FT
from dense_pt.config.finetune import (
    DistillInputs,
    DistillSettings,
    RefreshSettings,
    RerankerInputs,
    RerankerSettings,
    RetrieverInputs,
    RetrieverSettings,
    ScoreInputs,
)
from dense_pt.config.train import TrainConfig
from dense_pt.errors import InvalidArgumentError
from dense_pt.fsutil import write_json_atomic
from dense_pt.retrieval.encoder import RETRIEVER_LENGTHS

RERANKER_LOSS_SOURCES = {
    "simlm": "SimLM as the authors train it (train_reranker_marco.sh --rerank_forward_factor 4 --rerank_use_rdrop "
    "True): the group scored without gradients, the positive and the top-scoring negatives kept, R-Drop "
    "(mean listwise cross-entropy of two dropout passes + their symmetric KL)",
    "listwise": "SimLM eq. 4: listwise cross-entropy over a positive and group_size - 1 negatives",
}
TEACHER_MISSING = -1e4  # logit of a filler negative the re-ranker never scored: ~zero probability


def hf_tokenizer(init: str | Path, store: Any) -> Any:
    """The model folder's fast tokenizer, else the store's; it must share the store's vocabulary."""
    from transformers import AutoTokenizer

    from dense_pt.data.tokenizer import hf_fast_tokenizer
    from dense_pt.retrieval.encoder import check_vocab

    init = Path(init)
    if init.is_dir() and (init / "tokenizer.json").exists():
        check_vocab(init, store.vocab_hash)
        return AutoTokenizer.from_pretrained(str(init), local_files_only=True)
    # The store's own tokenizer: its vocabulary is the store's by construction.
    return hf_fast_tokenizer(store.tokenizer(), store.special_tokens)


def _hash(path: str | Path | None) -> str | None:
    if path is None:
        return None
    p = Path(path)
    if p.is_dir():
        m = p / "manifest.json"
        if m.exists():
            return file_digest(m, "sha256")
        if (p / "config.json").exists():  # a model folder: its config and weights identify it
            from dense_pt.retrieval.encode import model_hash

            return model_hash(p)
        return None
    return file_digest(p, "sha256")


def _passages(store: Any):
    values, offsets = store.ragged()
    return lambda r: values[offsets[r] : offsets[r + 1]].astype(np.int64)


def _specials(tok: Any) -> tuple[int, int, int]:
    return tok.cls_token_id, tok.sep_token_id, tok.pad_token_id


def _read_inputs(corpus, queries, qrels, negatives):
    """The store, the query texts, the judgements and the negatives file as arrays
    (``MinedNegatives``: ``build_sampler`` resolves its ids against the store, vectorised)."""
    from dense_pt.data import load_qrels, load_queries
    from dense_pt.data.store import CorpusStore
    from dense_pt.retrieval.negatives import read_mined

    store = CorpusStore.open(corpus)
    negs = read_mined(negatives) if negatives is not None else None
    return store, load_queries(queries), load_qrels(qrels), negs


def _train_config(train: TrainConfig | dict[str, Any] | None) -> TrainConfig:
    if train is None:
        return TrainConfig()
    if isinstance(train, dict):
        return TrainConfig.load(train, prefix="train")
    return train


def _for_epochs(cfg: TrainConfig, rows: int, epochs: float | None) -> TrainConfig:
    """``cfg`` with ``max_steps`` covering ``epochs`` passes over ``rows`` training queries (the
    engine drops the last partial batch of an epoch), when ``epochs`` is given."""
    if epochs is None:
        return cfg
    import math
    import os

    if epochs <= 0:
        raise InvalidArgumentError(f"epochs must be > 0, got {epochs}")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    per_epoch = max(1, rows // (cfg.batch_size * world))
    return cfg.replace(max_steps=max(1, math.ceil(epochs * per_epoch)))


def _card(
    folder: Path, kind: str, title: str, model, method: str, paper: str, inputs: dict, settings: dict
) -> None:
    from dense_pt.model_card import write_model_card

    data = {k: str(v) for k, v in inputs.items() if v is not None and k != "model"}
    write_model_card(folder, kind, title, str(model), method, paper, data, settings)


def _finish(
    out: Path, stage: str, inputs: dict, settings: dict, result: Any, extra: dict | None = None,
    write: bool = True,
) -> dict:  # fmt: skip
    body = {
        "stage": stage,
        "inputs": {k: {"path": None if v is None else str(v), "sha256": _hash(v)} for k, v in inputs.items()},
        "steps": result.step,
        "last_log": result.last_record,
        "wall_s": round(result.wall_s, 3),
        "resumed_from": result.resumed_from,
        "code_version": __version__,
        **(extra or {}),
    }
    kind = {"retriever": "retriever", "distill": "distilled retriever"}.get(stage, stage)
    head = artifacts.header(kind, f"train {stage}", settings=settings, complete=True)
    if write:  # under torchrun only the main process (the one that logs and saves) writes it
        artifacts.write(out, head, body)
    return {**head, **body}


def _teacher(
    teacher_scores: str | Path, store: Any, judged: dict, restrict_to: Sequence[str] | None
) -> tuple[dict[str, dict[str, float]], dict[str, list[str]], list[str]]:
    """The re-ranker's scores per query; the candidates for the groups (the scored passages that
    are not judged positives); the training queries (those with scores)."""
    from dense_pt.retrieval.negatives import read_negatives

    ttable = read_negatives(teacher_scores, known_ids=store)
    teacher = {q: dict(rows) for q, rows in ttable.rows.items()}
    negs = {q: [p for p in t if judged.get(q, {}).get(p, 0) <= 0] for q, t in teacher.items()}
    restrict = set(teacher) if restrict_to is None else set(restrict_to) & set(teacher)
    return teacher, negs, sorted(restrict)


def _retriever_batches(sampler: Any, store: Any, specials: tuple[int, int, int],
                       teacher: dict[str, dict[str, float]] | None, query_max_length: int,
                       passage_max_length: int) -> Callable[[np.ndarray, int], dict[str, np.ndarray]]:  # fmt: skip
    """``make_batch(rows, epoch)``: each row's query and group (positive + negatives drawn for the
    epoch), padded; with a teacher, its scores of the group (``TEACHER_MISSING`` where unscored)."""
    from dense_pt.retrieval.encoder import pad_arrays as pad

    passage = _passages(store)
    ids = store.ids.to_pylist() if teacher is not None else []  # the teacher's scores are by passage id
    cls, sep, pad_id = specials

    def make_batch(rows: np.ndarray, epoch: int) -> dict[str, np.ndarray]:
        qs: list[Any] = []
        ps: list[Any] = []
        te: list[list[float]] = []
        for r in rows:
            pos, nrows = sampler.group(int(r), epoch)
            group = [pos, *nrows.tolist()]
            qs.append(sampler.query_tokens[r])
            ps.extend(passage(x) for x in group)
            if teacher is not None:
                t = teacher[sampler.qids[r]]
                te.append([t.get(ids[x], TEACHER_MISSING) for x in group])
        q_ids, q_mask = pad(qs, cls, sep, pad_id, query_max_length)
        p_ids, p_mask = pad(ps, cls, sep, pad_id, passage_max_length)
        batch = {"q_ids": q_ids, "q_mask": q_mask, "p_ids": p_ids, "p_mask": p_mask}
        if teacher is not None:
            batch["teacher"] = np.asarray(te, dtype=np.float32)
        return batch

    return make_batch


def train_retriever(
    inputs: RetrieverInputs, settings: RetrieverSettings | None = None, train: TrainConfig | None = None,
    refresh: RefreshSettings | None = None, *, resume: bool = True, progress: bool = True,
) -> dict:  # fmt: skip
    """Train a retriever on ``inputs`` (groups from its negatives file) with ``settings`` (default:
    SimLM's) and the engine's ``train``. ``settings.tau=None``: the loss's own temperature (SimLM's
    0.02 for the simlm losses, 1 for infonce); ``settings.epochs`` sets ``max_steps`` from the number
    of training queries (``train.max_steps`` otherwise). Returns the manifest.
    The model records its lengths in ``OUT/model/retriever.json``: encoding reads them from there.
    ANCE negatives (``settings.refresh_every``, ``dense_pt.finetune.refresh``): every that many
    steps the model being trained encodes the corpus and the training queries and fresh negatives are
    mined with ``refresh.mine`` (default: ``negatives mine``' settings) and the training seed; the
    negatives file is used until the first refresh."""
    settings = RetrieverSettings() if settings is None else settings
    if settings.refresh_every is None and refresh is not None:
        raise InvalidArgumentError("refresh settings are for refresh_every (ANCE negatives): set it too")
    if settings.refresh_every is not None and refresh is None:
        refresh = RefreshSettings()
    return _train_bi_encoder(inputs, settings, _train_config(train), refresh, resume, progress)


def train_distill(
    inputs: DistillInputs, settings: DistillSettings | None = None, train: TrainConfig | None = None,
    *, resume: bool = True, progress: bool = True,
) -> dict:  # fmt: skip
    """Distil the re-ranker's scores (``inputs.scores``) into a retriever started from
    ``inputs.model`` (SimLM: the pre-trained checkpoint, not R2): KL(p_ranker || p_ret) + alpha *
    the contrastive term of ``settings.loss`` (SimLM eq. 5 with ``simlm``, CDMAE eq. 11 with
    ``infonce``). Returns the manifest."""
    settings = DistillSettings() if settings is None else settings
    return _train_bi_encoder(inputs, settings, _train_config(train), None, resume, progress)


def _train_bi_encoder(
    inputs: RetrieverInputs | DistillInputs, settings: RetrieverSettings | DistillSettings, cfg: TrainConfig,
    refresh: RefreshSettings | None, resume: bool, progress: bool,
) -> dict:  # fmt: skip
    """A retriever, or with a teacher (``DistillInputs``) its distillation; the manifest records
    ``settings`` whole (``model_dump``) with what they resolve to."""
    from dense_pt.finetune.models import BiEncoder
    from dense_pt.models.encoder import load_encoder
    from dense_pt.retrieval.encoder import detect_spec
    from dense_pt.training import IndexedBatchSource, Trainer, seed_everything

    s, out, model = settings, inputs.out, inputs.model
    distill = isinstance(inputs, DistillInputs)
    alpha = s.alpha if isinstance(s, DistillSettings) else FT.ALPHA
    store, qtexts, judged, teacher, tok, sampler = _retriever_rows(inputs, s.group_size, cfg.seed)
    make_batch = _retriever_batches(
        sampler, store, _specials(tok), teacher, s.query_max_length, s.passage_max_length
    )
    spec = detect_spec(model if model.is_dir() else model.parent, inputs.pooling)
    seed_everything(cfg.seed)
    margin = s.margin if isinstance(s, RetrieverSettings) else FT.TRIPLET_MARGIN
    module = BiEncoder(load_encoder(model), spec.pooling, s.loss, s.tau, margin, alpha)
    if cfg.batch_size > len(sampler):
        cfg = cfg.replace(batch_size=len(sampler))
    cfg = _for_epochs(cfg, len(sampler), s.epochs)
    # built lazily in the training process (no workers): a refresh's negatives reach the next batch
    source = IndexedBatchSource(len(sampler), cfg.batch_size, make_batch, seed=cfg.seed)
    stage = "distill" if distill else "retriever"
    lengths = (s.query_max_length, s.passage_max_length)
    every = s.refresh_every if isinstance(s, RetrieverSettings) else None
    hooks = [] if refresh is None or every is None else [_refresh_hook(
        out, every, refresh, cfg.seed, store, qtexts, judged, sampler,
        lambda folder: _save_retriever(module, tok, folder, spec.pooling, *lengths), progress,
    )]  # fmt: skip
    trainer = Trainer(module, cfg, out, source, progress=progress, description=stage, callbacks=hooks,
                      on_start=[h.on_start for h in hooks])  # fmt: skip
    result = trainer.train(resume=resume)
    if trainer.dist.is_main:
        _save_retriever(module, tok, out / "model", spec.pooling, *lengths)
    record = {
        **_recorded(s),
        "loss": f"distill (KL + alpha * {s.loss})" if distill else s.loss,
        "loss_source": module.spec.source, "similarity": module.spec.similarity, "tau": module.tau,
        "margin": margin if s.loss == "triplet" else None, "alpha": alpha if distill else None,
        "pooling": spec.pooling, "normalize": module.normalize, "train": cfg.to_dict(),
        "rows": sampler.stats, **({"refresh": hooks[0].record()} if hooks else {}),
    }  # fmt: skip
    files = inputs.files()
    if trainer.dist.is_main:
        _retriever_card(out, stage, model, s.loss, module.spec.source, files, record)
    return _finish(out, stage, files, record, result, write=trainer.dist.is_main)


# Recorded in their resolved form instead (the engine's whole config; the refresh's mining).
RESOLVED_ELSEWHERE = frozenset({"train", "mine"})


def _recorded(settings: Model) -> dict[str, Any]:
    """The settings as the manifest records them: every field of the model the job was given (a
    command's, a pipeline table's), so a new field reaches the manifest with no change here."""
    return settings.model_dump(exclude=set(RESOLVED_ELSEWHERE))


def _retriever_card(
    out: Path, stage: str, model: Any, loss: str, source: str, inputs: dict, settings: dict
) -> None:
    what = (
        "distillation (KL to the re-ranker's scores, SimLM eq. 5 / CDMAE eq. 11) plus "
        if stage == "distill"
        else ""
    )
    _card(
        out / "model", "retriever", f"dense retriever ({stage})", model, loss, what + source, inputs, settings
    )


def _retriever_rows(
    inputs: RetrieverInputs | DistillInputs, group_size: int, seed: int
) -> tuple[Any, dict[str, str], dict[str, dict[str, int]], dict[str, dict[str, float]] | None, Any, Any]:
    """The inputs read, the teacher's scores (distillation), the model's tokenizer and the group
    sampler over the training queries: (store, query texts, judgements, teacher, tokenizer, sampler)."""
    from dense_pt.finetune.data import build_sampler

    negatives = inputs.negatives if isinstance(inputs, RetrieverInputs) else None
    store, qtexts, judged, negs = _read_inputs(inputs.corpus, inputs.queries, inputs.qrels, negatives)
    teacher: dict[str, dict[str, float]] | None = None
    restrict_to: Sequence[str] | None = inputs.restrict_to
    if isinstance(inputs, DistillInputs):
        teacher, negs, restrict_to = _teacher(inputs.scores, store, judged, restrict_to)
    tok = hf_tokenizer(inputs.model, store)
    sampler = build_sampler(
        store, qtexts, judged, negs, lambda t: tok(t, add_special_tokens=False)["input_ids"],
        group_size, seed, restrict_to,
    )  # fmt: skip
    return store, qtexts, judged, teacher, tok, sampler


def _refresh_hook(
    out: Path, every: int, refresh: RefreshSettings, seed: int, store: Any, queries: dict[str, str],
    judged: dict[str, dict[str, int]], sampler: Any, export: Callable[[Path], None], progress: bool,
) -> Any:  # fmt: skip
    """ANCE negatives for the sampler's queries (``dense_pt.finetune.refresh``) every ``every``
    steps, mined with the refresh's settings and the training seed."""
    from dense_pt.finetune.refresh import NegativesRefresh, training_qrels

    return NegativesRefresh(out, every, refresh, seed, store, queries, training_qrels(judged, sampler.qids),
                            sampler, export, progress)  # fmt: skip


def _save_retriever(module: Any, tok: Any, folder: Path, pooling: str, query_max_length: int,
                    passage_max_length: int) -> None:  # fmt: skip
    """A sentence-transformers folder, plus the lengths it was trained with (encoding reads them)."""
    from dense_pt.retrieval.encoder import save_sentence_transformer

    save_sentence_transformer(module.backbone, tok, folder, pooling, module.normalize, passage_max_length,
                              query_max_length)  # fmt: skip
    write_json_atomic(
        folder / RETRIEVER_LENGTHS,
        {"query_max_length": query_max_length, "passage_max_length": passage_max_length},
    )


def train_reranker(
    inputs: RerankerInputs, settings: RerankerSettings | None = None, train: TrainConfig | None = None,
    *, resume: bool = True, progress: bool = True,
) -> dict:  # fmt: skip
    """Cross-encoder over groups from ``inputs.negatives``; ``inputs.model`` is its initial checkpoint
    (SimLM: an ELECTRA-base discriminator, ``defaults.RERANKER_INIT``). ``settings.loss="simlm"``
    (default) trains as the authors' code: the group scored without gradients, its positive and top
    negatives (``group_size // forward_factor``, 64 // 4) trained with R-Drop; ``"listwise"`` is
    SimLM eq. 4 over the whole group. Returns the manifest."""
    from dense_pt.finetune.data import build_sampler, pad_pairs
    from dense_pt.finetune.models import CrossEncoder, load_cross_encoder
    from dense_pt.training import IndexedBatchSource, Trainer, seed_everything

    s = RerankerSettings() if settings is None else settings
    out, model, cfg = inputs.out, inputs.model, _train_config(train)
    store, qtexts, judged, negs = _read_inputs(inputs.corpus, inputs.queries, inputs.qrels, inputs.negatives)
    tok = hf_tokenizer(model, store)
    sampler = build_sampler(
        store, qtexts, judged, negs, lambda t: tok(t, add_special_tokens=False)["input_ids"],
        s.group_size, cfg.seed, inputs.restrict_to,
    )  # fmt: skip
    passage = _passages(store)
    cls, sep, pad_id = _specials(tok)

    def make_batch(rows: np.ndarray, epoch: int) -> dict[str, np.ndarray]:
        firsts, seconds = [], []
        for r in rows:
            pos, nrows = sampler.group(int(r), epoch)
            for x in [pos, *nrows.tolist()]:
                firsts.append(sampler.query_tokens[r])
                seconds.append(passage(x))
        x_ids, x_mask, x_types = pad_pairs(
            firsts, seconds, cls, sep, pad_id, s.query_max_length, s.max_length
        )
        return {"x_ids": x_ids, "x_mask": x_mask, "x_types": x_types}

    seed_everything(cfg.seed)
    module = CrossEncoder(load_cross_encoder(str(model)), s.group_size, s.loss, s.forward_factor)
    cfg = cfg.replace(batch_size=min(cfg.batch_size, len(sampler)))
    cfg = _for_epochs(cfg, len(sampler), s.epochs)
    source = IndexedBatchSource(len(sampler), cfg.batch_size, make_batch, seed=cfg.seed)
    trainer = Trainer(module, cfg, out, source, progress=progress, description="reranker")
    result = trainer.train(resume=resume)
    if trainer.dist.is_main:
        module.model.save_pretrained(str(out / "model"), safe_serialization=True)
        # the trained length, so AutoTokenizer and sentence_transformers.CrossEncoder(path) truncate there
        tok.model_max_length = s.max_length
        tok.save_pretrained(str(out / "model"))
        write_json_atomic(
            out / "model" / "reranker.json",
            {"query_max_length": s.query_max_length, "max_length": s.max_length},
        )
    record = {**_recorded(s), "loss_source": RERANKER_LOSS_SOURCES[s.loss],
              "forward_factor": module.forward_factor, "trained_per_group": module.keep, "train": cfg.to_dict(),
              "rows": sampler.stats}  # fmt: skip
    files = inputs.files()
    if trainer.dist.is_main:
        _card(out / "model", "reranker", "cross-encoder re-ranker", model, s.loss, RERANKER_LOSS_SOURCES[s.loss],
              files, record)  # fmt: skip
    return _finish(out, "reranker", files, record, result, write=trainer.dist.is_main)


def _load_reranker(path: str | Path, device: str):
    import json

    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = Path(path)
    model = (
        AutoModelForSequenceClassification.from_pretrained(str(path), local_files_only=True).to(device).eval()
    )
    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    lengths = {"query_max_length": FT.QUERY_MAX_LENGTH, "max_length": FT.RERANKER_MAX_LENGTH}
    if (path / "reranker.json").exists():
        lengths.update(json.loads((path / "reranker.json").read_text()))
    return model, tok, lengths


def rerank_logits(
    reranker: str | Path, store: Any, pairs: list[tuple[str, str]], query_texts: dict[str, str],
    batch_size: int = 64, device: str | None = None,
) -> np.ndarray:  # fmt: skip
    """Raw logits of the re-ranker for (qid, pid) pairs."""
    import torch

    from dense_pt.finetune.data import pad_pairs

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, tok, lengths = _load_reranker(reranker, device)
    passage = _passages(store)
    index = {p: i for i, p in enumerate(store.ids.to_pylist())}
    qtok = {q: np.asarray(t, dtype=np.int64) for q, t in zip(
        query_texts, tok(list(query_texts.values()), add_special_tokens=False)["input_ids"], strict=True)}  # fmt: skip
    cls, sep, pad_id = _specials(tok)
    out = np.zeros(len(pairs), dtype=np.float32)
    order = sorted(range(len(pairs)), key=lambda i: len(passage(index[pairs[i][1]])))
    with torch.inference_mode():
        for a in range(0, len(order), batch_size):
            idx = order[a : a + batch_size]
            ids, mask, types = pad_pairs(
                [qtok[pairs[i][0]] for i in idx], [passage(index[pairs[i][1]]) for i in idx],
                cls, sep, pad_id, lengths["query_max_length"], lengths["max_length"],
            )  # fmt: skip
            logits = model(
                input_ids=torch.from_numpy(ids).to(device), attention_mask=torch.from_numpy(mask).to(device),
                token_type_ids=torch.from_numpy(types).to(device),
            ).logits[:, 0]  # fmt: skip
            out[idx] = logits.float().cpu().numpy()
    return out


SCORES_MEANING = (
    "raw re-ranker logits g(q, d) (unnormalised; higher = more relevant; softmax over a query's "
    "entries gives p_ranker of SimLM eq. 5). Per query: its judged positives first (qrels order), "
    "then its mined negatives in the negatives file's order."
)


def score_negatives(inputs: ScoreInputs, batch_size: int = 64, device: str | None = None) -> dict:
    """Write the re-ranker's logits for (query, positives + negatives) as a scores file (.dpneg
    layout, scores = logits) with a manifest stating their meaning; ``batch_size`` pairs per forward
    pass on ``device`` (default: cuda when available)."""
    from dense_pt.retrieval.negatives import NegativesTable, write_negatives

    store, qtexts, judged, mined = _read_inputs(inputs.corpus, inputs.queries, inputs.qrels, inputs.negatives)
    negs = {q: [p for p, _ in rows] for q, rows in mined.rows().items()} if mined is not None else {}
    judged_docs = sorted({d for ds in judged.values() for d in ds})
    known = {d for d, r in zip(judged_docs, store.rows_of(judged_docs).tolist(), strict=True) if r >= 0}
    keep = set(inputs.restrict_to) if inputs.restrict_to is not None else None
    pairs: list[tuple[str, str]] = []
    for q, cands in negs.items():
        if q not in qtexts or q not in judged or (keep is not None and q not in keep):
            continue
        pos = [d for d, r in judged[q].items() if r > 0 and d in known]
        pairs.extend((q, d) for d in pos + [c for c in cands if c not in pos])
    if not pairs:
        raise InvalidArgumentError("nothing to score: no query of the negatives file has text and qrels")
    logits = rerank_logits(
        inputs.reranker, store, pairs, {q: qtexts[q] for q in {q for q, _ in pairs}}, batch_size, device
    )
    rows: dict[str, list[tuple[str, float]]] = {}
    for (q, d), s in zip(pairs, logits.tolist(), strict=True):
        rows.setdefault(q, []).append((d, s))
    out = inputs.out
    write_negatives(out, NegativesTable(rows))
    manifest = {
        "meaning": SCORES_MEANING,
        "reranker": str(inputs.reranker), "reranker_sha256": _hash(inputs.reranker / "model.safetensors"),
        "negatives": str(inputs.negatives), "negatives_sha256": _hash(inputs.negatives),
        "qrels": str(inputs.qrels), "qrels_sha256": _hash(inputs.qrels),
        "queries": len(rows), "pairs": len(pairs),
    }  # fmt: skip
    head = artifacts.header("re-ranker scores", "score", settings={"batch_size": batch_size}, complete=True)
    return artifacts.manifest.write_beside(out, head, manifest)


def rerank_run(
    reranker: str | Path, corpus: str | Path, queries: str | Path, run: dict[str, dict[str, float]],
    depth: int = 100, batch_size: int = 64, device: str | None = None,
) -> dict[str, dict[str, float]]:  # fmt: skip
    """Re-score the top ``depth`` of each query of ``run`` with the re-ranker."""
    from dense_pt.data import load_queries
    from dense_pt.data.store import CorpusStore
    from dense_pt.runs import rank_hits

    store = CorpusStore.open(corpus)
    qtexts = load_queries(queries)
    pairs: list[tuple[str, str]] = []
    for q, hits in run.items():
        if q in qtexts:
            top = rank_hits(hits)[:depth]  # the evaluation's order, ties included
            pairs.extend((q, d) for d, _ in top)
    logits = rerank_logits(
        reranker, store, pairs, {q: qtexts[q] for q in {q for q, _ in pairs}}, batch_size, device
    )
    out: dict[str, dict[str, float]] = {}
    for (q, d), s in zip(pairs, logits.tolist(), strict=True):
        out.setdefault(q, {})[d] = float(s)
    return out


score = score_negatives  # the old name (dense_pt.pmi's score weighs n-grams)
