"""Cached gradients (``cache_chunk``) against the plain step on one large batch, CPU: the step's peak
memory above the model and optimiser, and the step time, side by side in one run.

    python benches/bench_cached_gradients.py [--batch 128] [--chunk 16] [--repeats 3] [--threads 1]

Two losses with in-batch negatives on a small random BERT (2 layers x 256, vocabulary 8,000,
dropout 0.1, fp32): the retriever (``simlm`` loss, batch/8 queries of 32 tokens x 8 passages of
144) and contrastive pre-training (``batch`` passages of 144 tokens with 15% MLM targets + a span of
64 tokens each). Each (loss, chunk) runs in processes of its own, alternating:

* memory, one process each: a warm-up step (AdamW's moments allocated), then one step measured as
  the rise of the resident set over it (``VmHWM`` reset through ``/proc/self/clear_refs`` just
  before), glibc's mmap threshold fixed at 64 KiB from the start (``MALLOC_MMAP_THRESHOLD_``) so
  that freed tensors leave the resident set. The rise includes the gradient buffers (the same for
  both, printed); "activations" is the rise minus them;
* time, ``--repeats`` processes each (the allocator as it is): a warm-up step, then ``--steps``
  timed steps. With one torch thread the process's CPU time is the step's work whatever else
  shares the machine: its median is the figure; the wall-clock ratio (median, and best step) is
  printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

LAYERS, HIDDEN, VOCAB, LENGTH, QUERY, SPAN, GROUP = 2, 256, 8000, 144, 32, 64, 8


def rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def build(case: str):
    import torch
    from transformers import BertConfig, BertModel

    from dense_pt.finetune.models import BiEncoder
    from dense_pt.objectives import MethodOptions, SpecialIds, build_objective, resolve_options

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=4,
                     intermediate_size=4 * HIDDEN, max_position_embeddings=256)  # fmt: skip
    encoder = BertModel(cfg, add_pooling_layer=False)
    if case == "retriever":
        return BiEncoder(encoder, "cls", "simlm").train()
    special = SpecialIds(cls=2, sep=3, pad=0, mask=4, unk=1, vocab_size=VOCAB)
    return build_objective(
        "contrastive", encoder, special, resolve_options("contrastive", MethodOptions())
    ).train()


def make_batch(case: str, batch: int, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)

    def ids(rows: int, length: int):
        x = torch.randint(5, VOCAB, (rows, length), generator=g)
        x[:, 0], x[:, -1] = 2, 3
        return x, torch.ones_like(x)

    if case == "retriever":
        q, qm = ids(batch // GROUP, QUERY)
        p, pm = ids(batch, LENGTH)
        return {"q_ids": q, "q_mask": qm, "p_ids": p, "p_mask": pm}
    x, xm = ids(batch, LENGTH)
    labels = torch.where(torch.rand(x.shape, generator=g) < 0.15, x, torch.full_like(x, -100))
    labels[:, 0] = labels[:, -1] = -100
    c, cm = ids(batch, SPAN)
    return {
        "input_ids": x,
        "attention_mask": xm,
        "labels": labels,
        "ctx_input_ids": c,
        "ctx_attention_mask": cm,
    }


def _step(model, opt, data, chunk: int) -> tuple[float, float]:
    """(wall, CPU) seconds of one step."""
    import time

    from dense_pt.training.cache import cached_backward

    opt.zero_grad(set_to_none=True)
    t0, c0 = time.perf_counter(), time.process_time()
    if chunk:
        cached_backward(model, data, chunk)
    else:
        model(data)["loss"].backward()
    opt.step()
    return time.perf_counter() - t0, time.process_time() - c0


def worker(case: str, batch: int, chunk: int, steps: int, memory: bool) -> dict:
    """A warm-up step, then ``steps`` timed steps, or (``memory``) one step measured for memory."""
    import gc

    from dense_pt.training import TrainConfig, build_optimizer

    model = build(case)
    opt = build_optimizer(model, TrainConfig(lr=1e-5))
    grads_mib = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad) / 2**20
    _step(model, opt, make_batch(case, batch, seed=0), chunk)  # AdamW's moments allocated
    out = {"case": case, "chunk": chunk, "grads_mib": grads_mib}
    if not memory:
        timed = [_step(model, opt, make_batch(case, batch, seed=1 + i), chunk) for i in range(steps)]
        out["step_s"], out["cpu_s"] = [w for w, _ in timed], [c for _, c in timed]
        return out
    data = make_batch(case, batch, seed=99)
    opt.zero_grad(set_to_none=True)
    gc.collect()
    base = rss_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    _step(model, opt, data, chunk)
    out["rise_mib"] = (rss_kib("VmHWM") - base) / 1024
    return out


def _run(args, case: str, chunk: int, memory: bool) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    if memory:
        env["MALLOC_MMAP_THRESHOLD_"] = "65536"
    cmd = [sys.executable, __file__, "--worker", case, str(chunk), "--batch", str(args.batch),
           "--steps", str(args.steps), "--threads", str(args.threads)] + (["--memory"] if memory else [])  # fmt: skip
    res = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
    print(f"{case} chunk {chunk}: {res}", file=sys.stderr)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=128, help="passages per step")
    ap.add_argument("--chunk", type=int, default=16, help="sequences per encoder call (default: batch / 8)")
    ap.add_argument("--steps", type=int, default=2, help="timed steps per process")
    ap.add_argument("--repeats", type=int, default=3, help="timing processes per (loss, chunk), alternating")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--worker", nargs=2, metavar=("CASE", "CHUNK"), help=argparse.SUPPRESS)
    ap.add_argument("--memory", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        import torch

        torch.set_num_threads(args.threads)
        print(json.dumps(worker(args.worker[0], args.batch, int(args.worker[1]), args.steps, args.memory)))
        return
    cases, chunks = ("retriever", "contrastive"), (0, args.chunk)
    mem = {(c, k): _run(args, c, k, memory=True) for c in cases for k in chunks}
    wall: dict[tuple[str, int], list[float]] = {}
    cpu: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.repeats):
        for c in cases:
            for k in chunks:
                res = _run(args, c, k, memory=False)
                wall.setdefault((c, k), []).extend(res["step_s"])
                cpu.setdefault((c, k), []).extend(res["cpu_s"])
    print(f"batch {args.batch} passages of {LENGTH} tokens, chunk {args.chunk} (1/{args.batch // args.chunk}), "
          f"{LAYERS} x {HIDDEN} BERT, {args.threads} thread(s); time: medians of {args.repeats} processes "
          f"x {args.steps} steps\n")  # fmt: skip
    print("| loss | step peak, plain | step peak, cached | activations, plain | activations, cached | "
          "activation ratio | step CPU time, plain / cached | CPU time ratio | wall time ratio, median (best) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in cases:
        grads = mem[(c, 0)]["grads_mib"]
        rise = [mem[(c, k)]["rise_mib"] for k in chunks]
        act = [r - grads for r in rise]
        cm = [statistics.median(cpu[(c, k)]) for k in chunks]
        wm = [statistics.median(wall[(c, k)]) for k in chunks]
        wb = [min(wall[(c, k)]) for k in chunks]
        print(f"| {c} | {rise[0]:,.0f} MiB | {rise[1]:,.0f} MiB | {act[0]:,.0f} MiB | {act[1]:,.0f} MiB | "
              f"{act[0] / act[1]:.1f}x | {cm[0]:.2f} s / {cm[1]:.2f} s | {cm[1] / cm[0]:.2f}x | "
              f"{wm[1] / wm[0]:.2f}x ({wb[1] / wb[0]:.2f}x) |")  # fmt: skip
    buffers = ", ".join(f"{c} {mem[(c, 0)]['grads_mib']:.0f} MiB" for c in cases)
    print(f"\n(gradient buffers, the same with and without caching: {buffers})")


if __name__ == "__main__":
    main()
