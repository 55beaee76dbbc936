"""End to end under ``torchrun --nproc_per_node 2`` (gloo, CPU): a few optimiser steps of
``dense-pt pretrain --method contrastive`` and ``dense-pt train retriever`` end with the same
weights as one process over the same global batch (batch size doubled), and so does the retriever
with cached gradients (``--cache-chunk``). Process r of 2 takes batches
r, r + 2, ... of the seeded epoch order, so round k of the two processes is batch k of the single one.
Tiny random models without dropout; the gradient-level check of every loss is
``test_distributed_losses.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from dense_pt.cli import app

STEPS = 3


def torchrun(args: list[str], cwd: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "dense_pt", *args]  # fmt: skip
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def train_table(lr: float) -> str:
    """The engine settings of both runs (see ``assert_same_training`` for adam_eps and weight_decay)."""
    return (
        f"[train]\nmax_steps = {STEPS}\nlr = {lr}\nwarmup = 0\nschedule = 'constant'\nadam_eps = 1.0\n"
        "weight_decay = 0.0\nnum_workers = 0\nthreads = 1\nsave_every = 100\nprecision = 'fp32'\nseed = 3\n"
    )


def one_process(args: list[str]) -> None:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, (res.output, res.exception)


def weights(folder: Path) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for f in sorted(folder.rglob("*.safetensors")):
        out.update({f"{f.relative_to(folder)}:{k}": v for k, v in load_file(f).items()})
    assert out, f"no weights under {folder}"
    return out


def max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def assert_same_training(two: list[Path], one: list[Path], start: Path) -> None:
    """The weights the 2-process run wrote (folders ``two``) equal the 1-process run's (``one``) up
    to float32 rounding: the norm of their difference against the norm of the training update."""
    w0, w1 = weights(start), weights(one[0])
    update = sum(float(((w1[k] - w0[k]) ** 2).sum()) for k in w0) ** 0.5
    diff = sum(float(((wa[k] - wb[k]) ** 2).sum()) for a, b in zip(two, one, strict=True)
               for wa, wb in [(weights(a), weights(b))] for k in wb) ** 0.5  # fmt: skip
    # The configs make a weight difference a gradient difference: Adam with eps 1 moves a weight by
    # ~lr * its gradient (with the default 1e-8 its sensitivity lr / eps would amplify the float32
    # rounding of near-zero components, summed in another order by 1 and 2 processes; no weight
    # decay). Measured ratio here 1e-6 to 6e-5; 0.3 for the retriever with the old local-query losses.
    assert update > 1e-3, "the runs did not train"
    assert diff < 1e-3 * update, f"2 processes vs 1: |w2 - w1| = {diff:.3g} for |w1 - w0| = {update:.3g}"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The synthetic corpus, its store and a tiny BERT without dropout (so 1 and 2 processes draw
    nothing at random that could differ)."""
    from transformers import BertConfig, BertModel

    from retrieval_fixtures import tiny_setup

    root = tmp_path_factory.mktemp("ddp-e2e")
    beir, model, store, _, _ = tiny_setup(root)
    # No dropout; a wide init so that the [CLS] vectors of different texts are far from parallel
    # (at the default 0.02 they are nearly parallel, and float32 rounding of the differences
    # between near-equal terms would dominate the comparison).
    cfg = BertConfig.from_pretrained(model)
    cfg.update({"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "initializer_range": 0.5})
    torch.manual_seed(0)
    BertModel(cfg).save_pretrained(model)
    return root, beir, model, store


def test_pretrain_contrastive_two_processes_equal_one(tiny):
    root, _, model, store = tiny
    # Passages cropped to 8 content tokens: every row masks the same number of tokens, so the
    # per-process MLM means average to the global mean and only the gathered loss is under test.
    (root / "pretrain.toml").write_text(
        f"method = 'contrastive'\nmodel = '{model}'\ncorpus = '{store}'\nmax_length = 10\n" + train_table(1.0)
    )
    conf = str(root / "pretrain.toml")
    torchrun(["pretrain", "--config", conf, "--batch-size", "4", "--out", str(root / "pt2")], root)
    one_process(["pretrain", "--config", conf, "--batch-size", "8", "--out", str(root / "pt1")])
    log2 = [json.loads(x) for x in (root / "pt2" / "log.jsonl").read_text().splitlines()]
    log1 = [json.loads(x) for x in (root / "pt1" / "log.jsonl").read_text().splitlines()]
    assert log2[-1]["step"] == log1[-1]["step"] == STEPS
    assert log2[-1]["loss_con"] == pytest.approx(log1[-1]["loss_con"], rel=1e-4)  # the global loss
    parts = ("encoder", "decoder")
    assert_same_training([root / "pt2" / p for p in parts], [root / "pt1" / p for p in parts], model)


def test_train_retriever_two_processes_equal_one(tiny):
    root, beir, model, store = tiny
    (root / "retriever.toml").write_text(train_table(10.0))
    common = ["train", "retriever", str(model), "--corpus", str(store), "--queries", str(beir / "queries.jsonl"),
              "--qrels", str(beir / "qrels" / "train.tsv"), "--config", str(root / "retriever.toml"),
              "--group-size", "3", "--query-max-length", "8", "--passage-max-length", "16"]  # fmt: skip
    torchrun([*common, "--batch-size", "2", "--out", str(root / "r2")], root)
    one_process([*common, "--batch-size", "4", "--out", str(root / "r1")])
    assert_same_training([root / "r2" / "model"], [root / "r1" / "model"], model)
    # cached gradients (2 queries of 3 passages per process in uneven chunks of 4, negatives gathered,
    # one gradient all-reduce): the same weights as one uncached process
    torchrun([*common, "--batch-size", "2", "--cache-chunk", "4", "--out", str(root / "c2")], root)
    assert json.loads((root / "c2" / "manifest.json").read_text())["settings"]["train"]["cache_chunk"] == 4
    assert_same_training([root / "c2" / "model"], [root / "r1" / "model"], model)
