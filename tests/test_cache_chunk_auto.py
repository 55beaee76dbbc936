"""``cache_chunk = "auto"`` and the cached step's shortcuts: the chunk chosen on CPU (a fixed rule)
gives the uncached gradient (float64) and is logged; the sizing arithmetic of the GPU rule; a batch
that fits one chunk takes the plain step (one forward, the same gradient); the setting is accepted
as "auto" from a TOML table, ``--set`` and the command-line option, and any other word is refused
naming the key."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)

from dense_pt.config import TrainConfig, TrainTable  # noqa: E402
from dense_pt.errors import InvalidArgumentError  # noqa: E402
from dense_pt.training.cache import (  # noqa: E402
    CPU_CHUNK,
    activation_bytes_per_token,
    auto_chunk,
    cached_backward,
    even_chunk,
)
from test_cached_gradients import _train, assert_same_weights  # noqa: E402
from training_helpers import B, N, build, global_batch, gradient, rel  # noqa: E402


def test_even_chunk_cuts_into_as_few_and_as_equal_pieces_as_possible():
    assert even_chunk(1024, 392) == 342  # 3 chunks: 342, 342, 340
    assert even_chunk(1024, 512) == 512
    assert even_chunk(1024, 4096) == 1024  # all of it
    assert even_chunk(10, 4) == 4  # 3 chunks (4, 4, 2) are needed either way
    assert even_chunk(10, 6) == 5  # 2 chunks of 5, not 6 + 4
    assert even_chunk(7, 0) == 1  # nothing fits: one row at a time, never 0
    for rows in range(1, 60):
        for limit in range(1, 70):
            chunk = even_chunk(rows, limit)
            pieces = -(-rows // chunk)
            assert 1 <= chunk <= min(rows, limit)
            assert pieces == -(-rows // min(rows, limit))  # no more pieces than the limit needs


def test_activation_estimate_of_bert_base():
    """4 x (10 x 768 + 2 x 3072) bytes per token and layer: ~92 MiB per 144-token sequence over 12
    layers, an upper bound of what the first H100 run measured (57.9 GiB for 1,024 passages of 144
    and 64 queries of 32 under bf16, ~56 MiB per passage)."""
    per_token = activation_bytes_per_token(768, 3072)
    assert per_token == 4 * (7680 + 6144)
    per_row = 12 * 144 * per_token
    assert 56 * 2**20 < per_row < 2 * 56 * 2**20


def test_auto_on_cpu_is_the_fixed_rule():
    model, batch = build("simlm"), global_batch("simlm")
    chunk, why = auto_chunk(model, batch, torch.device("cpu"))
    assert chunk == min(CPU_CHUNK, B * N) and "CPU" in why
    wide = {k: torch.cat([v] * 10) for k, v in batch.items()}  # 180 passages: 6 chunks of 30
    assert auto_chunk(model, wide, torch.device("cpu"))[0] == even_chunk(10 * B * N, CPU_CHUNK) == 30


def test_auto_gives_the_uncached_weights_and_logs_its_chunk(tmp_path, caplog):
    """A run with "auto" (CPU: 24 queries, 72 passages: 3 chunks of 24) reaches the weights of the
    uncached run, float64, and logs the chunk it chose."""
    plain = _train(tmp_path / "plain", "simlm", batch_size=24)
    with caplog.at_level(logging.INFO, logger="dense_pt"):
        auto = _train(tmp_path / "auto", "simlm", batch_size=24, cache_chunk="auto")
    assert_same_weights(plain, auto, "simlm")
    assert [r.message for r in caplog.records if "cache_chunk auto" in r.message] == [
        "cache_chunk auto: 24 sequences per encoder call (CPU: at most 32)"
    ]


@pytest.mark.parametrize("case", ["simlm", "contrastive"])
def test_one_chunk_is_the_plain_step(case, monkeypatch):
    """A chunk that holds the whole batch takes the full-batch step (no graph-free pass: the
    encoder runs once per part), with the full-batch gradient and the same logged parts."""
    batch = global_batch(case)
    full = build(case)
    out = full(batch)
    out["loss"].backward()
    cached = build(case)
    calls: list[str] = []
    original = type(cached).represent

    def counted(self, part, *args, **kwargs):
        calls.append(part)
        return original(self, part, *args, **kwargs)

    monkeypatch.setattr(type(cached), "represent", counted)
    got = cached_backward(cached, batch, 1000, scale=0.5)
    assert rel(gradient(cached), 0.5 * gradient(full)) < 1e-12
    assert set(got) == set(out) and float(got["loss"]) == pytest.approx(
        float(out["loss"].detach()), rel=1e-12
    )
    assert len(calls) == len(cached.cache_parts(batch))  # each part encoded once


# --- the setting: TOML, --set, the option ---------------------------------------------------------


def test_auto_from_a_table_and_from_set():
    from dense_pt.config.toml import apply_overrides

    assert TrainTable.load({"cache_chunk": "auto"}).cache_chunk == "auto"
    assert TrainConfig().cache_chunk == 0  # off unless asked (docs/training.md says why)
    for text, want in (("auto", "auto"), ("64", 64), ("0", 0)):
        data = apply_overrides({}, [f"train.cache_chunk={text}"])
        assert TrainTable.load(data["train"], "--set", "train").cache_chunk == want
    for bad, what in (("big", "or \"auto\", got 'big'"), ("Auto", "got 'Auto'"), (-3, "must be >= 0")):
        with pytest.raises(InvalidArgumentError, match=rf"x.toml: r1.train.cache_chunk: .*{what}"):
            TrainTable.load({"cache_chunk": bad}, "x.toml", "r1.train")


def _cli_app(seen: list):
    import typer

    from dense_pt.cli.options import load_settings, model_options, split, with_model_options

    tables = [("train", TrainConfig)]

    def run(**values):
        given = split(values, tables)
        seen.append(load_settings(TrainConfig, None, [], given.get("train", {}), "--cache-chunk").cache_chunk)

    app = typer.Typer()
    app.command()(with_model_options(run, model_options(tables, only=["cache_chunk"])))
    return app


def test_the_option_takes_a_number_or_auto():
    from typer.testing import CliRunner

    from dense_pt.cli import app as cli_app

    seen: list = []
    app = _cli_app(seen)
    for text, want in (("auto", "auto"), ("128", 128)):
        res = CliRunner().invoke(app, ["--cache-chunk", text])
        assert res.exit_code == 0, res.output
        assert seen[-1] == want
    res = CliRunner().invoke(app, ["--cache-chunk", "half"])
    assert isinstance(res.exception, InvalidArgumentError)
    assert "cache_chunk: must be a number of sequences (>= 0) or \"auto\", got 'half'" in str(res.exception)
    shown = CliRunner().invoke(
        cli_app, ["train", "retriever", "--help"], terminal_width=200, env={"COLUMNS": "200"}
    )
    assert "--cache-chunk" in shown.output and "INT|auto" in shown.output


def test_the_command_line_refuses_another_word(tmp_path: Path):
    """The real command: a word other than auto is a usage error (exit 2) naming the key."""
    from typer.testing import CliRunner

    from dense_pt.cli import app, exit_code

    args = ["pretrain", "--method", "mlm", "--model", str(tmp_path / "m.json"), "--corpus", str(tmp_path / "c"),
            "--out", str(tmp_path / "o"), "--cache-chunk", "lots"]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exception is not None and exit_code(res.exception) == 2
    assert "cache_chunk: must be a number of sequences (>= 0) or \"auto\", got 'lots'" in str(res.exception)
    assert not (tmp_path / "o").exists()
