"""The shared training engine on a toy model: optimisation, schedules, config validation,
checkpoints and exact resume."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # the CI machine is shared: idle-spinning thread pools cost far more than they give

from torch import nn  # noqa: E402

from dense_pt.errors import FormatError, InvalidArgumentError  # noqa: E402
from dense_pt.training import (  # noqa: E402
    IndexedBatchSource,
    TrainConfig,
    Trainer,
    epoch_order,
    list_checkpoints,
    lr_factor,
    param_groups,
    read_toml,
    seed_everything,
)

W_TRUE = np.linspace(-1, 1, 8).astype(np.float32)


def make_batch(rows: np.ndarray, epoch: int) -> dict:
    # Deterministic in (row, epoch), like the collator: the data never consumes global RNG.
    x = np.stack([np.random.default_rng([int(r), epoch]).normal(size=8) for r in rows]).astype(np.float32)
    return {"x": x, "y": (x @ W_TRUE).astype(np.float32)}


class Toy(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 16)
        self.norm = nn.LayerNorm(16)
        self.drop = nn.Dropout(0.1)  # consumes torch RNG: resume must restore it
        self.out = nn.Linear(16, 1)

    def forward(self, batch):
        pred = self.out(self.drop(self.norm(self.lin(batch["x"])))).squeeze(-1)
        loss = ((pred - batch["y"]) ** 2).mean()
        return {"loss": loss, "loss_abs": (pred - batch["y"]).abs().mean()}


class Contrastive(Toy):
    accumulation_safe = False


def cfg(**kw) -> TrainConfig:
    base: dict[str, Any] = dict(
        max_steps=12, batch_size=4, lr=1e-2, warmup=2, save_every=4, log_every=2, seed=3
    )
    base.update(kw)
    return TrainConfig(**base)


def run(tmp, config, resume=False, model=None, callbacks=()):
    seed_everything(0)
    model = model or Toy()
    source = IndexedBatchSource(40, config.batch_size, make_batch, seed=config.seed)
    trainer = Trainer(model, config, tmp, source, progress=False, callbacks=callbacks)
    return trainer, trainer.train(resume=resume)


def test_loss_falls_and_log_written(tmp_path):
    trainer, result = run(tmp_path, cfg(max_steps=60, lr=3e-2, log_every=5))
    recs = [json.loads(line) for line in open(tmp_path / "log.jsonl")]
    assert [r["step"] for r in recs] == list(range(5, 61, 5))
    assert recs[-1]["loss"] < 0.5 * recs[0]["loss"]
    for key in ("lr", "seq_per_s", "data_wait", "loss_abs", "grad_norm", "epoch"):
        assert key in recs[0]
    assert 0 <= recs[0]["data_wait"] <= 1
    assert result.step == 60
    # 40 rows / batch 4 = 10 batches an epoch: 60 steps end exactly on the 6th epoch's last batch.
    assert trainer.epoch == 5 and trainer.position == 10


def test_resume_matches_uninterrupted_run(tmp_path):
    trainer, _ = run(tmp_path / "full", cfg())
    ref = {k: v.clone() for k, v in trainer.model.state_dict().items()}

    class Stop:
        def __call__(self, trainer, step, record):
            if step == 6:  # after the checkpoint at step 4: two steps are lost and redone
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "cut", cfg(), callbacks=[Stop()])
    assert [s for s, _ in list_checkpoints(tmp_path / "cut" / "checkpoints")] == [4]
    trainer, res = run(tmp_path / "cut", cfg(), resume=True)
    assert res.resumed_from == 4 and res.step == 12
    for k, v in trainer.model.state_dict().items():
        torch.testing.assert_close(v, ref[k], rtol=0, atol=1e-6)
    steps = [json.loads(line)["step"] for line in open(tmp_path / "cut" / "log.jsonl")]
    assert steps == [2, 4, 6, 8, 10, 12]  # records past the checkpoint were dropped, not duplicated
    full_log = [json.loads(line)["loss"] for line in open(tmp_path / "full" / "log.jsonl")]
    cut_log = [json.loads(line)["loss"] for line in open(tmp_path / "cut" / "log.jsonl")]
    np.testing.assert_allclose(cut_log, full_log, rtol=1e-5)


def test_resume_with_workers_and_accumulation(tmp_path):
    c = cfg(grad_accum=2, max_steps=6, save_every=3)
    src = IndexedBatchSource(40, 4, make_batch, seed=3, num_workers=2)

    def fresh(out, callbacks=()):
        seed_everything(0)
        return Trainer(Toy(), c, out, src, progress=False, callbacks=callbacks)

    t1 = fresh(tmp_path / "a")
    t1.train()

    def stop(trainer, step, record):
        if step == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fresh(tmp_path / "b", [stop]).train()
    t3 = fresh(tmp_path / "b")
    assert t3.train(resume=True).resumed_from == 3
    for k, v in t3.model.state_dict().items():
        torch.testing.assert_close(v, t1.model.state_dict()[k], rtol=0, atol=1e-6)


def test_checkpoint_contents(tmp_path):
    run(tmp_path, cfg(max_steps=4, save_every=2, keep_checkpoints=1))
    ckpts = list_checkpoints(tmp_path / "checkpoints")
    assert [s for s, _ in ckpts] == [4]
    names = {p.name for p in ckpts[0][1].iterdir()}
    assert {
        "model.safetensors",
        "optimizer.pt",
        "scheduler.pt",
        "trainer_state.json",
        "rng-rank0.pt",
    } <= names
    state = json.loads((ckpts[0][1] / "trainer_state.json").read_text())
    assert state["step"] == 4 and state["batch_in_epoch"] == 4 and state["epoch"] == 0


def test_contrastive_refuses_accumulation(tmp_path):
    with pytest.raises(InvalidArgumentError, match="gradient accumulation"):
        run(tmp_path, cfg(grad_accum=2), model=Contrastive())
    run(tmp_path, cfg(max_steps=2), model=Contrastive())  # fine without accumulation


def test_schedules():
    assert lr_factor(0, 100, 10, "linear") == pytest.approx(0.1)
    assert lr_factor(9, 100, 10, "linear") == pytest.approx(1.0)
    assert lr_factor(55, 100, 10, "linear") == pytest.approx(0.5)
    assert lr_factor(100, 100, 10, "linear") == pytest.approx(0.0)
    assert lr_factor(55, 100, 10, "cosine") == pytest.approx(0.5)
    assert lr_factor(10, 100, 10, "cosine") == pytest.approx(1.0)
    assert lr_factor(80, 100, 10, "constant") == 1.0
    assert lr_factor(100, 100, 0, "linear", min_ratio=0.1) == pytest.approx(0.1)
    assert TrainConfig(max_steps=200, warmup=0.1).warmup_steps() == 20


def test_no_weight_decay_on_bias_and_norm():
    model = Toy()
    groups = param_groups(model, 0.01)
    decayed = {id(p) for p in groups[0]["params"]}
    assert id(model.lin.weight) in decayed and id(model.out.weight) in decayed
    assert id(model.lin.bias) not in decayed and id(model.norm.weight) not in decayed
    assert groups[1]["weight_decay"] == 0.0


def test_epoch_order_deterministic():
    a, b = epoch_order(50, 1, 0), epoch_order(50, 1, 0)
    assert (a == b).all() and not (a == epoch_order(50, 1, 1)).all()
    assert sorted(a.tolist()) == list(range(50))


def test_config_validation_and_toml(tmp_path):
    with pytest.raises(InvalidArgumentError, match="schedule: must be one of linear, cosine or constant"):
        TrainConfig(schedule="exp")  # type: ignore[arg-type]  # bad on purpose
    with pytest.raises(InvalidArgumentError, match="lr: must be > 0, got 0"):
        TrainConfig(lr=0)
    toml = tmp_path / "train.toml"
    toml.write_text("lr = 2e-4\nmax_steps = 10\nwarmup = 3\n")
    c = TrainConfig.load(read_toml(toml), toml)
    assert c.lr == 2e-4 and c.max_steps == 10 and c.warmup == 3.0
    toml.write_text("lr = 2e-4\nmax_stpes = 10\n")
    with pytest.raises(FormatError, match=r"train.toml: max_stpes: unknown key \(known: max_steps, "):
        TrainConfig.load(read_toml(toml), toml)
    toml.write_text('max_steps = "ten"\n')
    with pytest.raises(FormatError, match="max_steps: expected an integer, got 'ten'"):
        TrainConfig.load(read_toml(toml), toml)
    toml.write_text("max_steps = \n")
    with pytest.raises(FormatError, match="invalid TOML"):
        read_toml(toml)
