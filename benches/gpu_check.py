"""The device check (issue 22): every figure dense-pt needs from a GPU, in one command of at most ~8
minutes, on a BERT-base-shaped random model at 144 tokens in bf16 (nothing is downloaded):

* pre-training per method (mlm, cdmae, simlm with a joint generator and with a frozen
  ELECTRA-small-shaped one, seed, condenser, contrastive at 2,048 passages with ``cache_chunk``):
  sequences/s, tokens/s, model FLOP utilisation, peak GPU memory, the trainer's data stall;
* fine-tuning: the retriever at SimLM Table 13's 64 queries x 16 passages with cached gradients
  (and without, at the largest batch that fits), the re-ranker at groups of 64 x 192 tokens (its
  default loss, the authors': the group scored, a quarter of it trained twice for R-Drop) with
  gradient checkpointing at as many queries per step as fit: steps/s, peak memory, that number;
* encoding (passages/s at 144 tokens) and dense search of 10k queries over 1M random 768-d
  vectors (faiss-gpu when installed, else torch matrix products in blocks);
* the first-step loss of every pre-training method on the device (fp32 and bf16) against the same
  step on the CPU in fp32 (dropout off, the generator's samples drawn alike), to catch device-only
  bugs: a bf16 loss more than 0.5% off CPU fp32 is flagged "OFF BY x%";
* compilation (issue 28): dense-pt's mlm with ``torch_compile = "layers"`` (and its compile time:
  the first step's wall time), and the loop a user writes in ten lines (``BertForMaskedLM``, SDPA,
  bf16 autocast, fused AdamW, TF32, 15% masking in torch) at the mlm item's shapes, eager and
  ``torch.compile``d: the table gives dense-pt's mlm over it (eager over eager, compiled over compiled);
* ``--profile ITEM``: that item under ``torch.profiler``, its top 30 kernels by device time (CPU
  time on the CPU) in ``OUT/profile-ITEM.txt``.

It prints one markdown table and writes ``OUT/gpu_check.json`` after every item (a run cut short
keeps what it measured). Each item runs the code dense-pt trains with (the objectives, the native
collator on a synthetic corpus store, the ``Trainer`` with its defaults: bf16 autocast, fused
AdamW, TF32, the collation thread), for a few warm-up steps and then a few timed ones.

    python3 benches/gpu_check.py --out "$OUT"                 # the GPU machine (BENCHMARKS.md says how)
    python benches/gpu_check.py --smoke --out /tmp/gpu-check   # the same code, tiny model, CPU, < 1 min
    python3 benches/gpu_check.py --out "$OUT" --profile "simlm (frozen ELECTRA-small-shaped generator)"

MFU counts the FLOPs of the plain step (forward and backward, ``torch.utils.flop_counter`` on a
few rows, scaled to the batch; a cached step's extra graph-free forward is not model FLOPs)
against the card's dense bf16 peak (``--peak-tflops`` for a card not in ``PEAK_TFLOPS``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

# Dense bf16 peak of the cards the check may meet, TFLOP/s (vendor data sheets, without sparsity).
PEAK_TFLOPS = {
    "H100 PCIe": 756.0,
    "H100 NVL": 835.0,
    "H100": 989.0,
    "H200": 989.0,
    "A100": 312.0,
    "L40S": 362.0,
    "L4": 121.0,
}


@dataclass(frozen=True)
class Sizes:
    name: str
    model: dict  # BertConfig fields of the encoder (and of the re-ranker)
    generator: dict  # ElectraConfig fields of the frozen generator
    length: int  # pre-training and passage length
    passages: int  # synthetic corpus
    words: int  # words per passage
    pretrain_batch: int
    contrastive_batch: int
    contrastive_chunk: int
    warm: int  # steps before timing (and the trainer's log interval)
    timed: int  # timed steps, a multiple of warm
    queries: int  # retriever queries per step (Table 13)
    group: int  # passages per query (Table 13)
    query_length: int
    retriever_chunk: int
    rerank_group: int
    rerank_length: int
    encode_batch: int
    encode_batches: int
    search_queries: int
    search_docs: int
    search_dim: int
    loss_rows: int  # rows of the FLOP count and of the CPU-vs-device loss


BERT_BASE = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, max_position_embeddings=512)  # fmt: skip
ELECTRA_SMALL_GENERATOR = dict(vocab_size=30522, embedding_size=128, hidden_size=256, num_hidden_layers=12,
                               num_attention_heads=4, intermediate_size=1024, max_position_embeddings=512)  # fmt: skip
FULL = Sizes("full", BERT_BASE, ELECTRA_SMALL_GENERATOR, length=144, passages=12_000, words=150,
             pretrain_batch=128, contrastive_batch=2048, contrastive_chunk=256, warm=2, timed=6,
             queries=64, group=16, query_length=32, retriever_chunk=128, rerank_group=64, rerank_length=192,
             encode_batch=512, encode_batches=20, search_queries=10_000, search_docs=1_000_000,
             search_dim=768, loss_rows=8)  # fmt: skip
TINY = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=128,
)
SMOKE = Sizes("smoke", {**TINY, "vocab_size": 30522}, {**TINY, "vocab_size": 30522, "embedding_size": 16},
              length=32, passages=200, words=40, pretrain_batch=8, contrastive_batch=16, contrastive_chunk=4,
              warm=1, timed=2, queries=4, group=4, query_length=8, retriever_chunk=4, rerank_group=8,
              rerank_length=32, encode_batch=16, encode_batches=2, search_queries=64, search_docs=5_000,
              search_dim=32, loss_rows=4)  # fmt: skip
METHODS = [  # (label, method, options, contrastive)
    ("mlm", "mlm", {}, False),
    ("cdmae", "cdmae", {}, False),
    ("simlm (joint generator)", "simlm", {"generator": "joint"}, False),
    ("simlm (frozen ELECTRA-small-shaped generator)", "simlm", {"generator": "FROZEN"}, False),
    ("seed", "seed", {}, False),
    ("condenser", "condenser", {}, False),
    ("contrastive (cache_chunk)", "contrastive", {}, True),
]


# A bf16 first-step loss further than this from CPU fp32 is flagged (issue 28: every method within 0.5%).
LOSS_TOLERANCE = 0.005
MASK_RATE = 0.15  # the plain loop's masking: BERT's rate, every masked position [MASK]


class Enough(Exception):
    """Raised by the timing callback once the timed steps are done (no checkpoint is written)."""


@dataclass
class Context:
    sizes: Sizes
    device: torch.device
    work: Path
    out: Path
    peak_flops: float | None
    budget_s: float
    started: float = field(default_factory=time.perf_counter)
    store: Any = None
    model_json: str = ""
    generator_dir: str = ""
    unpad: str = "auto"  # TrainConfig.unpad of every item (the MS MARCO-like items set on / off)
    compile_backend: str = "inductor"  # "aot_eager" in smoke runs: the same graphs, no codegen
    profile: str | None = None  # the item run under torch.profiler (--profile)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def left(self) -> float:
        return self.budget_s - self.elapsed()


# --- helpers ----------------------------------------------------------------------------------------


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_memory(device: torch.device) -> None:
    if device.type == "cuda":  # the last item's tensors freed before the next one measures its peak
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def peak_gib(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower()


def train_config(ctx: Context, batch_size: int, **kw):
    """The engine's defaults (bf16 autocast on the GPU, fused AdamW, TF32, collation thread), a
    constant rate, the log every ``warm`` steps, no checkpoint within the check."""
    from dense_pt.training import TrainConfig

    base = dict(max_steps=10**6, batch_size=batch_size, warmup=0, schedule="constant", lr=1e-5,
                log_every=ctx.sizes.warm, save_every=10**9, seed=7, unpad=ctx.unpad)  # fmt: skip
    return TrainConfig(**{**base, **kw})


def run_steps(ctx: Context, model, cfg, source, out: Path, lr_lambda=None, resets=()) -> dict:
    """``warm`` steps, then ``timed`` timed ones through the ``Trainer``: steps/s, the trainer's
    data stall over the timed steps (its log records), peak memory."""
    from dense_pt.training import DistInfo, Trainer

    warm, timed = ctx.sizes.warm, ctx.sizes.timed
    stamps: dict[int, float] = {}

    def clock(trainer, step, record):
        if step in (warm, warm + timed):
            sync(ctx.device)
            stamps[step] = time.perf_counter()
        if step == warm + timed:
            raise Enough

    reset_memory(ctx.device)
    trainer = Trainer(model, cfg, out, source, callbacks=[clock], progress=False, dist_info=DistInfo(),
                      device=ctx.device, lr_lambda=lr_lambda, reset_optimizer_at=resets)  # fmt: skip
    with contextlib.suppress(Enough):
        trainer.train()
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    stall = [r["data_wait"] for r in records if r["step"] > warm]
    elapsed = stamps[warm + timed] - stamps[warm]
    compile_s = next((r["compile_s"] for r in records if "compile_s" in r), None)
    return {"steps_per_s": timed / elapsed, "data_stall": float(np.mean(stall)) if stall else None,
            "peak_gib": peak_gib(ctx.device), "last_loss": records[-1]["loss"], "compile_s": compile_s}  # fmt: skip


def rows_of(batch: dict, n: int) -> dict:
    return {k: v[:n] if isinstance(v, np.ndarray) and v.ndim >= 1 else v for k, v in batch.items()}


def step_flops(model, batch: dict, device: torch.device, dtype) -> float:
    """FLOPs of one forward and backward of ``model`` on ``batch`` (torch's flop counter)."""
    from torch.utils.flop_counter import FlopCounterMode

    from dense_pt.training import to_device

    model.train()
    b = to_device(batch, device)
    counter = FlopCounterMode(display=False)
    with counter, autocast(device, dtype):
        loss = model(b)["loss"]
    with counter:
        loss.backward()
    model.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())


def autocast(device: torch.device, dtype):
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


@contextlib.contextmanager
def samples_drawn_on_cpu(seed: int):
    """``torch.multinomial`` draws on the CPU from a seeded generator: the generator's replacements are
    the same on every device (the CUDA and CPU streams differ)."""
    original = torch.multinomial

    def draw(probs, n, *args, **kw):
        g = torch.Generator().manual_seed(seed)
        return original(probs.detach().float().cpu(), n, generator=g).to(probs.device)

    torch.multinomial = draw
    try:
        yield
    finally:
        torch.multinomial = original


def eval_loss(model, batch: dict, device: torch.device, dtype) -> float:
    from dense_pt.training import to_device

    model.eval()
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # fp32 means fp32 here, not TF32
    try:
        with torch.no_grad(), samples_drawn_on_cpu(0), autocast(device, dtype):
            return float(model(to_device(batch, device))["loss"])
    finally:
        torch.set_float32_matmul_precision(before)
        model.train()


# --- the synthetic corpus ---------------------------------------------------------------------------


def build_corpus(ctx: Context) -> None:
    """A store of random-word passages long enough for ``length`` tokens, its WordPiece vocabulary,
    a random importance column (cdmae's masking costs the same whatever the values), the encoder's
    config.json and the frozen generator's folder."""
    from transformers import BertConfig, ElectraConfig, ElectraForMaskedLM

    from dense_pt.data.store import build_store_from_texts
    from dense_pt.data.tokenizer import train_wordpiece

    s = ctx.sizes
    rng = np.random.default_rng(0)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lexicon = ["".join(rng.choice(letters, int(rng.integers(3, 9)))) for _ in range(5000)]
    weights = 1.0 / np.arange(1, len(lexicon) + 1)
    picks = rng.choice(len(lexicon), size=(s.passages, s.words), p=weights / weights.sum())
    docs = [(f"p{i}", " ".join(lexicon[j] for j in row)) for i, row in enumerate(picks)]
    tok = train_wordpiece((t for _, t in docs[:2000]), vocab_size=8000)
    store = build_store_from_texts(ctx.work / "store", docs, tok)
    values, offsets = store.ragged("input_ids")
    store.add_column("importance", rng.random(len(values)).astype(np.float32), offsets)
    ctx.store = store
    pad = store.special_tokens["pad"]
    ctx.model_json = str(ctx.work / "encoder.json")
    BertConfig(**s.model, pad_token_id=pad).to_json_file(ctx.model_json)
    torch.manual_seed(1)
    gen = ElectraForMaskedLM(ElectraConfig(**s.generator, pad_token_id=pad))
    gen.save_pretrained(ctx.work / "generator")
    ctx.generator_dir = str(ctx.work / "generator")


# --- the items --------------------------------------------------------------------------------------


def pretrain_item(
    ctx: Context, label: str, method: str, options: dict, contrastive: bool, **train: Any
) -> dict:
    from dense_pt.pretrain import build_config
    from dense_pt.pretrain.run import _batch_source, _build_objective

    s = ctx.sizes
    options = {k: ctx.generator_dir if v == "FROZEN" else v for k, v in options.items()}
    batch = s.contrastive_batch if contrastive else s.pretrain_batch
    extra = {**({"cache_chunk": s.contrastive_chunk} if contrastive else {}), **train}
    out = ctx.work / label.split()[0]
    shutil.rmtree(out, ignore_errors=True)
    top = {
        "method": method,
        "model": ctx.model_json,
        "corpus": str(ctx.store.path),
        "out": str(out),
        "max_length": s.length,
    }
    cfg = build_config(top=top, options=options, train={**train_config(ctx, batch, **extra).model_dump()})
    objective, _ = _build_objective(cfg, ctx.store)
    source, lr_fn, resets = _batch_source(cfg, ctx.store, None, 1)
    first = rows_of(next(iter(source.iter_epoch(0, 0, 0, 1))), s.loss_rows)
    bf16 = torch.bfloat16 if ctx.device.type == "cuda" else None
    losses = {"cpu_fp32": eval_loss(objective, first, torch.device("cpu"), None)}
    objective.to(ctx.device)
    losses["device_fp32"] = eval_loss(objective, first, ctx.device, None)
    losses["device_bf16"] = eval_loss(objective, first, ctx.device, torch.bfloat16)
    flops = step_flops(objective, first, ctx.device, bf16) * batch / s.loss_rows
    res = run_steps(ctx, objective, cfg.train, source, out, lr_fn, resets)
    seq = res["steps_per_s"] * batch
    res.update(seq_per_s=seq, tokens_per_s=seq * s.length, flops_per_step=flops, mfu=mfu(ctx, flops * res["steps_per_s"]),
               losses=losses, setting=f"batch {batch} x {s.length} tokens" + (f", cache_chunk {s.contrastive_chunk}" if contrastive else ""))  # fmt: skip
    del objective, source
    return res


def mfu(ctx: Context, flops_per_s: float) -> float | None:
    return flops_per_s / ctx.peak_flops if ctx.peak_flops else None


def retriever_source(ctx: Context, queries: int):
    from dense_pt.training import IndexedBatchSource

    s = ctx.sizes
    vocab = ctx.store.vocab_size

    def make_batch(rows: np.ndarray, epoch: int) -> dict:
        rng = np.random.default_rng([int(rows[0]), epoch])
        q = rng.integers(5, vocab, (len(rows), s.query_length))
        p = rng.integers(5, vocab, (len(rows) * s.group, s.length))
        return {"q_ids": q, "q_mask": np.ones_like(q), "p_ids": p, "p_mask": np.ones_like(p)}

    return IndexedBatchSource(queries * 100, queries, make_batch, seed=0)


def retriever_item(ctx: Context, queries: int, chunk: int) -> dict:
    from dense_pt.finetune.models import BiEncoder
    from dense_pt.models.encoder import load_encoder

    torch.manual_seed(0)
    model = BiEncoder(load_encoder(ctx.model_json), "cls", "simlm")
    cfg = train_config(ctx, queries, cache_chunk=chunk)
    out = ctx.work / f"retriever-{queries}-{chunk}"
    res = run_steps(ctx, model, cfg, retriever_source(ctx, queries), out)
    res.update(
        queries=queries,
        setting=f"{queries} x {ctx.sizes.group} passages, "
        + (f"cache_chunk {chunk}" if chunk else "uncached"),
    )
    return res


def largest_that_fits(ctx: Context, start: int, run: Callable[[int], dict]) -> dict:
    """``run(n)`` for n = start, start / 2, ... until one fits in the device's memory."""
    n = start
    while n >= 1:
        res = None
        try:
            res = run(n)
        except Exception as exc:
            if not is_oom(exc):
                raise
        if res is not None:
            return {**res, "tried_down_from": start}
        reset_memory(ctx.device)  # out of the except block: the traceback's frames (the model) are gone
        n //= 2
    raise RuntimeError(f"not even 1 fits (tried {start} down to 1)")


def reranker_item(ctx: Context, queries: int) -> dict:
    from dense_pt.finetune.models import CrossEncoder, load_cross_encoder
    from dense_pt.training import IndexedBatchSource

    s = ctx.sizes
    torch.manual_seed(0)
    model = CrossEncoder(load_cross_encoder(ctx.model_json), s.rerank_group)
    vocab = ctx.store.vocab_size

    def make_batch(rows: np.ndarray, epoch: int) -> dict:
        rng = np.random.default_rng([int(rows[0]), epoch])
        x = rng.integers(5, vocab, (len(rows) * s.rerank_group, s.rerank_length))
        types = np.zeros_like(x)
        types[:, s.query_length :] = 1
        return {"x_ids": x, "x_mask": np.ones_like(x), "x_types": types}

    cfg = train_config(ctx, queries, gradient_checkpointing=True)
    res = run_steps(
        ctx, model, cfg, IndexedBatchSource(queries * 100, queries, make_batch), ctx.work / f"rr-{queries}"
    )
    kept = f"{model.keep} per group trained twice, R-Drop" if model.loss == "simlm" else "every pair trained"
    setting = f"{queries} x {s.rerank_group} pairs x {s.rerank_length} tokens ({model.loss} loss: {kept}), checkpointing"
    res.update(queries=queries, setting=setting)
    return res


def encode_item(ctx: Context) -> dict:
    from dense_pt.models.encoder import load_encoder

    s = ctx.sizes
    torch.manual_seed(0)
    model = load_encoder(ctx.model_json).to(ctx.device).eval()
    dtype = torch.bfloat16 if ctx.device.type == "cuda" else None
    g = torch.Generator().manual_seed(0)
    batches = [
        torch.randint(5, ctx.store.vocab_size, (s.encode_batch, s.length), generator=g)
        for _ in range(s.encode_batches + 1)
    ]
    reset_memory(ctx.device)
    with torch.inference_mode(), autocast(ctx.device, dtype):
        for i, ids in enumerate(batches):
            if i == 1:  # the first batch warms up
                sync(ctx.device)
                t0 = time.perf_counter()
            ids = ids.to(ctx.device, non_blocking=True)
            model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[:, 0].float().cpu()
    sync(ctx.device)
    rate = s.encode_batch * s.encode_batches / (time.perf_counter() - t0)
    return {
        "passages_per_s": rate,
        "peak_gib": peak_gib(ctx.device),
        "setting": f"batch {s.encode_batch} x {s.length} tokens, [CLS]",
    }


def search_item(ctx: Context, k: int = 100) -> dict:
    s = ctx.sizes
    g = torch.Generator(ctx.device).manual_seed(0)
    docs = torch.randn(s.search_docs, s.search_dim, generator=g, device=ctx.device)
    queries = torch.randn(s.search_queries, s.search_dim, generator=g, device=ctx.device)
    try:
        import faiss

        gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
    except ImportError:
        gpus = 0
    reset_memory(ctx.device)
    if gpus > 0 and ctx.device.type == "cuda":
        index = faiss.GpuIndexFlatIP(faiss.StandardGpuResources(), s.search_dim)
        index.add(docs.cpu().numpy())
        host = queries.cpu().numpy()
        t0 = time.perf_counter()
        index.search(host, k)
        how = "faiss-gpu IndexFlatIP (fp32)"
    else:
        dtype = torch.float16 if ctx.device.type == "cuda" else torch.float32
        d, q = docs.to(dtype), queries.to(dtype)
        del docs
        sync(ctx.device)
        t0 = time.perf_counter()
        for a in range(0, len(q), 2048):  # [2048, docs] scores per block
            torch.topk(q[a : a + 2048] @ d.T, k, dim=1)
        sync(ctx.device)
        how = f"torch matmul + topk in blocks of 2048 queries ({str(dtype).removeprefix('torch.')})"
    wall = time.perf_counter() - t0
    return {"queries_per_s": s.search_queries / wall, "wall_s": wall, "peak_gib": peak_gib(ctx.device),
            "setting": f"{s.search_queries:,} queries x {s.search_docs:,} x {s.search_dim}-d, top {k}; {how}"}  # fmt: skip


# --- MS MARCO-like lengths, padded vs unpadded (issue 28) -------------------------------------------

# Token lengths as benches/msmarco_synth.py draws MS MARCO passages (log-normal words, mean ~56) times
# 1.25 BERT tokens per word: mean ~70 tokens, median ~62, as the store of bench_msmarco_scale.py.
TOKENS_PER_WORD = 1.25
PRETRAIN_CUT, FINETUNE_CUT = 144, 192  # the full check's cuts; a smoke run scales lengths and cuts alike
LENGTH_METHODS = [("mlm", "mlm", {}), ("simlm (frozen generator)", "simlm", {"generator": "FROZEN"})]


def msmarco_token_lengths(ctx: Context, rng: np.random.Generator, n: int) -> np.ndarray:
    """Passage lengths in tokens, [CLS] and [SEP] included, uncut (scaled to a smoke run's sizes)."""
    import msmarco_synth

    scale = ctx.sizes.length / PRETRAIN_CUT
    return (
        np.maximum(3, np.rint(msmarco_synth.passage_lengths(rng, n) * TOKENS_PER_WORD * scale)).astype(
            np.int64
        )
        + 2
    )


def msmarco_query_lengths(ctx: Context, rng: np.random.Generator, n: int) -> np.ndarray:
    import msmarco_synth as m

    words = m.Q_MIN + rng.binomial(m.Q_MAX - m.Q_MIN, m.Q_P, n)
    return np.minimum(ctx.sizes.query_length, np.rint(words * TOKENS_PER_WORD).astype(np.int64) + 2)


_STORES: dict[Path, Any] = {}  # the MS MARCO-like store of each run's work folder, built once


def msmarco_store(ctx: Context) -> Any:
    if ctx.work not in _STORES:
        _STORES[ctx.work] = build_msmarco_store(ctx)
    return _STORES[ctx.work]


def build_msmarco_store(ctx: Context) -> Any:
    """A store of random-word passages (one token a word) with MS MARCO-like token lengths."""
    from dense_pt.data.store import build_store_from_texts
    from dense_pt.data.tokenizer import train_wordpiece

    rng = np.random.default_rng(3)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lexicon = sorted({"".join(rng.choice(letters, int(rng.integers(3, 7)))) for _ in range(3000)})
    words = msmarco_token_lengths(ctx, rng, ctx.sizes.passages) - 2
    docs = [(f"p{i}", " ".join(rng.choice(lexicon, int(n)))) for i, n in enumerate(words)]
    tok = train_wordpiece((t for _, t in docs[:2000]), vocab_size=8000)
    store = build_store_from_texts(ctx.work / "store-msmarco", docs, tok)
    values, offsets = store.ragged("input_ids")
    store.add_column("importance", rng.random(len(values)).astype(np.float32), offsets)
    return store


def padding_of(lengths: np.ndarray, batch: int, cut: int, rng: np.random.Generator, draws: int = 200) -> dict:
    """Random batches of ``batch`` rows cut at ``cut`` and padded to their longest row (the
    collators' dynamic padding): real tokens per row and the share of padding."""
    rows = np.minimum(lengths[rng.integers(0, len(lengths), (draws, batch))], cut)
    real, padded = rows.sum(), (rows.max(1) * batch).sum()
    return {"real_tokens_per_seq": float(real / rows.size), "padding_fraction": float(1 - real / padded)}


def with_lengths(res: dict, pad: dict, seq_per_step: int, what: str, unpad: str) -> dict:
    seq = res["steps_per_s"] * seq_per_step
    res.update(pad, seq_per_s=seq, tokens_per_s=seq * pad["real_tokens_per_seq"], unpad=unpad)
    res["setting"] = (f"{what}, MS MARCO-like lengths ({pad['real_tokens_per_seq']:.0f} real tokens a row, "
                      f"{100 * pad['padding_fraction']:.1f}% padding), {'unpadded' if unpad == 'on' else 'padded'}")  # fmt: skip
    return res


def lengths_pretrain_item(ctx: Context, label: str, method: str, options: dict, unpad: str) -> dict:
    """``pretrain_item`` on the MS MARCO-like store; tokens/s counts real tokens."""
    import dataclasses

    store = msmarco_store(ctx)
    res = pretrain_item(dataclasses.replace(ctx, store=store, unpad=unpad), label, method, options, False)
    s = ctx.sizes
    pad = padding_of(store.lengths() + 2, s.pretrain_batch, s.length, np.random.default_rng(0))
    res["mfu"] = None  # the FLOP count is of the first rows, not of a step's real tokens
    return with_lengths(res, pad, s.pretrain_batch, f"batch {s.pretrain_batch}, cut at {s.length}", unpad)


def lengths_retriever_item(ctx: Context, unpad: str) -> dict:
    """The retriever (``queries`` x ``group``, ``cache_chunk``) on MS MARCO-like queries and passages
    cut at the fine-tuning length, each side padded to its batch's longest row."""
    import dataclasses

    from dense_pt.finetune.models import BiEncoder
    from dense_pt.models.encoder import load_encoder
    from dense_pt.training import IndexedBatchSource

    s, vocab = ctx.sizes, 8000
    cut = round(FINETUNE_CUT * s.length / PRETRAIN_CUT)

    def rows(rng: np.random.Generator, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mask = (np.arange(lengths.max())[None] < lengths[:, None]).astype(np.int64)
        return rng.integers(5, vocab, mask.shape) * mask, mask

    def make_batch(idx: np.ndarray, epoch: int) -> dict:
        rng = np.random.default_rng([int(idx[0]), epoch])
        q, qm = rows(rng, msmarco_query_lengths(ctx, rng, len(idx)))
        p, pm = rows(rng, np.minimum(cut, msmarco_token_lengths(ctx, rng, len(idx) * s.group)))
        return {"q_ids": q, "q_mask": qm, "p_ids": p, "p_mask": pm}

    torch.manual_seed(0)
    model = BiEncoder(load_encoder(ctx.model_json), "cls", "simlm")
    sub = dataclasses.replace(ctx, unpad=unpad)
    cfg = train_config(sub, s.queries, cache_chunk=s.retriever_chunk)
    out = ctx.work / f"retriever-lengths-{unpad}"
    res = run_steps(sub, model, cfg, IndexedBatchSource(s.queries * 100, s.queries, make_batch, seed=0), out)
    rng = np.random.default_rng(1)
    q = padding_of(msmarco_query_lengths(ctx, rng, 10_000), s.queries, s.query_length, rng)
    p = padding_of(msmarco_token_lengths(ctx, rng, 10_000), s.queries * s.group, cut, rng)
    n_q, n_p = s.queries, s.queries * s.group
    real = (q["real_tokens_per_seq"] * n_q + p["real_tokens_per_seq"] * n_p) / (n_q + n_p)
    padded = q["real_tokens_per_seq"] * n_q / (1 - q["padding_fraction"]) + p["real_tokens_per_seq"] * n_p / (
        1 - p["padding_fraction"]
    )
    pad = {"real_tokens_per_seq": real, "padding_fraction": 1 - real * (n_q + n_p) / padded}
    res["queries"] = s.queries
    what = f"{s.queries} x {s.group} passages cut at {cut}, cache_chunk {s.retriever_chunk}"
    return with_lengths(res, pad, n_q + n_p, what, unpad)


def length_items(ctx: Context) -> list[tuple[str, str, Callable[[], dict]]]:
    """Padded and unpadded rows of mlm, simlm (frozen generator) and the retriever on MS MARCO-like
    lengths (``--only lengths``)."""
    out: list[tuple[str, str, Callable[[], dict]]] = []
    for unpad, how in (("off", "padded"), ("on", "unpadded")):
        out += [
            ("lengths", f"{label}, MS MARCO-like, {how}",
             functools.partial(lengths_pretrain_item, ctx, label, method, options, unpad))
            for label, method, options in LENGTH_METHODS
        ]  # fmt: skip
        out.append(
            (
                "lengths",
                f"retriever, MS MARCO-like, {how}",
                functools.partial(lengths_retriever_item, ctx, unpad),
            )
        )
    return out


# --- compilation: dense-pt's mlm compiled, and the plain Hugging Face loop ---------------------------


def compiled_mlm_item(ctx: Context) -> dict:
    """dense-pt's mlm item with ``torch_compile = "layers"`` (the regional compile)."""
    import dense_pt.training.switches as switches

    switches.COMPILE_BACKEND = ctx.compile_backend
    res = pretrain_item(ctx, "mlm-compiled", "mlm", {}, False, torch_compile="layers")
    res["setting"] += ", torch_compile layers"
    return res


def plain_tokens(ctx: Context) -> torch.Tensor:
    """[CLS] the first ``length`` - 2 tokens [SEP] of every synthetic passage (all are longer)."""
    s = ctx.sizes
    values, offsets = ctx.store.ragged("input_ids")
    special = ctx.store.special_tokens
    rows = np.full((len(offsets) - 1, s.length), special["sep"], dtype=np.int64)
    rows[:, 0] = special["cls"]
    for i in range(len(rows)):
        rows[i, 1 : s.length - 1] = values[offsets[i] : offsets[i] + s.length - 2]
    return torch.from_numpy(rows)


def plain_loop_item(ctx: Context, compiled: bool) -> dict:
    """The ten-line loop a user writes: ``BertForMaskedLM`` (SDPA) on the mlm item's shapes, 15% of
    the tokens [MASK]ed in torch, bf16 autocast, fused AdamW and TF32 on a GPU, ``torch.compile``
    of the whole model when ``compiled``. Its compile time is the first step's wall time."""
    from transformers import BertConfig, BertForMaskedLM

    s, dev = ctx.sizes, ctx.device
    torch.manual_seed(0)
    config = BertConfig(**s.model, pad_token_id=ctx.store.special_tokens["pad"], attn_implementation="sdpa")
    model = BertForMaskedLM(config).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=dev.type == "cuda")
    if dev.type == "cuda":
        torch.set_float32_matmul_precision("high")
    step_fn = torch.compile(model, backend=ctx.compile_backend) if compiled else model
    tokens, mask_id = plain_tokens(ctx), ctx.store.special_tokens["mask"]
    cls, sep = ctx.store.special_tokens["cls"], ctx.store.special_tokens["sep"]
    g = torch.Generator().manual_seed(0)

    def one_step() -> torch.Tensor:
        ids = tokens[torch.randint(len(tokens), (s.pretrain_batch,), generator=g)].to(dev, non_blocking=True)
        masked = (torch.rand(ids.shape, device=dev) < MASK_RATE) & (ids != cls) & (ids != sep)
        with autocast(dev, torch.bfloat16 if dev.type == "cuda" else None):
            loss = step_fn(input_ids=ids.masked_fill(masked, mask_id), attention_mask=torch.ones_like(ids),
                           labels=ids.masked_fill(~masked, -100)).loss  # fmt: skip
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    reset_memory(dev)
    sync(dev)
    t0 = time.perf_counter()
    one_step()  # compiles when compiled
    sync(dev)
    first_s = time.perf_counter() - t0
    for _ in range(s.warm - 1):
        one_step()
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(s.timed):
        loss = one_step()
    sync(dev)
    seq = s.pretrain_batch * s.timed / (time.perf_counter() - t0)
    return {"seq_per_s": seq, "tokens_per_s": seq * s.length, "peak_gib": peak_gib(dev), "last_loss": float(loss),
            "compile_s": first_s if compiled else None,
            "setting": f"BertForMaskedLM, batch {s.pretrain_batch} x {s.length} tokens, 15% [MASK]"
            + (", torch.compile" if compiled else "")}  # fmt: skip


def with_ratios(results: list[dict]) -> None:
    """dense-pt's mlm over the plain loop, eager over eager and compiled over compiled, on the mlm rows."""
    rate = {r["item"]: r.get("seq_per_s") for r in results}
    pairs = {"mlm": "plain loop (HF), eager", "mlm (torch_compile layers)": "plain loop (HF), compiled"}
    for r in results:
        plain = rate.get(pairs.get(r["item"], ""))
        if plain and r.get("seq_per_s"):
            r["vs_plain"] = r["seq_per_s"] / plain


def loss_check(r: dict) -> str:
    """'ok' when the device's bf16 first-step loss lies within ``LOSS_TOLERANCE`` of CPU fp32."""
    loss = r.get("losses")
    if not loss:
        return ""
    off = abs(loss["device_bf16"] - loss["cpu_fp32"]) / max(abs(loss["cpu_fp32"]), 1e-12)
    return "ok" if off <= LOSS_TOLERANCE else f"OFF BY {100 * off:.2f}%"


def slug(label: str) -> str:
    return "-".join("".join(c if c.isalnum() else " " for c in label.lower()).split())


def profiled(ctx: Context, label: str, fn: Callable[[], dict]) -> dict:
    """``fn`` under torch.profiler; its top 30 kernels (by device time on a GPU, by CPU time on the
    CPU) into ``OUT/profile-ITEM.txt``."""
    from torch.profiler import ProfilerActivity, profile

    cuda = ctx.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        res = fn()
    sort = "self_device_time_total" if cuda else "self_cpu_time_total"
    path = ctx.out / f"profile-{slug(label)}.txt"
    path.write_text(
        f"{label}: {res.get('setting', '')}\n\n" + prof.key_averages().table(sort_by=sort, row_limit=30)
    )
    return {**res, "profile": str(path)}


# --- the run ----------------------------------------------------------------------------------------


def items(ctx: Context) -> list[tuple[str, str, Callable[[], dict]]]:
    s = ctx.sizes
    out: list[tuple[str, str, Callable[[], dict]]] = [
        ("pretrain", label, functools.partial(pretrain_item, ctx, label, m, o, c))
        for label, m, o, c in METHODS
    ]
    out += [
        ("finetune", "retriever, cached", lambda: retriever_item(ctx, s.queries, s.retriever_chunk)),
        ("finetune", "retriever, uncached", lambda: largest_that_fits(ctx, s.queries, lambda n: retriever_item(ctx, n, 0))),
        ("finetune", "re-ranker", lambda: largest_that_fits(ctx, s.queries, lambda n: reranker_item(ctx, n))),
        ("encode", "encoding", lambda: encode_item(ctx)),
        ("search", "dense search", lambda: search_item(ctx)),
    ]  # fmt: skip
    out += [
        ("compile", "mlm (torch_compile layers)", lambda: compiled_mlm_item(ctx)),
        ("compile", "plain loop (HF), eager", lambda: plain_loop_item(ctx, compiled=False)),
        ("compile", "plain loop (HF), compiled", lambda: plain_loop_item(ctx, compiled=True)),
    ]
    out += length_items(ctx)
    return out


def environment(ctx: Context) -> dict:
    import transformers

    import dense_pt

    dev = (
        torch.cuda.get_device_name(ctx.device)
        if ctx.device.type == "cuda"
        else f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"
    )
    return {"device": dev, "sizes": ctx.sizes.name, "torch": torch.__version__, "transformers": transformers.__version__,
            "dense_pt": dense_pt.__version__, "python": sys.version.split()[0], "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "peak_tflops": None if ctx.peak_flops is None else ctx.peak_flops / 1e12}  # fmt: skip


def fmt(value: Any, spec: str = ",.0f", suffix: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:{spec}}{suffix}"


EXTRA_COLUMNS = ("bf16 loss vs CPU fp32", "compile time", "x plain loop (HF)")


def extra_cells(r: dict) -> list[str]:
    """Issue 28's columns: the first-step loss check, the compile time, dense-pt's mlm over the plain loop."""
    return [loss_check(r), fmt(r.get("compile_s"), ".1f", " s"), fmt(r.get("vs_plain"), ".2f", "x")]


def table(results: list[dict]) -> str:
    lines = ["| item | setting | throughput | tokens/s | MFU | peak memory | data stall | first-step loss: CPU fp32 / device fp32 / device bf16 | "
             + " | ".join(EXTRA_COLUMNS) + " |", "|---|---|---:|---:|---:|---:|---:|---|" + "---:|" * len(EXTRA_COLUMNS)]  # fmt: skip
    for r in results:
        if "error" in r or "skipped" in r:
            lines.append(
                f"| {r['item']} | {r.get('skipped') or r['error'].splitlines()[-1][:120]} | | | | | | |"
                + " |" * len(EXTRA_COLUMNS)
            )
            continue
        if "seq_per_s" in r:
            rate = f"{fmt(r['seq_per_s'])} seq/s"
        elif "queries" in r:
            rate = f"{fmt(r['steps_per_s'], '.2f')} steps/s ({r['queries']} queries/step)"
        elif "passages_per_s" in r:
            rate = f"{fmt(r['passages_per_s'])} passages/s"
        else:
            rate = f"{fmt(r['queries_per_s'])} queries/s"
        loss = r.get("losses")
        losses = (
            f"{loss['cpu_fp32']:.4f} / {loss['device_fp32']:.4f} / {loss['device_bf16']:.4f}" if loss else ""
        )
        stall = fmt(None if r.get("data_stall") is None else 100 * r["data_stall"], ".2f", "%")
        lines.append(f"| {r['item']} | {r['setting']} | {rate} | {fmt(r.get('tokens_per_s'))} | "
                     f"{fmt(None if r.get('mfu') is None else 100 * r['mfu'], '.1f', '%')} | {fmt(r.get('peak_gib'), '.1f', ' GiB')} | {stall} | {losses} | "
                     + " | ".join(extra_cells(r)) + " |")  # fmt: skip
    return "\n".join(lines)


def run(ctx: Context, only: list[str] | None) -> dict:
    report: dict[str, Any] = {"environment": environment(ctx), "results": []}
    path = ctx.out / "gpu_check.json"

    def save() -> None:
        tmp = path.with_suffix(".json.partial")
        tmp.write_text(json.dumps(report, indent=1))
        os.replace(tmp, path)

    t = time.perf_counter()
    build_corpus(ctx)
    report["environment"]["corpus_s"] = round(time.perf_counter() - t, 1)
    chosen = items(ctx)
    if only:  # the groups in the order given: what a short budget must reach goes first
        chosen = sorted((i for i in chosen if i[0] in only), key=lambda i: only.index(i[0]))
    for group, label, fn in chosen:
        entry: dict[str, Any] = {"group": group, "item": label}
        if ctx.left() < 10:
            entry["skipped"] = "skipped: the time budget ran out"
        else:
            t = time.perf_counter()
            try:
                entry.update(profiled(ctx, label, fn) if ctx.profile == label else fn())
            except Exception:
                entry["error"] = traceback.format_exc()
            entry["wall_s"] = round(time.perf_counter() - t, 1)
            reset_memory(ctx.device)
        report["results"].append(entry)
        shown = json.dumps({k: v for k, v in entry.items() if k != "error"}, default=str)[:300]
        print(f"[{ctx.elapsed():.0f} s] {shown}", file=sys.stderr, flush=True)
        save()
    with_ratios(report["results"])
    report["table"] = table(report["results"])
    save()
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="a tiny model on the CPU, the same code (< 1 min)")
    ap.add_argument(
        "--out", type=Path, default=Path(os.environ.get("OUT", ".")), help="where gpu_check.json goes ($OUT)"
    )
    ap.add_argument("--device", default=None, help="cuda (default when there is one) or cpu")
    ap.add_argument("--budget-s", type=float, default=420.0, help="items not started by then are skipped")
    ap.add_argument("--peak-tflops", type=float, default=None, help="the card's dense bf16 peak (MFU)")
    ap.add_argument(
        "--only",
        default="",
        help="comma list of groups, run in that order: pretrain, finetune, encode, search, compile, lengths",
    )
    ap.add_argument(
        "--profile",
        default=None,
        metavar="ITEM",
        help="run ITEM (its label) under torch.profiler: OUT/profile-ITEM.txt",
    )
    ap.add_argument(
        "--threads", type=int, default=0, help="torch CPU threads (default: torch's; 1 with --smoke)"
    )
    args = ap.parse_args()
    if args.threads or args.smoke:  # a smoke run shares a test machine: one thread spins least
        torch.set_num_threads(args.threads or 1)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() and not args.smoke else "cpu"))
    peak = args.peak_tflops
    if peak is None and device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        peak = next((v for k, v in PEAK_TFLOPS.items() if all(w in name for w in k.split())), None)
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    ctx = Context(SMOKE if args.smoke else FULL, device, work, args.out, None if peak is None else peak * 1e12,
                  args.budget_s)  # fmt: skip
    ctx.compile_backend = "aot_eager" if args.smoke else "inductor"  # inductor's CPU codegen takes minutes
    ctx.profile = args.profile
    if args.profile and args.profile not in {label for _, label, _ in items(ctx)}:
        ap.error(
            f"--profile: no item {args.profile!r} (the labels: {', '.join(label for _, label, _ in items(ctx))})"
        )
    try:
        report = run(ctx, [g for g in args.only.split(",") if g] or None)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"\n{report['environment']['device']}, torch {report['environment']['torch']}, {report['environment']['date']}\n"
    )
    print(report["table"])
    failed = [r["item"] for r in report["results"] if "error" in r]
    if failed:
        print(f"\nfailed: {', '.join(failed)} (tracebacks in {args.out / 'gpu_check.json'})", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
