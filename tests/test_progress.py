"""The one progress display (dense_pt.progress) and the status logger (dense_pt.logs): plain lines
when stderr is not a terminal (a phase's start, a status line with rate and ETA at most every 30 s,
its end with the count and time), nothing with --quiet."""

from __future__ import annotations

import logging

import pytest

from dense_pt import logs
from dense_pt.errors import InvalidArgumentError
from dense_pt.progress import Progress, TimedStep


@pytest.fixture
def info_logging(capsys):
    logs.configure(logging.INFO)
    yield
    logs.log.setLevel(logging.WARNING)


def test_without_a_terminal_progress_is_plain_lines_every_30_s(info_logging, capsys):
    now = [0.0]
    p = Progress("pmi build", "n-grams", clock=lambda: now[0])
    for t, done in [(0, 0), (10, 100), (31, 300), (45, 450), (62, 620)]:
        now[0] = t
        p.update("order 2", done, 1000)
    now[0] = 70
    p.finish()
    assert capsys.readouterr().err.splitlines() == [
        "pmi build: order 2: started",
        "pmi build: order 2: 300/1,000 (30%) n-grams, 9.68 n-grams/s, ETA 72.3 s",
        "pmi build: order 2: 620/1,000 (62%) n-grams, 10 n-grams/s, ETA 38.0 s",
        "pmi build: order 2: done, 620 n-grams in 70.0 s",
    ]


def test_phases_units_and_resumed_counts(info_logging, capsys):
    """A new phase ends the previous one; a phase that starts at step 500 (a resumed training)
    reports the rate of what this run did, and long times read as minutes / hours."""
    now = [0.0]
    p = Progress("train", "steps", clock=lambda: now[0])
    p.update("training", 500, 1000)
    now[0] = 100.0
    p.update("training", 600, 1000, info="loss 0.5")
    now[0] = 4000.0
    p.update("export", 0, 0, unit="files")
    p.finish()
    assert capsys.readouterr().err.splitlines() == [
        "train: training: started",
        "train: training: 600/1,000 (60%) steps, 1 steps/s, ETA 6 min 40 s, loss 0.5",
        "train: training: done, 100 steps in 1 h 06 min",
        "train: export: started",
        "train: export: done, 0.0 s",
    ]


def test_quiet_means_no_lines(capsys):
    logs.configure(logs.level_from(quiet=True))
    with Progress("encode", "passages") as p:
        p.advance(5, phase="encoding", total=10)
    logs.status("wrote x")
    assert capsys.readouterr().err == ""


def test_a_failed_task_prints_no_done_line(info_logging, capsys):
    with pytest.raises(RuntimeError), Progress("bm25", "passages") as p:
        p.update("indexing", 0, 10)
        raise RuntimeError("x")
    assert capsys.readouterr().err.splitlines() == ["bm25: indexing: started"]


def test_stages_are_named_and_timed(info_logging, capsys):
    now = [0.0]
    with TimedStep("demo", "store", clock=lambda: now[0]):
        now[0] = 2.5
    with pytest.raises(ValueError), TimedStep("demo", "pmi", clock=lambda: now[0]):
        now[0] = 100.0
        raise ValueError
    assert capsys.readouterr().err.splitlines() == [
        "demo: stage store started",
        "demo: stage store done in 2.5 s",
        "demo: stage pmi started",
        "demo: stage pmi failed after 1 min 38 s",
    ]


@pytest.mark.parametrize(
    ("verbose", "quiet", "env", "level"),
    [
        (False, False, None, logging.INFO),
        (True, False, None, logging.DEBUG),
        (False, True, "debug", logging.WARNING),  # the option wins over the environment
        (False, False, "ERROR", logging.ERROR),
        (False, False, " ", logging.INFO),
    ],
)
def test_log_level(monkeypatch, verbose, quiet, env, level):
    monkeypatch.delenv(logs.LEVEL_ENV, raising=False)
    if env is not None:
        monkeypatch.setenv(logs.LEVEL_ENV, env)
    assert logs.level_from(verbose, quiet) == level


def test_log_level_refuses_nonsense(monkeypatch):
    monkeypatch.setenv(logs.LEVEL_ENV, "chatty")
    with pytest.raises(InvalidArgumentError, match=r"\$DENSE_PT_LOG must be one of"):
        logs.level_from()
