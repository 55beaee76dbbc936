"""The pipeline runner on toy stages (no models): finished stages are skipped, an interrupted one
resumes in its own folder, a changed input reruns only the stages that read it (directly or through
another stage), ``only`` needs finished inputs, and the plan says what a run would do and why.
The real stages through the CLI: ``--dry-run``, ``--until``/``--stop-after`` and ``--only``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from dense_pt.config.pipeline import EvalTable
from dense_pt.errors import DensePtError
from dense_pt.pipeline.runner import Context, Stage, format_plan, plan, run_stages


class ToySettings(BaseModel):
    x: int = 1


class ToyConfig(BaseModel):
    """The toy stages' configuration: what the runner reads (out, seed, eval: its ``RunConfig``),
    one settings table per stage (its params) and whether stage e runs."""

    out: Path
    seed: int = 1
    eval: EvalTable = EvalTable(measures=["nDCG@10"])
    a: ToySettings = ToySettings()
    b: ToySettings = ToySettings()
    c: ToySettings = ToySettings()
    d: ToySettings = ToySettings()
    e: ToySettings = ToySettings()
    e_on: bool = False


class Interrupted(Exception):
    pass


def toy_stages(calls: list[str], source: Path, crash: set[str] | None = None) -> tuple[Stage, ...]:
    """a (reads ``source``) -> b -> c, and d reading a only; e is off unless ``cfg.e_on``. Each
    stage writes ``out.txt``; a stage in ``crash`` writes ``partial.txt`` and is interrupted."""

    def make(name: str, reads: tuple[str, ...]) -> Stage[ToyConfig]:
        def inputs(ctx: Context[ToyConfig]) -> dict:
            own = {"source": ctx.file_hash(source)} if name == "a" else {}
            return {**own, **{r: ctx.fp(r) for r in reads}}

        def run(ctx: Context[ToyConfig], folder: Path) -> dict:
            calls.append(name)
            resumed = (folder / "partial.txt").exists()
            if crash and name in crash:
                crash.discard(name)
                (folder / "partial.txt").write_text("half")
                raise Interrupted(name)
            (folder / "out.txt").write_text(name)
            return {"resumed": resumed}

        return Stage(name=name, doc=name, reads=reads, config=(name,), outputs=("out.txt",), inputs=inputs,
                     params=lambda ctx: getattr(ctx.cfg, name).model_dump(), run=run,
                     disabled=(lambda cfg: None if cfg.e_on else "[e] off") if name == "e" else lambda cfg: None)  # fmt: skip

    return (make("a", ()), make("b", ("a",)), make("c", ("b",)), make("d", ("a",)), make("e", ("c",)))


def _run(tmp_path: Path, stages, cfg_extra=None, until=None, only=None) -> list[str]:
    lines: list[str] = []
    cfg = ToyConfig(out=tmp_path / "out", **(cfg_extra or {}))
    run_stages(Context(cfg, log=lines.append), stages, until=until, only=only)
    return lines


def _plan(tmp_path: Path, stages, cfg_extra=None, until=None, only=None) -> str:
    cfg = ToyConfig(out=tmp_path / "out", **(cfg_extra or {}))
    return format_plan(plan(Context(cfg, log=lambda _: None), stages, until, only))


def _plan_lines(text: str) -> dict[str, str]:
    return {line.split()[0]: " ".join(line.split()[1:]) for line in text.splitlines()}


def test_skip_resume_and_only_the_dependents_rerun(tmp_path: Path):
    source = tmp_path / "source.txt"
    source.write_text("v1")
    calls: list[str] = []
    # b is interrupted the first time: a is done, b's manifest says running
    with pytest.raises(Interrupted):
        _run(tmp_path, toy_stages(calls, source, crash={"b"}))
    assert calls == ["a", "b"]
    assert json.loads((tmp_path / "out" / "b" / "manifest.json").read_text())["status"] == "running"
    plan_text = _plan_lines(_plan(tmp_path, toy_stages(calls, source)))
    assert plan_text["a"] == "up to date fingerprint matches"
    assert plan_text["b"] == "resume interrupted with the same fingerprint"
    assert plan_text["c"] == "run not run yet" and plan_text["e"] == "disabled [e] off"

    calls.clear()
    lines = _run(tmp_path, toy_stages(calls, source))
    assert calls == ["b", "c", "d"] and "[a] up to date, skipped" in lines
    assert "[b] resuming an interrupted run" in lines
    b = json.loads((tmp_path / "out" / "b" / "manifest.json").read_text())
    assert b["status"] == "done" and b["resumed"] is True  # its folder was kept for it

    # everything is up to date
    calls.clear()
    lines = _run(tmp_path, toy_stages(calls, source))
    assert calls == [] and all(line.endswith("up to date, skipped") for line in lines)

    # a setting of b: b and c (which reads b) rerun; a and d do not
    calls.clear()
    plan_text = _plan_lines(_plan(tmp_path, toy_stages(calls, source), {"b": {"x": 2}}))
    assert plan_text["b"] == "rerun changed: setting x" and plan_text["c"] == "rerun changed: stage b"
    assert plan_text["a"].startswith("up to date") and plan_text["d"].startswith("up to date")
    _run(tmp_path, toy_stages(calls, source), {"b": {"x": 2}})
    assert calls == ["b", "c"]
    assert not (tmp_path / "out" / "b" / "partial.txt").exists()  # a rerun starts afresh

    # the input file of a: everything downstream of a reruns
    source.write_text("v2")
    calls.clear()
    plan_text = _plan_lines(_plan(tmp_path, toy_stages(calls, source), {"b": {"x": 2}}))
    assert plan_text["a"] == "rerun changed: input source" and plan_text["d"] == "rerun changed: stage a"
    _run(tmp_path, toy_stages(calls, source), {"b": {"x": 2}})
    assert calls == ["a", "b", "c", "d"]


def test_until_only_and_the_plan(tmp_path: Path):
    source = tmp_path / "source.txt"
    source.write_text("v1")
    calls: list[str] = []
    _run(tmp_path, toy_stages(calls, source), until="b")
    assert calls == ["a", "b"]
    plan_text = _plan_lines(_plan(tmp_path, toy_stages(calls, source), until="b"))
    assert plan_text["c"] == "not now not run now (--until b); not run yet"

    # --only c: b is finished, so c runs alone
    calls.clear()
    _run(tmp_path, toy_stages(calls, source), only="c")
    assert calls == ["c"]
    # --only d after a changed: a is out of date, so d cannot run alone
    source.write_text("v2")
    with pytest.raises(DensePtError, match=r"--only d: it reads stage 'a', which is out of date \(changed: "
                       r"input source\); run up to it first \(--until a\)"):  # fmt: skip
        _run(tmp_path, toy_stages(calls, source), only="d")
    # e (on) reads c, which has not run since its input changed
    (tmp_path / "out" / "c").rename(tmp_path / "c-gone")
    source.write_text("v1")
    with pytest.raises(DensePtError, match=r"--only e: it reads stage 'c', which has not run"):
        _run(tmp_path, toy_stages(calls, source), {"e_on": True}, only="e")
    plan_text = _plan_lines(_plan(tmp_path, toy_stages(calls, source), {"e_on": True}, only="d"))
    assert plan_text["d"] == "run not run yet" and plan_text["c"].startswith("not now not run now (--only d)")
    assert plan_text["a"] == "up to date fingerprint matches"


def test_a_stage_must_declare_what_it_reads_and_leave_its_outputs(tmp_path: Path):
    source = tmp_path / "source.txt"
    source.write_text("v1")
    a = toy_stages([], source)[0]
    sneaky: Stage[ToyConfig] = Stage(name="s", doc="", reads=(), config=(), outputs=(), inputs=lambda ctx: {"a": ctx.fp("a")},
                   params=lambda ctx: {}, run=lambda ctx, folder: {})  # fmt: skip
    with pytest.raises(DensePtError, match=r"stage 's' reads \['a'\] without declaring it"):
        _plan(tmp_path, (a, sneaky))
    lazy: Stage[ToyConfig] = Stage(name="l", doc="", reads=(), config=(), outputs=("x.bin",), inputs=lambda ctx: {},
                 params=lambda ctx: {}, run=lambda ctx, folder: {})  # fmt: skip
    with pytest.raises(DensePtError, match=r"stage 'l' finished without its declared outputs \['x.bin'\]"):
        _run(tmp_path, (lazy,))


def test_every_stage_module_is_in_the_order_and_reads_earlier_stages():
    import pkgutil

    import dense_pt.pipeline.stages as pkg
    from dense_pt.pipeline.run import STAGE_DEFS, STAGES

    modules = {m.name for m in pkgutil.iter_modules(pkg.__path__)}
    assert modules == set(STAGES) == set(pkg.ORDER)
    for i, stage in enumerate(STAGE_DEFS):
        assert set(stage.reads) <= set(STAGES[:i]), stage.name
        assert stage.doc and (stage.outputs or not stage.tracked), stage.name


def test_cli_dry_run_until_and_only_on_the_real_stages(tmp_path: Path):
    from typer.testing import CliRunner

    from dense_pt.cli import app
    from test_pipeline_config import _tiny_pipeline

    path = _tiny_pipeline(tmp_path)
    runner = CliRunner()
    res = runner.invoke(app, ["pipeline", "run", str(path), "--dry-run"])
    assert res.exit_code == 0, res.output
    rows = _plan_lines(res.stdout)
    assert list(rows) == ["store", "split", "pmi", "pretrain", "bm25", "zeroshot", "r1", "mine", "r2",
                          "reranker", "score", "distill", "fusion", "report"]  # fmt: skip
    res = runner.invoke(app, ["pipeline", "run", "--config", str(path), "--dry-run", "--json"])
    plan = json.loads(res.stdout)  # the same plan, as data
    assert (
        [s["stage"] for s in plan] == list(rows) and plan[3]["action"] == "off" and plan[0]["action"] == "run"
    )
    assert rows["store"] == "run not run yet" and rows["pretrain"] == "disabled no [pretrain] table"
    assert rows["fusion"] == "disabled [fusion] enabled = false"
    assert rows["report"] == "run always rewritten from the finished stages"
    assert not (tmp_path / "out").exists()  # a dry run writes nothing

    res = runner.invoke(app, ["pipeline", "run", str(path), "--quiet", "--until", "split"])
    assert res.exit_code == 0 and "stopped after stage 'split' as asked; re-run without --until" in res.stderr
    res = runner.invoke(app, ["pipeline", "run", str(path), "--dry-run", "--set", "data.max_length=96"])
    assert res.exit_code == 0, f"{res.output}{res.exception!r}"
    rows = _plan_lines(res.stdout)
    assert rows["store"] == "rerun changed: setting max_length" and rows["split"].startswith("up to date")
    # --only: the stage's inputs must be finished
    res = runner.invoke(app, ["pipeline", "run", str(path), "--quiet", "--only", "r1"])
    assert res.exit_code != 0 and "--only r1: it reads stage 'bm25', which has not run" in str(res.exception)
    res = runner.invoke(app, ["pipeline", "run", str(path), "--quiet", "--only", "bm25", "--json"])
    assert res.exit_code == 0, res.output
    ran = json.loads(res.stdout)["stages"]  # the manifests of what ran (and of what it read)
    assert ran["bm25"]["stage"] == "bm25" and "zeroshot" not in ran
    assert (tmp_path / "out" / "bm25" / "run.arrow").is_file() and not (
        tmp_path / "out" / "zeroshot"
    ).exists()
    res = runner.invoke(app, ["pipeline", "run", str(path), "--only", "bm25", "--until", "r1"])
    assert res.exit_code != 0 and "not both" in str(res.exception)
