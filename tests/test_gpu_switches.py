"""The switches that change how a step runs, each tested for equivalence on CPU where torch allows:
gradient checkpointing (the same gradients, dropout on: the masks are recomputed, not redrawn),
the attention kernel (sdpa = eager to 1e-5, the decoders' explicit masks included), torch.compile
(the same losses over a few steps; traced with the "aot_eager" backend, as inductor's C++ codegen
takes ~100 s here), fused AdamW (the same weights as the default kernel), TF32 (only on a GPU),
bf16 autocast (what ``precision = "auto"`` picks on which card; a bf16 step's loss near fp32's),
and the collation thread (the same batches, in order, errors where they belong)."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # the CI machine is shared: idle-spinning thread pools cost far more than they give

from dense_pt.training import IndexedBatchSource, TrainConfig, Trainer, build_optimizer  # noqa: E402
from dense_pt.training.prefetch import Prefetcher  # noqa: E402
from dense_pt.training.switches import apply_switches, enable_checkpointing, set_attention, set_tf32  # noqa: E402
from dense_pt.training.trainer import resolve_precision  # noqa: E402
from pretrain_helpers import make_batch, special_ids, tiny_encoder, view_for  # noqa: E402
from training_helpers import build, global_batch, gradient, rel  # noqa: E402


def cdmae(dropout: float = 0.0, dtype=torch.float64):
    from dense_pt.objectives import MethodOptions, build_objective, resolve_options

    torch.manual_seed(0)
    opts = resolve_options("cdmae", MethodOptions())
    return build_objective("cdmae", tiny_encoder(dropout), special_ids(), opts).to(dtype).train()


def cdmae_batch() -> dict:
    return {k: torch.as_tensor(v) for k, v in view_for("cdmae", make_batch(seed=2)).items()}


def model_and_batch(case: str, dropout: float = 0.0, dtype=torch.float64):
    if case == "cdmae":
        return cdmae(dropout, dtype), cdmae_batch()
    return build(case, dropout, dtype), global_batch(case)


# --- gradient checkpointing ------------------------------------------------------------------------


def _calls_of_a_layer(model, case: str) -> list[int]:
    """Calls of a module inside the encoder's first layer (hooks on the layer itself stay outside
    Hugging Face's checkpoint: its recomputation calls the layer's insides again)."""
    calls: list[int] = []
    layer = (model.encoder if case != "simlm" else model.backbone).encoder.layer[0]
    layer.intermediate.register_forward_hook(lambda *a: calls.append(1))
    return calls


@pytest.mark.parametrize("case", ["simlm", "contrastive", "cdmae"])
def test_gradient_checkpointing_gives_the_same_gradients(case):
    plain, batch = model_and_batch(case, dropout=0.2)
    plain_calls = _calls_of_a_layer(plain, case)
    torch.manual_seed(3)
    plain(batch)["loss"].backward()
    ckpt, _ = model_and_batch(case, dropout=0.2)
    assert enable_checkpointing(ckpt) == 1  # the encoder (the decoders are shallow, left as they are)
    calls = _calls_of_a_layer(ckpt, case)
    torch.manual_seed(3)
    ckpt(batch)["loss"].backward()
    assert len(calls) == 2 * len(plain_calls), "the layer was not recomputed in the backward pass"
    assert rel(gradient(ckpt), gradient(plain)) < 1e-12


# --- the attention kernel --------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["simlm", "contrastive", "cdmae"])
def test_sdpa_and_eager_attention_agree(case):
    model, batch = model_and_batch(case, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        set_attention(model, "sdpa")
        a = model(batch)
        set_attention(model, "eager")
        b = model(batch)
    kernels = {
        m.config._attn_implementation
        for m in model.modules()
        if hasattr(getattr(m, "config", None), "_attn_implementation")
    }
    assert kernels == {"eager"}  # the decoders' copied layers too
    for key in a:
        assert abs(float(a[key]) - float(b[key])) < 1e-5, key
    if case != "cdmae":  # the vectors the contrastive loss reads
        parts = model.cache_parts(batch)
        for name, rows in parts.items():
            with torch.no_grad():
                set_attention(model, "sdpa")
                ra = model.represent(name, rows, batch, terms=False)["rep"]
                set_attention(model, "eager")
                rb = model.represent(name, rows, batch, terms=False)["rep"]
            assert float((ra - rb).abs().max()) < 1e-5


def test_the_trainer_applies_the_attention_switch(tmp_path):
    model, _ = model_and_batch("cdmae", dtype=torch.float32)
    apply_switches(model, TrainConfig(attn_implementation="eager"), torch.device("cpu"))
    assert model.encoder.config._attn_implementation == "eager"
    assert model.decoder.attn_implementation() == "eager"
    apply_switches(model, TrainConfig(), torch.device("cpu"))  # auto: left as it is
    assert model.encoder.config._attn_implementation == "eager"


# --- torch.compile ---------------------------------------------------------------------------------


def _source(case: str = "simlm"):
    data = {k: v.numpy() for k, v in global_batch(case, seed=4).items()}
    per = {k: len(v) // 6 for k, v in data.items()}

    def make(rows, epoch):
        return {k: np.concatenate([v[r * per[k] : (r + 1) * per[k]] for r in rows]) for k, v in data.items()}

    return IndexedBatchSource(6, 3, make, seed=1)


def _losses(tmp, **cfg) -> list[float]:
    config = TrainConfig(max_steps=4, batch_size=3, lr=1e-3, warmup=0, precision="fp32", log_every=1, **cfg)
    Trainer(build("simlm", dtype=torch.float32), config, tmp, _source(), progress=False).train()
    return [json.loads(line)["loss"] for line in open(tmp / "log.jsonl")]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["layers", "model"])
def test_torch_compile_gives_the_same_losses(tmp_path, monkeypatch, mode):
    import dense_pt.training.switches as switches

    monkeypatch.setattr(switches, "COMPILE_BACKEND", "aot_eager")
    plain = _losses(tmp_path / "plain")
    torch._dynamo.reset()
    compiled = _losses(tmp_path / "compiled", torch_compile=mode)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # it did trace the encoder
    np.testing.assert_allclose(compiled, plain, rtol=1e-5)
    torch._dynamo.reset()


# --- fused AdamW, TF32, bf16 autocast --------------------------------------------------------------


def test_fused_adamw_on_a_gpu_only_and_the_same_steps():
    cfg = TrainConfig(lr=1e-2)
    model = build("simlm", dtype=torch.float32)
    assert build_optimizer(model, cfg, "cuda").defaults["fused"] is True
    assert not build_optimizer(model, cfg, "cpu").defaults["fused"]
    assert not build_optimizer(model, cfg.replace(fused_adamw=False), "cuda").defaults["fused"]
    weights = []
    for fused in (False, True):  # torch's fused CPU kernel stands in for the CUDA one
        model = build("simlm")  # float64: Adam's m / sqrt(v) of near-zero gradients is rounding-free
        opt = build_optimizer(model, cfg, fused=fused)
        for step in range(3):
            opt.zero_grad()
            model(global_batch("simlm", seed=step))["loss"].backward()
            opt.step()
        weights.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    torch.testing.assert_close(weights[1], weights[0], rtol=1e-9, atol=1e-8)  # updates are ~lr = 1e-2


def test_tf32_is_set_on_a_gpu_only():
    before = torch.get_float32_matmul_precision()
    try:
        set_tf32(True, torch.device("cpu"))
        assert torch.get_float32_matmul_precision() == before
        set_tf32(True, torch.device("cuda"))
        assert torch.get_float32_matmul_precision() == "high"
        set_tf32(False, torch.device("cuda"))
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        torch.set_float32_matmul_precision(before)


def test_auto_precision_per_device(monkeypatch):
    assert resolve_precision("auto", torch.device("cpu")) is None  # fp32 on CPU
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)  # Ampere, Hopper ...
    assert resolve_precision("auto", torch.device("cuda")) == torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)  # V100, T4
    assert resolve_precision("auto", torch.device("cuda")) == torch.float16
    assert resolve_precision("bf16", torch.device("cpu")) == torch.bfloat16


@pytest.mark.parametrize("case", ["simlm", "contrastive"])
def test_a_bf16_autocast_step_is_near_the_fp32_one(case):
    model, batch = model_and_batch(case, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        full = float(model(batch)["loss"])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            half = float(model(batch)["loss"])
    assert half == pytest.approx(full, rel=3e-2)
    assert half != full  # autocast did run in bf16


# --- collation ahead -------------------------------------------------------------------------------


def test_prefetcher_gives_the_items_in_order_and_stops():
    seen = threading.get_ident()
    made = []

    def items():
        for i in range(50):
            made.append(threading.get_ident())
            yield i

    pre = Prefetcher(items(), 3, lambda x: x * 2)
    assert list(pre) == [2 * i for i in range(50)]
    assert set(made) == {pre._thread.ident} and seen not in made  # produced by the thread
    forever = Prefetcher(iter(lambda: 1, None), 2)
    assert next(forever) == 1
    forever.close()
    assert not forever._thread.is_alive()


def test_prefetcher_raises_the_error_at_its_item():
    def items():
        yield 1
        raise FileNotFoundError("batch 2 is gone")

    pre = Prefetcher(items(), 2)
    assert next(pre) == 1
    with pytest.raises(FileNotFoundError, match="batch 2 is gone"):
        next(pre)


def test_collating_ahead_trains_the_same_weights(tmp_path):
    def weights(out, ahead):
        model = build("simlm", dtype=torch.float32)
        config = TrainConfig(
            max_steps=4, batch_size=3, lr=1e-3, warmup=0, precision="fp32", collate_ahead=ahead
        )
        Trainer(model, config, out, _source(), progress=False).train()
        return model.state_dict()

    a, b = weights(tmp_path / "inline", 0), weights(tmp_path / "ahead", 2)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_slow_collator_no_longer_stalls_the_step(tmp_path):
    """The data-stall figure shows the thread at work: a 30 ms collator and a 30 ms step. Inline,
    the step waits for every batch; collated ahead, only for the first (not a timing benchmark:
    both waits are sleeps, which overlap on any machine)."""
    from torch import nn

    class Sleepy(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(()))

        def forward(self, batch):
            time.sleep(0.03)
            return {"loss": (self.w - batch["x"].float().mean()) ** 2}

    def make(rows, epoch):
        time.sleep(0.03)
        return {"x": rows.astype(np.float32)}

    def stall(ahead):
        out = tmp_path / f"a{ahead}"
        config = TrainConfig(max_steps=12, batch_size=2, warmup=0, log_every=12, collate_ahead=ahead)
        Trainer(Sleepy(), config, out, IndexedBatchSource(40, 2, make), progress=False).train()
        return json.loads((out / "log.jsonl").read_text())["data_wait"]

    inline, ahead = stall(0), stall(2)
    assert inline > 0.35 and ahead < 0.5 * inline, (inline, ahead)


@pytest.mark.parametrize("ahead", [0, 2])
def test_a_callback_that_changes_the_data_restarts_the_batches(tmp_path, ahead):
    """After a callback changes what ``make_batch`` reads (ANCE's refreshed negatives) and calls
    ``restart_batches``, the next steps see the new data, not batches collated ahead before it."""
    from torch import nn

    seen: list[float] = []
    state = {"offset": 0.0}

    class Probe(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(()))

        def forward(self, batch):
            time.sleep(0.03)  # a slow step, a fast collator: the thread is ahead when the data changes
            seen.append(float(batch["x"][0]))
            return {"loss": (self.w - batch["x"].float().mean()) ** 2}

    def make(rows, epoch):
        return {"x": rows.astype(np.float32) * 0 + state["offset"]}

    def refresh(trainer, step, record):
        if step == 2:
            state["offset"] = 100.0
            trainer.restart_batches()

    config = TrainConfig(max_steps=5, batch_size=2, warmup=0, collate_ahead=ahead)
    Trainer(
        Probe(), config, tmp_path, IndexedBatchSource(40, 2, make), callbacks=[refresh], progress=False
    ).train()
    assert seen == [0.0, 0.0, 100.0, 100.0, 100.0]
