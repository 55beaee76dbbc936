"""`report_to = "tensorboard"`: the trainer's scalars written as TensorBoard events, read back with
TensorBoard's own reader and compared with the JSONL log of the same run."""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tensorboard")
torch.set_num_threads(1)

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from torch import nn  # noqa: E402

from dense_pt.errors import InvalidArgumentError, MissingExtraError  # noqa: E402
from dense_pt.training import IndexedBatchSource, TrainConfig, Trainer, seed_everything  # noqa: E402


class Toy(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 1)

    def forward(self, batch):
        pred = self.lin(batch["x"]).squeeze(-1)
        loss = ((pred - batch["y"]) ** 2).mean()
        return {"loss": loss, "loss_abs": (pred - batch["y"]).abs().mean()}


def make_batch(rows, epoch):
    x = np.stack([np.random.default_rng([int(r), epoch]).normal(size=4) for r in rows]).astype(np.float32)
    return {"x": x, "y": x.sum(axis=1).astype(np.float32)}


def train(out, report_to="tensorboard", resume=False, callbacks=(), **kw):
    seed_everything(0)
    cfg = dict(max_steps=9, batch_size=4, lr=1e-2, warmup=2, save_every=3, log_every=2, report_to=report_to)
    cfg.update(kw)
    config = TrainConfig(**cfg)
    source = IndexedBatchSource(20, config.batch_size, make_batch, seed=1)
    trainer = Trainer(Toy(), config, out, source, progress=False, callbacks=callbacks)
    return trainer.train(resume=resume)


def read_events(folder):
    """{tag: [(step, value), ...]} of every scalar in the event files under ``folder``."""
    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def read_log(out):
    return [json.loads(line) for line in open(out / "log.jsonl", encoding="utf-8")]


def test_scalars_read_back_equal_the_jsonl_log(tmp_path):
    train(tmp_path)
    records = read_log(tmp_path)
    assert [r["step"] for r in records] == [2, 4, 6, 8, 9]
    events = read_events(tmp_path / "tb")
    assert set(events) == {"train/loss", "train/loss_abs", "train/lr", "train/grad_norm"}
    for key in ("loss", "loss_abs", "lr", "grad_norm"):
        # TensorBoard stores float32: the same numbers as the log, to float32 precision.
        want = [(r["step"], float(np.float32(r[key]))) for r in records]
        assert events[f"train/{key}"] == want, key
    assert len(list((tmp_path / "tb").glob("events.out.tfevents.*"))) == 1


def test_resume_drops_the_events_past_the_checkpoint(tmp_path):
    class Stop:
        def __call__(self, trainer, step, record):
            if step == 5:  # after the checkpoint at step 3 and the event of step 4
                trainer.stop_requested = True

    train(tmp_path, callbacks=[Stop()])
    assert [s for s, _ in read_events(tmp_path / "tb")["train/loss"]] == [2, 4]
    # the stop saved step 5; drop that checkpoint so the resume starts from step 3, as after a kill
    (latest,) = [p for p in (tmp_path / "checkpoints").iterdir() if p.name.endswith("00000005")]
    shutil.rmtree(latest)
    train(tmp_path, resume=True)
    records = read_log(tmp_path)
    assert [r["step"] for r in records] == [2, 4, 6, 8, 9]
    # step 4's first event is gone (purged), not plotted twice: the events are the log's records
    want = [(r["step"], float(np.float32(r["loss"]))) for r in records]
    assert read_events(tmp_path / "tb")["train/loss"] == want


def test_none_writes_no_events_and_a_fresh_run_replaces_old_ones(tmp_path):
    train(tmp_path, report_to="none")
    assert not (tmp_path / "tb").exists()
    train(tmp_path, max_steps=4)
    train(tmp_path, max_steps=2)  # a fresh start over the same folder (resume=False)
    assert [s for s, _ in read_events(tmp_path / "tb")["train/loss"]] == [2]


def test_bad_value_and_missing_extra_are_named(tmp_path, monkeypatch):
    with pytest.raises(
        InvalidArgumentError, match="report_to: must be one of none or tensorboard, got 'wandb'"
    ):
        TrainConfig(report_to="wandb")  # type: ignore[arg-type]  # bad on purpose
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # as if the extra were not installed
    with pytest.raises(MissingExtraError, match=r"pip install 'dense-pt\[tensorboard\]'"):
        train(tmp_path)


def test_cli_train_retriever_report_to_and_toml(tmp_path):
    """`dense-pt train retriever --report-to tensorboard`, and `[train] report_to` in the TOML."""
    from typer.testing import CliRunner

    from dense_pt.cli import app
    from retrieval_fixtures import tiny_setup

    beir, model, store, _queries, _qrels = tiny_setup(tmp_path)
    (tmp_path / "t.toml").write_text("[train]\nwarmup = 0\nprecision = 'fp32'\nlog_every = 1\n")
    (tmp_path / "tb.toml").write_text(
        "[train]\nwarmup = 0\nprecision = 'fp32'\nlog_every = 1\nreport_to = 'tensorboard'\n"
    )
    common = ["train", "retriever", str(model), "--corpus", str(store), "--queries", str(beir / "queries.jsonl"),
              "--qrels", str(beir / "qrels" / "train.tsv"), "--group-size", "2", "--max-steps", "2",
              "--batch-size", "4"]  # fmt: skip
    runs = {
        "flag": ["--config", str(tmp_path / "t.toml"), "--report-to", "tensorboard"],
        "toml": ["--config", str(tmp_path / "tb.toml")],
    }
    for name, extra in runs.items():
        res = CliRunner().invoke(app, [*common, "--out", str(tmp_path / name), *extra])
        assert res.exit_code == 0, (res.output, res.exception)
        records = read_log(tmp_path / name)
        want = [(r["step"], float(np.float32(r["loss"]))) for r in records]
        assert read_events(tmp_path / name / "tb")["train/loss"] == want
        assert [s for s, _ in want] == [1, 2]
    # a closed choice on the command line: click refuses it naming the choices (exit 2)
    res = CliRunner().invoke(app, [*common, "--out", str(tmp_path / "bad"), "--report-to", "wandb"])
    assert res.exit_code == 2 and "'wandb' is not one of" in res.output and "tensorboard" in res.output, (
        res.output
    )
    # the same value from a file: the model's message
    (tmp_path / "wandb.toml").write_text("[train]\nreport_to = 'wandb'\n")
    res = CliRunner().invoke(
        app, [*common, "--out", str(tmp_path / "bad"), "--config", str(tmp_path / "wandb.toml")]
    )
    assert isinstance(res.exception, InvalidArgumentError)  # main() turns it into exit code 2
    assert "report_to: must be one of none or tensorboard, got 'wandb'" in str(res.exception)
