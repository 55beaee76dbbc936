"""Cached contrastive gradients (``dense_pt.training.cache``, ``cache_chunk``) are the full-batch
gradient, exactly: for every loss with in-batch negatives (the retriever losses, distillation's
contrastive term, contrastive pre-training with its MLM terms, and the triplet loss), on a tiny
random BERT in float64 (relative error < 1e-6; in practice ~1e-15), with uneven chunks.

* dropout off: against the plain full-batch step ``model(batch)``;
* dropout on: against the full-batch gradient of the masks the cached step draws (each chunk's
  masks fixed by the RNG state its first pass started from, the whole batch back-propagated as one
  graph): a cached step that did not replay the masks is off by far more (checked);
* 2 gloo processes with gathered negatives, against one process on the global batch;
* the trainer: a cached run and an uncached one reach the same weights (and with accumulation
  where the loss allows it); the switch is refused where the loss has nothing to cache.

The SIGKILL-and-resume check of a cached run is ``test_cached_run_resumes_bit_identical``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # the CI machine is shared: idle-spinning thread pools cost far more than they give

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from dense_pt.errors import InvalidArgumentError  # noqa: E402
from dense_pt.training.cache import RngState, all_reduce_gradients, cached_backward  # noqa: E402
from training_helpers import CASES, B, build, global_batch, gradient, local_part, rel  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 4  # rows per encoder call: uneven chunks of the 6 queries, 18 passages
TOL = 1e-6


def fixed_mask_reference(model, batch: dict, chunk: int) -> dict:
    """The full-batch gradient of the masks a cached step draws, computed independently of
    ``cached_backward``: the RNG state each chunk's first (graph-free) pass starts from, then every
    chunk encoded with autograd from its state and the whole batch back-propagated as one graph."""
    parts = model.cache_parts(batch)
    states = []
    with torch.no_grad():
        for name, rows in parts.items():
            for i in range(0, len(next(iter(rows.values()))), chunk):
                states.append(torch.get_rng_state())
                model.represent(name, {k: v[i : i + chunk] for k, v in rows.items()}, batch, terms=False)
    after = torch.get_rng_state()
    reps, terms, k = {}, [], 0
    for name, rows in parts.items():
        pieces = []
        for i in range(0, len(next(iter(rows.values()))), chunk):
            torch.set_rng_state(states[k])
            k += 1
            out = model.represent(name, {key: v[i : i + chunk] for key, v in rows.items()}, batch, terms=True)
            pieces.append(out.pop("rep"))
            terms += list(out.values())
        reps[name] = torch.cat(pieces)
    res = model.coupled_loss(reps, batch)
    (res["loss"] + sum(terms)).backward()
    torch.set_rng_state(after)
    return res


@pytest.mark.parametrize("case", CASES)
def test_cached_gradient_equals_full_batch_gradient_without_dropout(case):
    batch = global_batch(case)
    full = build(case)
    out = full(batch)
    out["loss"].backward()
    cached = build(case)
    got = cached_backward(cached, batch, CHUNK)
    err = rel(gradient(cached), gradient(full))
    print(f"{case}: relative gradient error {err:.3g} (dropout off)")
    assert err < TOL
    assert float(got["loss"]) == pytest.approx(float(out["loss"].detach()), rel=1e-12)
    assert set(got) == set(out)  # the same parts logged (loss_enc, loss_dec, loss_con ...)


@pytest.mark.parametrize("case", CASES)
def test_cached_gradient_with_dropout_replays_the_masks(case):
    batch = global_batch(case)
    ref = build(case, dropout=0.2)
    torch.manual_seed(5)
    fixed_mask_reference(ref, batch, CHUNK)
    after_ref = torch.get_rng_state()
    cached = build(case, dropout=0.2)
    torch.manual_seed(5)
    cached_backward(cached, batch, CHUNK)
    err = rel(gradient(cached), gradient(ref))
    print(f"{case}: relative gradient error {err:.3g} (dropout 0.2, masks replayed)")
    assert err < TOL
    # the RNG goes on from where the graph-free pass left it: a resumed run draws the same
    assert torch.equal(torch.get_rng_state(), after_ref)
    # dropout was on: the gradient is not the dropout-free one
    plain = build(case)
    plain(batch)["loss"].backward()
    assert rel(gradient(plain), gradient(ref)) > 1e-3


def test_without_replaying_the_masks_the_gradient_is_wrong(monkeypatch):
    """The check above can fail: second passes that draw fresh masks are off by far more than 1e-6."""
    import contextlib

    batch = global_batch("simlm")
    ref = build("simlm", dropout=0.2)
    torch.manual_seed(5)
    fixed_mask_reference(ref, batch, CHUNK)
    monkeypatch.setattr(RngState, "replay", lambda self: contextlib.nullcontext())
    cached = build("simlm", dropout=0.2)
    torch.manual_seed(5)
    cached_backward(cached, batch, CHUNK)
    assert rel(gradient(cached), gradient(ref)) > 1e-2


def test_chunk_of_one_and_of_the_whole_batch():
    batch = global_batch("contrastive")
    full = build("contrastive")
    full(batch)["loss"].backward()
    for chunk in (1, 1000):
        cached = build("contrastive")
        cached_backward(cached, batch, chunk)
        assert rel(gradient(cached), gradient(full)) < TOL


# --- two processes ---------------------------------------------------------------------------------


def _worker(rank: int, world: int, init_file: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        result = {}
        for case in CASES:
            batch = local_part(global_batch(case, world), rank, world)
            model = build(case)  # dropout off: against one process on the global batch
            cached_backward(model, batch, CHUNK)
            all_reduce_gradients(model, world)
            grads = {"off": gradient(model)}
            ref, cached = build(case, dropout=0.2), build(case, dropout=0.2)  # on: each rank's own masks
            torch.manual_seed(11 + rank)
            fixed_mask_reference(ref, batch, CHUNK)
            all_reduce_gradients(ref, world)
            torch.manual_seed(11 + rank)
            cached_backward(cached, batch, CHUNK)
            all_reduce_gradients(cached, world)
            errs = torch.tensor([rel(gradient(cached), gradient(ref))], dtype=torch.float64)
            both = [torch.zeros_like(errs) for _ in range(world)]
            dist.all_gather(both, errs)
            result[case] = {**grads, "on_errors": torch.cat(both)}
        if rank == 0:
            torch.save(result, out)
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gloo")
    out = tmp / "grads.pt"
    mp.start_processes(_worker, args=(2, str(tmp / "rendezvous"), str(out)), nprocs=2, start_method="spawn")
    return torch.load(out, weights_only=True)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_two_processes_cached_equal_one_process_full_batch(two_processes, case):
    full = build(case)
    full(global_batch(case, world=2))["loss"].backward()
    err = rel(two_processes[case]["off"], gradient(full))
    on = two_processes[case]["on_errors"].tolist()
    print(f"{case}: 2 processes, relative gradient error {err:.3g} (dropout off), {max(on):.3g} (dropout on)")
    assert err < TOL
    assert max(on) < TOL


# --- the trainer -----------------------------------------------------------------------------------


def _source(case: str, batch_size: int):
    from dense_pt.training import IndexedBatchSource

    data = {k: v.numpy() for k, v in global_batch(case, world=4, seed=3).items()}
    rows_of = {k: len(v) // (4 * B) for k, v in data.items()}  # rows per example of each key

    def make_batch(rows: np.ndarray, epoch: int) -> dict:
        return {
            k: np.concatenate([v[r * rows_of[k] : (r + 1) * rows_of[k]] for r in rows])
            for k, v in data.items()
        }

    return IndexedBatchSource(4 * B, batch_size, make_batch, seed=1)


def _train(tmp: Path, case: str, **cfg):
    from dense_pt.training import TrainConfig, Trainer

    base = dict(max_steps=3, batch_size=8, lr=1e-3, warmup=0, precision="fp32", save_every=100, seed=2)
    config = TrainConfig(**{**base, **cfg})
    model = build(case)
    trainer = Trainer(model, config, tmp, _source(case, config.batch_size), progress=False)
    trainer.train()
    return model.state_dict()


def assert_same_weights(a: dict, b: dict, case: str) -> None:
    """|a - b| against the training update |a - start|: float64 rounding only."""
    start = build(case).state_dict()
    update = sum(float((a[k] - start[k]).norm() ** 2) for k in a) ** 0.5
    diff = sum(float((a[k] - b[k]).norm() ** 2) for k in a) ** 0.5
    assert update > 1e-3 and diff < 1e-9 * update, (diff, update)


@pytest.mark.parametrize("case", ["simlm", "contrastive"])
def test_cached_and_uncached_runs_reach_the_same_weights(tmp_path, case):
    plain = _train(tmp_path / "plain", case)
    cached = _train(tmp_path / "cached", case, cache_chunk=3)
    assert_same_weights(plain, cached, case)


def test_cached_with_accumulation_where_the_loss_allows_it(tmp_path):
    """The triplet loss reads each query's own group: 2 cached micro-batches of 4 = one batch of 8."""
    one = _train(tmp_path / "one", "triplet")
    acc = _train(tmp_path / "acc", "triplet", batch_size=4, grad_accum=2, cache_chunk=3)
    assert_same_weights(one, acc, "triplet")


def test_cache_chunk_is_refused_where_there_is_nothing_to_cache(tmp_path):
    from torch import nn

    from dense_pt.training import IndexedBatchSource, TrainConfig, Trainer

    class Plain(nn.Module):
        method = "mlm"

        def __init__(self):
            super().__init__()
            self.w = nn.Linear(2, 1)

    source = IndexedBatchSource(8, 4, lambda r, e: {"x": np.zeros((len(r), 2), np.float32)})
    with pytest.raises(
        InvalidArgumentError, match=r"cache_chunk: mlm has no loss over the batch's representations"
    ):
        Trainer(Plain(), TrainConfig(cache_chunk=4), tmp_path, source, progress=False)
    with pytest.raises(InvalidArgumentError, match="gradient accumulation would shrink its negatives"):
        Trainer(build("simlm"), TrainConfig(cache_chunk=4, grad_accum=2), tmp_path, source, progress=False)


# --- reachable from the command line, the pipeline and the recipes --------------------------------


def test_cache_chunk_reaches_every_training_command_and_table():
    from typer.testing import CliRunner

    from dense_pt.cli import app
    from dense_pt.config import TrainTable
    from dense_pt.pipeline.common import train_config

    for args in (["pretrain"], ["train", "retriever"], ["train", "distill"], ["train", "reranker"]):
        res = CliRunner().invoke(app, [*args, "--help"], terminal_width=200, env={"COLUMNS": "200"})
        assert "--cache-chunk" in res.output, args
    assert TrainTable.load({"cache_chunk": 64}).cache_chunk == 64
    with pytest.raises(InvalidArgumentError, match="cache_chunk: must be >= 0"):
        TrainTable.load({"cache_chunk": -1}, "x.toml", "r1.train")

    class Sec:
        train = TrainTable.load({"cache_chunk": 128, "batch_size": 64})

    assert train_config(Sec(), seed=1).cache_chunk == 128  # type: ignore[arg-type]


def test_recipes_state_their_chunk():
    from dense_pt.training import read_toml

    raw = read_toml(ROOT / "examples" / "llm-expansion-pretrain.toml")
    assert raw["train"]["batch_size"] == 2048 and raw["train"]["cache_chunk"] > 0
    assert raw["train"]["batch_size"] % raw["train"]["cache_chunk"] == 0


# --- kill -9 and resume ----------------------------------------------------------------------------

KILL_SCRIPT = """
import os, signal, sys
import torch
torch.set_num_threads(1)
from dense_pt.pretrain import build_config, run_pretrain
top = dict(method="contrastive", model=sys.argv[1], corpus=sys.argv[2], out=sys.argv[3], max_length=32,
           queries=sys.argv[5])
train = dict(max_steps=6, batch_size=8, cache_chunk=3, lr=1e-3, save_every=3, log_every=1, warmup=1,
             threads=1, precision="fp32")
kill_at = int(sys.argv[4])

def killer(trainer, step, record):
    if step == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)

run_pretrain(build_config(top=top, train=train), resume=True, callbacks=[killer], progress=False)
"""


@pytest.mark.slow
def test_cached_run_resumes_bit_identical(tmp_path):
    """Contrastive pre-training with cache_chunk, dropout on and the batches collated ahead by the
    background thread, SIGKILLed at step 5 (checkpoint at 3) and resumed: the weights at step 6
    are bit-identical to an uninterrupted run's."""
    from safetensors.torch import load_file

    from pretrain_helpers import synthetic_texts, tiny_config_file, tiny_store, write_queries

    store = tiny_store(tmp_path / "store")
    config = tiny_config_file(tmp_path / "tiny.json", store, layers=2)
    queries = write_queries(tmp_path / "queries", synthetic_texts(len(store)))
    script = tmp_path / "kill.py"
    script.write_text(KILL_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python"), "OMP_NUM_THREADS": "1"}

    def run(out: Path, kill_at: int):
        args = [sys.executable, str(script), config, str(store.path), str(out), str(kill_at), str(queries)]
        return subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)

    full = run(tmp_path / "full", -1)
    assert full.returncode == 0, full.stderr[-3000:]
    cut = run(tmp_path / "cut", 5)
    assert cut.returncode == -signal.SIGKILL, cut.stderr[-3000:]
    resumed = run(tmp_path / "cut", -1)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    last = Path("checkpoints") / "checkpoint-00000006" / "model.safetensors"
    a, b = load_file(str(tmp_path / "full" / last)), load_file(str(tmp_path / "cut" / last))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_pretraining_refuses_a_chunk_for_a_loss_without_negatives_and_resumes_with_another(tmp_path):
    from typer.testing import CliRunner

    from dense_pt.cli import app, exit_code
    from dense_pt.config.train import STEP_SWITCHES, TrainConfig
    from dense_pt.pretrain.run import _comparable
    from pretrain_helpers import tiny_config_file, tiny_store

    store = tiny_store(tmp_path / "store", n=16)
    config = tiny_config_file(tmp_path / "tiny.json", store, layers=2)
    args = ["pretrain", "--method", "mlm", "--model", config, "--corpus", str(store.path), "--out",
            str(tmp_path / "out"), "--cache-chunk", "4", "--batch-size", "4", "--max-steps", "1", "--warmup", "0"]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exception is not None
    assert exit_code(res.exception) == 2
    assert "cache_chunk: mlm has no loss over the batch's representations" in str(res.exception)
    assert not (tmp_path / "out" / "run_config.json").exists()
    # how a step runs is no part of the run: a resumed run may change it
    assert set(STEP_SWITCHES) <= set(TrainConfig.model_fields)
    flat = _comparable({"method": "contrastive", "train": {k: 1 for k in STEP_SWITCHES} | {"lr": 1e-4}})
    assert flat == {"method": "contrastive", "train.lr": 1e-4}
