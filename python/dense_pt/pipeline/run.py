"""`dense-pt pipeline run`: (pre-training) -> BM25 + zero-shot -> R1 -> mine -> R2 -> re-ranker ->
scores -> distilled retriever, evaluated on a held-out dev split, with a final report.

Every stage has its own folder with ``manifest.json``: its inputs (upstream stages' fingerprints
and data file hashes), settings, seed, status, metrics and wall time. A stage's fingerprint is a
hash of all of that; a re-run skips a stage whose manifest says ``done`` with the same
fingerprint, resumes one whose manifest says ``running`` with the same fingerprint (training
restarts from its last checkpoint, encoding from its last shard), and redoes one whose inputs
changed (its folder is replaced).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dense_pt import __version__, logs
from dense_pt.errors import DensePtError
from dense_pt.fsutil import sha256_file, write_json_atomic

STAGES = (
    "store",
    "split",
    "pmi",
    "pretrain",
    "bm25",
    "zeroshot",
    "r1",
    "mine",
    "r2",
    "reranker",
    "score",
    "distill",
    "fusion",
    "report",
)


# The run file each evaluated stage leaves in its folder (its metrics can be recomputed from it).
RUN_FILES = {"bm25": "run.trec", "zeroshot": "run.trec", "r1": "run.trec", "r2": "run.trec",
             "reranker": "dev_reranked.trec", "distill": "run.trec", "fusion": "run.trec"}  # fmt: skip


class StopPipeline(DensePtError):
    """Raised after ``stop_after`` (tests simulate an interrupted pipeline with it)."""


def planned_stages(cfg: dict[str, Any]) -> tuple[str, ...]:
    """The stages ``cfg`` runs, in order (the optional ones only when configured)."""
    off = set()
    if not cfg["pretrain"]:
        off |= {"pmi", "pretrain"}
    elif cfg["pretrain"].get("pmi") is None:
        off.add("pmi")
    if not cfg["reranker"]["enabled"]:
        off |= {"reranker", "score", "distill"}
    elif not cfg["distill"]["enabled"]:
        off.add("distill")
    if not cfg["fusion"]["enabled"]:
        off.add("fusion")
    return tuple(s for s in STAGES if s not in off)


def check_stop_after(name: str | None, cfg: dict[str, Any] | None = None) -> None:
    """``stop_after`` names a stage (that ``cfg`` runs), checked before any work."""
    if name is None:
        return
    if name not in STAGES:
        raise DensePtError(f"--stop-after {name!r}: not a stage; the stages are {', '.join(STAGES)}")
    if cfg is not None and name not in planned_stages(cfg):
        raise DensePtError(
            f"--stop-after {name!r}: this configuration does not run that stage (it runs "
            f"{', '.join(planned_stages(cfg))})"
        )


def _fingerprint(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


class Context:
    def __init__(
        self, cfg: dict[str, Any], progress: bool, stop_after: str | None, log: Callable[[str], None]
    ):
        self.cfg, self.progress, self.stop_after, self.log = cfg, progress, stop_after, log
        self.out: Path = Path(cfg["out"])
        self.seed: int = int(cfg["seed"])
        self.results: dict[str, dict[str, Any]] = {}
        from dense_pt.evaluation.metrics import EVALUATION_VERSION

        ev = cfg["eval"]
        # Not part of any stage's fingerprint: other measures or conventions re-evaluate the stages'
        # run files (``_refresh_metrics``) instead of redoing their training.
        self.eval_key = {"measures": list(ev["measures"]), "rel_level": ev["rel_level"],
                         "tie_break": ev["tie_break"], "version": EVALUATION_VERSION}  # fmt: skip

    def stage(
        self, name: str, inputs: dict[str, Any], params: dict[str, Any], fn: Callable[[Path], dict]
    ) -> dict:
        folder = self.out / name
        mpath = folder / "manifest.json"
        fp = _fingerprint({"inputs": inputs, "params": params, "seed": self.seed, "stage": name})
        old = json.loads(mpath.read_text()) if mpath.exists() else None
        if old and old.get("fingerprint") == fp and old.get("status") == "done":
            old = self._refresh_metrics(name, folder, old)
            self.log(f"[{name}] up to date, skipped")
            self.results[name] = old
            self._maybe_stop(name)
            return old
        if folder.exists() and not (old and old.get("fingerprint") == fp):
            shutil.rmtree(folder)  # inputs changed (or no manifest): start the stage afresh
        elif old:
            self.log(f"[{name}] resuming an interrupted run")
        folder.mkdir(parents=True, exist_ok=True)
        base = {"stage": name, "fingerprint": fp, "inputs": inputs, "params": params, "seed": self.seed,
                "code_version": __version__}  # fmt: skip
        write_json_atomic(mpath, {**base, "status": "running"})
        self.log(f"[{name}] running")
        t0 = time.perf_counter()
        result = fn(folder)
        self.log(f"[{name}] done in {time.perf_counter() - t0:,.1f} s")
        if "metrics" in result:
            result = {**result, "evaluation": self.eval_key}
            self._card_metrics(name, folder, result["metrics"])
        manifest = {**base, "status": "done", "wall_s": round(time.perf_counter() - t0, 2), **result}
        write_json_atomic(mpath, manifest)
        self.results[name] = manifest
        if "metrics" in result:
            shown = ", ".join(f"{k} {v:.4f}" for k, v in result["metrics"].items())
            self.log(f"[{name}] dev: {shown}")
        self._maybe_stop(name)
        return manifest

    def _card_metrics(self, name: str, folder: Path, metrics: dict[str, float]) -> None:
        """The stage's dev metrics on the model card of what it trained (zero-shot: of the
        pre-trained encoder, when the pipeline pre-trained one)."""
        from dense_pt.model_card import add_metrics

        model = {"zeroshot": self.out / "pretrain" / "run" / "encoder"}.get(name, folder / "train" / "model")
        ev = self.cfg["eval"]
        add_metrics(model, {"split": f"pipeline dev split, {name} stage", "values": metrics,
                            "settings": {"tie order": ev["tie_break"], "relevance level": ev["rel_level"]}})  # fmt: skip

    def _maybe_stop(self, name: str) -> None:
        if self.stop_after == name:
            raise StopPipeline(
                f"stopped after stage {name!r} as asked; re-run without --stop-after to continue"
            )

    def _refresh_metrics(self, name: str, folder: Path, manifest: dict) -> dict:
        """A finished stage's metrics, recomputed from its run file when they were computed with
        other evaluation settings or an older version of the metrics."""
        run_file = folder / RUN_FILES.get(name, "-")
        if "metrics" not in manifest or manifest.get("evaluation") == self.eval_key or not run_file.is_file():
            return manifest
        from dense_pt.data import load_run

        metrics = _evaluate(self, load_run(run_file), self.out / "split" / "dev.qrels")
        manifest = {**manifest, "metrics": metrics, "evaluation": self.eval_key}
        write_json_atomic(folder / "manifest.json", manifest)
        self.log(f"[{name}] metrics recomputed from {run_file.name} (evaluation settings changed)")
        return manifest


def _file_hash(p: Path) -> str:
    return sha256_file(p)


def dev_split(qids: list[str], fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """A fixed, seeded split of the judged query ids: (train, dev)."""
    order = sorted(qids)
    perm = np.random.default_rng(seed).permutation(len(order))
    n_dev = max(1, round(fraction * len(order)))
    dev = sorted(order[i] for i in perm[:n_dev])
    dev_set = set(dev)
    return [q for q in order if q not in dev_set], dev


def _write_qrels(path: Path, qrels: dict[str, dict[str, int]], qids: list[str]) -> None:
    from dense_pt.fsutil import atomic_file

    with atomic_file(path, "w", encoding="utf-8") as f:
        for q in qids:
            for d, r in qrels[q].items():
                f.write(f"{q} 0 {d} {r}\n")


def _evaluate(ctx: Context, run: dict, dev_qrels: Path) -> dict[str, float]:
    from dense_pt.data import load_qrels
    from dense_pt.evaluation import evaluate_run

    dev = load_qrels(dev_qrels)
    sub = {q: h for q, h in run.items() if q in dev}
    ev = ctx.cfg["eval"]
    return evaluate_run(
        sub, dev, ev["measures"], tie_break=ev["tie_break"], rel_level=ev["rel_level"]
    ).measures


def _encode_lengths(sec: dict[str, Any]) -> dict[str, int]:
    """A retriever is encoded with the lengths it was trained with (SimLM: 32 / 144 for both)."""
    return {"query_max_length": sec["query_max_length"], "passage_max_length": sec["passage_max_length"]}


def _retrieve(
    ctx: Context, model: Path, folder: Path, store: Path, queries: Path, k: int, lengths: dict[str, int]
) -> dict:
    """Encode corpus + queries with ``model`` (resumable) and search: the run for all queries."""
    from dense_pt.data import write_run
    from dense_pt.retrieval.encode import encode
    from dense_pt.retrieval.search import search

    batch_size = ctx.cfg["encode"]["batch_size"]
    encode(model, store, folder / "emb_passages", batch_size=batch_size,
           max_length=lengths["passage_max_length"], progress=ctx.progress)  # fmt: skip
    encode(model, queries, folder / "emb_queries", batch_size=batch_size,
           max_length=lengths["query_max_length"], progress=ctx.progress)  # fmt: skip
    run = search(folder / "emb_queries", folder / "emb_passages", None, k=k)
    write_run(folder / "run.trec", run)
    return run


def _queries_subset(src: Path, dst: Path, keep: set[str]) -> Path:
    from dense_pt.data import load_queries
    from dense_pt.fsutil import atomic_file

    qs = load_queries(src)
    with atomic_file(dst, "w", encoding="utf-8") as f:
        for q, t in qs.items():
            if q in keep:
                f.write(json.dumps({"_id": q, "text": t}) + "\n")
    return dst


def _train_cfg(section: dict[str, Any], seed: int):
    from dense_pt.training import TrainConfig, dataclass_from_mapping

    return dataclass_from_mapping(TrainConfig, {"seed": seed, **section.get("train", {})}, "train")


def _with_loss(sec: dict[str, Any]) -> dict[str, Any]:
    """A retriever stage's settings plus what its loss name means: the fingerprint changes (and the
    stage is redone) when a loss name comes to mean another formula, as ``simlm`` did."""
    from dense_pt.objectives.retrieval import resolve_loss

    return {**sec, "loss_source": resolve_loss(sec["loss"]).source}


def _model_fingerprint(path: Path) -> str:
    """The files of a model folder (or a config.json), hashed."""
    return _fingerprint(
        sorted((p.name, _file_hash(p)) for p in (path.iterdir() if path.is_dir() else [path]) if p.is_file())
    )


def _reranker_init(cfg: dict[str, Any]) -> Path | None:
    """The re-ranker's initial checkpoint (None: the pipeline's model), resolved and checked before
    the first stage runs: a missing checkpoint or a vocabulary other than the corpus store's would
    otherwise fail only after hours of R1 and R2."""
    from dense_pt.finetune.checkpoints import resolve_checkpoint

    sec = cfg["reranker"]
    if not sec["enabled"] or sec["init"] == "model":
        return None
    path = resolve_checkpoint(str(sec["init"]), None, "[reranker] init")
    if path.is_dir():
        from tokenizers import Tokenizer

        from dense_pt.data.tokenizer import vocab_hash

        init = Path(cfg["model"]["init"])
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
    return path


def _retriever_kwargs(sec: dict[str, Any]) -> dict[str, Any]:
    keys = ("group_size", "tau", "query_max_length", "passage_max_length", "epochs")
    out = {k: sec[k] for k in keys if k in sec}
    if "loss" in sec:
        out["loss"] = sec["loss"]
    return out


def _fusion(ctx: Context, folder: Path, dense: str, train_qrels: Path, k: int) -> dict:
    """Both fusions of BM25 with ``dense``'s run; the configured one is the stage's run. The
    interpolation weight is tuned on the training queries, so the dev metrics stay unbiased."""
    from dense_pt.data import load_qrels, load_run, write_run
    from dense_pt.retrieval.fusion import interpolate, rrf, tune_weight

    fu, ev = ctx.cfg["fusion"], ctx.cfg["eval"]
    sparse, dense_run = load_run(ctx.out / "bm25" / "run.trec"), load_run(ctx.out / dense / "run.trec")
    tuning = None
    weight = fu["weight"]
    if weight == "tune":
        measure = ev["measures"][0]
        weight, table = tune_weight(sparse, dense_run, load_qrels(train_qrels), measure, depth=k,
                                    tie_break=ev["tie_break"], rel_level=ev["rel_level"])  # fmt: skip
        tuning = {"measure": measure, "on": "train split", "table": {str(w): v for w, v in table.items()}}
    runs = {
        "interpolation": interpolate(sparse, dense_run, weight, k),
        "rrf": rrf([sparse, dense_run], fu["rrf_k"], k),
    }
    write_run(folder / "run.trec", runs[fu["method"]], tag=f"fused-{fu['method']}")
    dev = ctx.out / "split" / "dev.qrels"
    other = {m: _evaluate(ctx, r, dev) for m, r in runs.items() if m != fu["method"]}
    return {"metrics": _evaluate(ctx, runs[fu["method"]], dev), "dense_stage": dense, "method": fu["method"],
            "weight": weight, "rrf_k": fu["rrf_k"], "tuning": tuning, "other_methods": other}  # fmt: skip


def run_pipeline(
    config: dict[str, Any] | str | Path,
    progress: bool = True,
    stop_after: str | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Run (or continue) the whole chain; returns every stage's manifest."""
    from dense_pt.data import corpus_texts, load_qrels, load_queries, load_run, write_run
    from dense_pt.data.store import build_store_from_texts
    from dense_pt.finetune.stages import rerank_run, score, train_reranker, train_retriever
    from dense_pt.pipeline.config import load_pipeline_config, pretrain_length_note
    from dense_pt.retrieval.bm25 import bm25_run
    from dense_pt.retrieval.negatives import mine_negatives, write_negatives

    cfg = config if isinstance(config, dict) else load_pipeline_config(config)
    check_stop_after(stop_after, cfg)
    log = log or (lambda m: logs.status(f"pipeline: {m}"))
    ctx = Context(cfg, progress, stop_after, log)
    ctx.out.mkdir(parents=True, exist_ok=True)
    data, model_cfg = cfg["data"], cfg["model"]
    init = Path(model_cfg["init"])
    corpus, queries, qrels_path = Path(data["corpus"]), Path(data["queries"]), Path(data["qrels"])
    corpus_h, queries_h, qrels_h = _file_hash(corpus), _file_hash(queries), _file_hash(qrels_path)
    init_h = _model_fingerprint(init)
    rr_init = _reranker_init(cfg)
    k_eval = int(cfg["eval"]["k"])
    k_search = max(k_eval, int(cfg["mine"]["depth"]) + 10, int(cfg["reranker"]["depth"]) + 10)

    # --- store --------------------------------------------------------------------------------
    def do_store(folder: Path) -> dict:
        from dense_pt.data.tokenizer import load_tokenizer

        tok_file = init / "tokenizer.json" if init.is_dir() else None
        if tok_file is None or not tok_file.exists():
            raise DensePtError(f"{init}: the pipeline needs a model folder with tokenizer.json")
        tok = load_tokenizer(tok_file)  # padding and truncation off (MiniLM's pads to 128)
        s = build_store_from_texts(folder / "store", corpus_texts(corpus), tok,
                                   max_length=data["max_length"], force=True)  # fmt: skip
        return {"rows": len(s)}

    st = ctx.stage(
        "store",
        {"corpus": corpus_h, "model": init_h},
        {"max_length": data["max_length"], "store_version": 2},
        do_store,
    )
    store = ctx.out / "store" / "store"

    # --- split --------------------------------------------------------------------------------
    def do_split(folder: Path) -> dict:
        qrels = load_qrels(qrels_path)
        if dev_path is None:
            seed = ctx.seed if data["split_seed"] is None else data["split_seed"]
            train, dev = dev_split(list(qrels), data["dev_fraction"], seed)
        else:  # a fixed dev split (e.g. BEIR's qrels/dev.tsv): train on all of ``qrels``
            dev_judged = load_qrels(dev_path)
            overlap = set(qrels) & set(dev_judged)
            if overlap:
                raise DensePtError(f"{dev_path}: {len(overlap)} dev queries are also in {qrels_path}")
            train, dev = sorted(qrels), sorted(dev_judged)
            qrels = {**qrels, **dev_judged}
        _write_qrels(folder / "train.qrels", qrels, train)
        _write_qrels(folder / "dev.qrels", qrels, dev)
        _queries_subset(queries, folder / "dev_queries.jsonl", set(dev))
        _queries_subset(queries, folder / "judged_queries.jsonl", set(qrels))
        return {"train_queries": len(train), "dev_queries": len(dev)}

    dev_path = Path(data["dev_qrels"]) if data["dev_qrels"] is not None else None
    split_inputs = (
        {"qrels": qrels_h} if dev_path is None else {"qrels": qrels_h, "dev_qrels": _file_hash(dev_path)}
    )
    split_params = {"dev_fraction": data["dev_fraction"]} if dev_path is None else {"dev": "fixed"}
    if dev_path is None and data["split_seed"] is not None:  # a study fixes the split across seeds
        split_params["split_seed"] = data["split_seed"]
    sp = ctx.stage("split", split_inputs, split_params, do_split)
    train_qrels, dev_qrels = ctx.out / "split" / "train.qrels", ctx.out / "split" / "dev.qrels"
    judged_queries = ctx.out / "split" / "judged_queries.jsonl"
    split_in = {"split": sp["fingerprint"], "queries": queries_h}

    # --- optional pre-training ----------------------------------------------------------------
    base_model, base_fp = init, init_h
    if cfg["pretrain"]:
        pcfg = cfg["pretrain"]
        store_fp = st["fingerprint"]
        if pcfg["pmi"] is not None:
            # cdmae masks its decoder by token importance: n-gram counts of this corpus -> AMI column.
            def do_pmi(folder: Path) -> dict:
                from dense_pt.pmi import build, score

                p = pcfg["pmi"]
                built = build(store, folder / "ngrams.pmi", max_n=p["max_n"], min_count=p["min_count"],
                              memory_gb=p["memory_gb"], spill_dir=folder, progress=None)  # fmt: skip
                scored = score(store, folder / "ngrams.pmi", window=p["window"], force=True)
                return {"entries": built["entries"], "totals": built["totals"], "tokens": scored["tokens"],
                        "mean_ami": scored["mean"], "seconds": built["seconds"] + scored["seconds"]}  # fmt: skip

            pm = ctx.stage("pmi", {"store": st["fingerprint"]}, pcfg["pmi"], do_pmi)
            store_fp = pm["fingerprint"]

        def do_pretrain(folder: Path) -> dict:
            from dense_pt.pretrain import build_config, run_pretrain

            top = {"method": pcfg["method"], "paper": pcfg["paper"], "model": str(init), "corpus": str(store),
                   "out": str(folder / "run"), "max_length": pcfg["max_length"]}  # fmt: skip
            length_note = pretrain_length_note(pcfg, data["max_length"])
            log(f"[pretrain] {length_note}")
            train = {"seed": ctx.seed, **pcfg["train"]}
            pc = build_config(None, top=top, options=pcfg["options"], train=train)
            # resume=True: an interrupted stage continues from its last checkpoint.
            summary = run_pretrain(pc, resume=True, progress=ctx.progress)
            rec = summary.get("final_record") or {}
            return {"method": pc.method, "paper": pc.paper, "steps": summary["steps"], "final_loss": rec.get("loss"),
                    "max_length_source": length_note, "encoder": summary["written"]["encoder"]}  # fmt: skip

        # the method's own paper is its default: left out of the fingerprint, so stages finished
        # before ``paper`` existed are not redone
        from dense_pt.objectives import DEFAULT_PAPER

        own = pcfg["paper"] == DEFAULT_PAPER[pcfg["method"]]
        pt_params = {k: v for k, v in pcfg.items() if not (k == "paper" and own)}
        pt = ctx.stage("pretrain", {"store": store_fp, "model": init_h}, pt_params, do_pretrain)
        base_model, base_fp = ctx.out / "pretrain" / "run" / "encoder", pt["fingerprint"]

    # --- BM25 ---------------------------------------------------------------------------------
    def do_bm25(folder: Path) -> dict:
        run = bm25_run(corpus_texts(corpus), load_queries(judged_queries),
                       k=max(k_search, cfg["mine"]["bm25_depth"] + 10))  # fmt: skip
        write_run(folder / "run.trec", run, tag="bm25s")
        return {"metrics": _evaluate(ctx, run, dev_qrels)}

    bm = ctx.stage("bm25", {"corpus": corpus_h, **split_in}, {"k": k_search}, do_bm25)

    # --- zero-shot ----------------------------------------------------------------------------
    # Zero-shot encodes with the lengths R1 will train with.
    zs_params = {**cfg["encode"], **_encode_lengths(cfg["r1"])}

    def do_zeroshot(folder: Path) -> dict:
        run = _retrieve(ctx, base_model, folder, store, ctx.out / "split" / "dev_queries.jsonl", k_eval,
                        zs_params)  # fmt: skip
        return {"metrics": _evaluate(ctx, run, dev_qrels)}

    ctx.stage("zeroshot", {"model": base_fp, "store": st["fingerprint"], **split_in}, zs_params, do_zeroshot)

    train_ids = sorted(load_qrels(train_qrels))

    def mine_from(run_path: Path, out: Path, depth: int, num: int, dense: Path | None) -> dict:
        """Negatives from a run. ``dense``: the stage folder holding the run's embeddings; the
        [mine] filters apply to dense runs only (a margin in cosine units means nothing for BM25
        scores), and positives missing from the run are scored from those embeddings."""
        from dense_pt.retrieval.search import PairScorer

        m = cfg["mine"]
        filters = {}
        scorer = None
        if dense is not None:
            filters = {k: m[k] for k in ("absolute_margin", "relative_margin", "relative_form", "max_score",
                                         "min_score")}  # fmt: skip
            if m["absolute_margin"] is not None or m["relative_margin"] is not None:
                scorer = PairScorer.open(dense / "emb_queries", dense / "emb_passages")
        table = mine_negatives(load_run(run_path), load_qrels(train_qrels), depth=depth, num=num,
                               skip_top=m["skip_top"], pool=m["pool"], sampling=m["sampling"], seed=ctx.seed,
                               scorer=scorer, **filters)  # fmt: skip
        write_negatives(out, table)
        return table.stats

    def retriever_stage(name: str, sec: dict, init_model: Path, negatives_from: Path, neg_params: dict,
                        teacher: Path | None = None) -> Callable[[Path], dict]:  # fmt: skip
        def fn(folder: Path) -> dict:
            neg = None
            stats = None
            if teacher is None:
                neg = folder / "negatives.dpneg"
                if not neg.exists():
                    stats = mine_from(negatives_from, neg, neg_params["depth"], neg_params["num"], None)
            kw = _retriever_kwargs(sec)
            if teacher is not None:
                kw["alpha"] = sec["alpha"]
            m = train_retriever(init_model, store, queries, train_qrels, folder / "train", negatives=neg,
                                pooling=model_cfg["pooling"], train=_train_cfg(sec, ctx.seed),
                                restrict_to=train_ids, teacher_scores=teacher, progress=ctx.progress, **kw)  # fmt: skip
            run = _retrieve(ctx, folder / "train" / "model", folder, store, judged_queries, k_search,
                            _encode_lengths(sec))  # fmt: skip
            return {"metrics": _evaluate(ctx, run, dev_qrels), "negatives": stats, "train_steps": m["steps"],
                    "train_wall_s": m["wall_s"]}  # fmt: skip

        return fn

    # --- R1: BM25 negatives -------------------------------------------------------------------
    bm25_neg = {"depth": cfg["mine"]["bm25_depth"], "num": cfg["mine"]["num"]}
    r1 = ctx.stage("r1", {"model": base_fp, "bm25": bm["fingerprint"], "store": st["fingerprint"], **split_in},
                   {**_with_loss(cfg["r1"]), "negatives": bm25_neg, "mine": cfg["mine"]},
                   retriever_stage("r1", cfg["r1"], base_model, ctx.out / "bm25" / "run.trec", bm25_neg))  # fmt: skip

    # --- mine from R1 -------------------------------------------------------------------------
    def do_mine(folder: Path) -> dict:
        stats = mine_from(ctx.out / "r1" / "run.trec", folder / "negatives.dpneg", cfg["mine"]["depth"],
                          cfg["mine"]["num"], ctx.out / "r1")  # fmt: skip
        return {"negatives": stats}

    mi = ctx.stage("mine", {"r1": r1["fingerprint"]}, cfg["mine"], do_mine)

    # --- R2: R1-mined negatives, from the base model again ------------------------------------
    def do_r2(folder: Path) -> dict:
        shutil.copyfile(ctx.out / "mine" / "negatives.dpneg", folder / "negatives.dpneg")
        return retriever_stage("r2", cfg["r2"], base_model, Path(), {})(folder)

    r2 = ctx.stage(
        "r2", {"model": base_fp, "mine": mi["fingerprint"], **split_in}, _with_loss(cfg["r2"]), do_r2
    )

    # --- re-ranker: negatives from R2's top-k ---------------------------------------------------
    rr_sec = cfg["reranker"]
    if rr_sec["enabled"]:

        def do_reranker(folder: Path) -> dict:
            neg = folder / "negatives.dpneg"
            stats = mine_from(
                ctx.out / "r2" / "run.trec", neg, rr_sec["depth"], rr_sec["num"], ctx.out / "r2"
            )
            m = train_reranker(rr_model, store, queries, train_qrels, neg, folder / "train",
                               group_size=rr_sec["group_size"], query_max_length=rr_sec["query_max_length"],
                               max_length=rr_sec["max_length"], train=_train_cfg(rr_sec, ctx.seed),
                               restrict_to=train_ids, progress=ctx.progress, epochs=rr_sec["epochs"])  # fmt: skip
            dev = set(load_qrels(dev_qrels))
            r2run = {q: h for q, h in load_run(ctx.out / "r2" / "run.trec").items() if q in dev}
            reranked = rerank_run(folder / "train" / "model", store, queries, r2run, rr_sec["rerank_depth"])
            write_run(folder / "dev_reranked.trec", reranked)
            return {"metrics": _evaluate(ctx, reranked, dev_qrels), "negatives": stats,
                    "train_steps": m["steps"], "train_wall_s": m["wall_s"]}  # fmt: skip

        # SimLM's re-ranker starts from ELECTRA-base ([reranker] init); "model": the pipeline's model.
        rr_model, rr_fp = (base_model, base_fp) if rr_init is None else (rr_init, _model_fingerprint(rr_init))
        rr = ctx.stage("reranker", {"r2": r2["fingerprint"], "model": rr_fp, **split_in}, rr_sec, do_reranker)

        def do_score(folder: Path) -> dict:
            from dense_pt.retrieval.negatives import NegativesTable, read_negatives

            full = read_negatives(ctx.out / "reranker" / "negatives.dpneg")
            n = rr_sec["score_num"] or None  # 0: all of them (SimLM scores every mined negative)
            cut = NegativesTable({q: rows[:n] for q, rows in full.rows.items()})
            write_negatives(folder / "to_score.dpneg", cut)
            m = score(ctx.out / "reranker" / "train" / "model", store, queries, train_qrels,
                      folder / "to_score.dpneg", folder / "scores.dpneg")  # fmt: skip
            return {"pairs": m["pairs"], "meaning": m["meaning"]}

        sc = ctx.stage("score", {"reranker": rr["fingerprint"]}, {"score_num": rr_sec["score_num"]}, do_score)

        ds = cfg["distill"]
        if ds["enabled"]:
            # SimLM Figure 2: the distilled retriever starts from the pre-trained model, as R1 and R2 do.
            d_init = ctx.out / "r2" / "train" / "model" if ds["init"] == "r2" else base_model
            ctx.stage("distill", {"score": sc["fingerprint"], "r2": r2["fingerprint"], "model": base_fp, **split_in},
                      _with_loss(ds), retriever_stage("distill", ds, d_init, Path(), {}, ctx.out / "score" / "scores.dpneg"))  # fmt: skip

    # --- fusion: BM25 + the last dense retriever (hybrid retrieval) --------------------------------
    fu = cfg["fusion"]
    if fu["enabled"]:
        dense = fu["dense"] if fu["dense"] != "auto" else ("distill" if "distill" in ctx.results else "r2")
        ctx.stage("fusion", {"bm25": bm["fingerprint"], "dense": ctx.results[dense]["fingerprint"], **split_in},
                  {**fu, "dense": dense, "k": k_eval}, lambda folder: _fusion(ctx, folder, dense, train_qrels, k_eval))  # fmt: skip

    # --- report -------------------------------------------------------------------------------
    from dense_pt.pipeline.report import write_report

    write_report(ctx.out / "report", ctx.results, cfg)
    log(f"report: {ctx.out / 'report' / 'report.md'}")
    return ctx.results
