"""Torch threads for `dense-pt demo` (issue 14 item 9): training steps per second of the demo's tiny
encoder (dense_pt.demo.tiny.tiny_bert_config) on a retriever-shaped batch (8 queries of 16 tokens,
32 passages of 48: the demo's R1 batch, group size 4), with 1 and 2 torch threads, alone and with
CPU-bound jobs beside it (``python -c 'while True: pass'``, started here, stopped after).

    OMP_NUM_THREADS=1 python benches/bench_demo_threads.py [--steps 40] [--busy 1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time


def steps_per_second(threads: int, steps: int) -> float:
    import torch
    from transformers import BertConfig, BertModel

    from dense_pt.demo.tiny import tiny_bert_config

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = BertModel(BertConfig(**{k: v for k, v in tiny_bert_config(3000, 0).items() if k != "model_type"}))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    q = torch.randint(5, 3000, (8, 16))
    p = torch.randint(5, 3000, (32, 48))

    def step() -> None:
        qv = model(input_ids=q).last_hidden_state[:, 0]
        pv = model(input_ids=p).last_hidden_state[:, 0]
        loss = torch.nn.functional.cross_entropy(qv @ pv.T, torch.arange(8) * 4)
        loss.backward()
        opt.step()
        opt.zero_grad()

    for _ in range(3):  # warm-up
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return steps / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--busy", type=int, default=1, help="CPU-bound jobs beside it in the loaded runs")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f}", flush=True)
    for loaded in (False, True):
        jobs = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.busy if loaded else 0)
        ]
        try:
            for threads in (1, 2) * args.repeats:
                rate = steps_per_second(threads, args.steps)
                label = f"{args.busy} busy job(s) beside" if loaded else "alone"
                print(
                    f"{label:>22}  threads {threads}: {rate:6.2f} steps/s  (load {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
        finally:
            for j in jobs:
                j.kill()
                j.wait()


if __name__ == "__main__":
    main()
