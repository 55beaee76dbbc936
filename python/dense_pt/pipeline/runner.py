"""The pipeline runner: stages declared in ``dense_pt.pipeline.stages``, run in order.

Every stage has its own folder with ``manifest.json``: its inputs (upstream stages' fingerprints
and data file hashes), settings, seed, status, metrics and wall time. A stage's fingerprint is a
hash of its declared inputs, parameters and the seed, computed for every planned stage before any
of them runs (the plan). A run skips a stage whose manifest says ``done`` with the same
fingerprint, resumes one whose manifest says ``running`` with the same fingerprint (training
restarts from its last checkpoint, encoding from its last shard), and redoes one whose inputs
changed (its folder is replaced). A changed input changes the fingerprint of every stage that reads
it, directly or through another stage, and of no other: only the dependents rerun.

Nothing the pipeline did not write is deleted: the output folder must be new, empty or the
pipeline's (``dense_pt.artifacts.claim``; ``force``: any folder, whose other files stay), and
a stage folder is replaced only when it holds that stage's manifest with a fingerprint, with one
line saying so; anything else (a user's ``store/`` beside the stages) is refused naming the path,
``force`` or not. A symbolic link is refused unless ``force``, then replaced (the link only) when
it leads to the stage's own folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from dense_pt import __version__, artifacts
from dense_pt.artifacts.checksums import file_digest
from dense_pt.artifacts.legacy import kind_of_command
from dense_pt.artifacts.replace import first_of
from dense_pt.errors import DensePtError, already_exists
from dense_pt.fsutil import remove_tree

Manifest = dict[str, Any]


class EvalKeys(Protocol):
    @property
    def measures(self) -> list[str]: ...
    @property
    def rel_level(self) -> int: ...
    @property
    def tie_break(self) -> str: ...


class RunConfig(Protocol):
    """What the runner itself reads of a configuration: where the stage folders go, the seed (part
    of every fingerprint) and the evaluation settings (recorded beside every stage's metrics). The
    pipeline's is ``dense_pt.pipeline.config.ResolvedPipeline``; the stages read the rest of it."""

    @property
    def out(self) -> Path: ...
    @property
    def seed(self) -> int: ...
    @property
    def eval(self) -> EvalKeys: ...


C = TypeVar("C", bound=RunConfig)


def _enabled(cfg: object) -> str | None:
    """A stage's default: it runs with every configuration."""
    return None


@dataclass(frozen=True)
class Stage(Generic[C]):
    """One pipeline stage, declared in its own module under ``dense_pt.pipeline.stages``.

    ``inputs`` and ``params`` make the fingerprint (with the seed and the name): ``inputs`` names
    what the stage reads (upstream stages by their fingerprints, data files by their hashes),
    ``params`` the configuration values it uses. ``run`` does the work in the stage's folder and
    returns what the manifest records (``metrics`` among them for an evaluated stage)."""

    name: str
    doc: str  # one line: what the stage does
    reads: tuple[str, ...]  # earlier stages it reads, when they run (checked against ``inputs``)
    config: tuple[str, ...]  # the configuration tables it reads
    outputs: tuple[str, ...]  # files and folders it leaves in its folder for later stages
    inputs: Callable[[Context[C]], dict[str, Any]]
    params: Callable[[Context[C]], dict[str, Any]]
    run: Callable[[Context[C], Path], Manifest]
    # None when the configuration runs the stage, else the reason it does not
    disabled: Callable[[C], str | None] = _enabled
    run_file: str | None = None  # its run (Arrow), from which its metrics can be recomputed
    card: str | None = None  # the model (relative to ``out``) whose card gets its dev metrics
    tracked: bool = True  # False: no manifest, rewritten every time (the report)


def fingerprint(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class Step(Generic[C]):
    """A planned stage: its fingerprint and what the folder on disk says about it."""

    stage: Stage[C]
    inputs: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    fingerprint: str = ""
    action: str = "run"  # run | rerun | resume | skip | off
    why: str = ""
    deferred: str | None = None  # why it does not run now (--until, --only), though it would
    needs: tuple[str, ...] = ()  # the planned stages whose fingerprints feed this one


class Context(Generic[C]):
    """What the stages share during one run: the configuration (typed: the pipeline's
    ``ResolvedPipeline``, or any model with the runner's ``RunConfig`` fields), the plan's
    fingerprints, the manifests of the stages done so far, and memoised file hashes."""

    def __init__(
        self, cfg: C, progress: bool = False, log: Callable[[str], None] = print, force: bool = False
    ):
        from dense_pt.evaluation.metrics import EVALUATION_VERSION

        self.cfg, self.progress, self.log = cfg, progress, log
        self.force = force  # write into / replace folders the pipeline did not write
        self.out: Path = Path(cfg.out)
        self.seed: int = int(cfg.seed)
        self.results: dict[str, Manifest] = {}
        self.fingerprints: dict[str, str] = {}
        self._memo: dict[Any, Any] = {}
        ev = cfg.eval
        # Not part of any stage's fingerprint: other measures or conventions re-evaluate the stages'
        # run files (``refresh_metrics``) instead of redoing their training.
        self.eval_key = {"measures": list(ev.measures), "rel_level": ev.rel_level,
                         "tie_break": ev.tie_break, "version": EVALUATION_VERSION}  # fmt: skip

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """``compute()``, once per run (file and model hashes: several stages read them)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def file_hash(self, path: Path) -> str:
        return self.memo(("file", Path(path)), lambda: file_digest(path, "sha256"))

    def planned(self, name: str) -> bool:
        return name in self.fingerprints

    def fp(self, name: str) -> str:
        return self.fingerprints[name]


STAGE = "pipeline stage"  # the kind of a stage folder's manifest
COMMAND = "pipeline run"


def is_stage_folder(folder: Path, name: str) -> bool:
    """Whether ``folder`` provably holds stage ``name``'s work: its manifest, with a fingerprint."""
    m = artifacts.read(folder, STAGE)
    return m is not None and m.get("stage") == name and isinstance(m.get("fingerprint"), str)


def _clear_stage_folder(ctx: Context[C], name: str, folder: Path, why: str) -> None:
    """Remove a stage folder before the stage runs afresh, saying so: only one the stage wrote,
    ``--force`` or not (a user's folder that happens to have a stage's name is refused). A
    symbolic link is refused unless ``ctx.force``; then only a link to the stage's own folder is
    replaced (the link: never what it points to)."""
    if folder.is_symlink() and not ctx.force:
        raise already_exists(
            folder,
            f"{folder} is a symbolic link: the pipeline writes its stage folders itself; remove the "
            "link, or pass --force to replace a link to the stage's own folder (not what it points to)",
        )
    if not is_stage_folder(folder, name):  # through a link: its target
        raise already_exists(
            folder,
            f"{folder} holds no manifest of the {name} stage: dense-pt did not write it; move it "
            "away (--force never replaces it)",
        )
    stray = _stray_entries(folder, artifacts.read(folder, STAGE) or {})
    if stray:
        raise already_exists(
            stray[0],
            f"cannot rerun the {name} stage in {folder}: it holds {first_of(stray)}, which the stage did "
            "not write; move it away (--force never removes it)",
        )
    what = "the symbolic link (not what it points to)" if folder.is_symlink() else "it"
    ctx.log(f"[{name}] replacing {folder}: {why}; removing {what}")
    remove_tree(folder)


def _entries(folder: Path) -> list[str]:
    """Every file and folder under ``folder`` ('/'-separated, relative; links not followed) but the
    stage manifest, an old ownership mark and dense-pt's temporaries: what a finished stage wrote."""
    from dense_pt.artifacts.legacy import OLD_MARK
    from dense_pt.fsutil import is_temporary

    found: list[str] = []
    for top, dirs, files in os.walk(folder):
        rel = Path(top).relative_to(folder)
        dirs[:] = [d for d in dirs if not is_temporary(d)]
        found += [(rel / n).as_posix() for n in (*dirs, *files)
                  if not is_temporary(n) and (rel / n).as_posix() not in (artifacts.MANIFEST, OLD_MARK)]  # fmt: skip
    return sorted(found)


def _stray_entries(folder: Path, manifest: Manifest) -> list[Path]:
    """What a stage folder holds beyond what the stage wrote (its manifest's ``written``, recorded
    when the stage finished): a user's file, which rerunning the stage must not remove. A folder
    finished before stages recorded what they wrote (or one interrupted) has no list: nothing to
    compare, the stage's folder is replaced as it was."""
    written = manifest.get("written")
    if not isinstance(written, list):
        return []
    known = set(written)
    return [folder / e for e in _entries(folder) if e not in known and not _under(e, known)]


def _under(entry: str, known: set[str]) -> bool:
    """Whether ``entry`` lies in a folder that is itself stray (reported once, by its top)."""
    parent = entry.rpartition("/")[0]
    return bool(parent) and parent not in known


def plan(
    ctx: Context[C], stages: tuple[Stage[C], ...], until: str | None = None, only: str | None = None
) -> list[Step[C]]:
    """Every stage with its fingerprint and what a run would do with it (nothing is written).
    ``until``: the stages after it are left for later; ``only``: just that one stage runs."""
    steps: list[Step[C]] = []
    reached_end = False
    for stage in stages:
        step = Step(stage)
        steps.append(step)
        reason = stage.disabled(ctx.cfg)
        if reason is not None:
            step.action, step.why = "off", reason
            continue
        if stage.tracked:
            step.inputs, step.params = stage.inputs(ctx), stage.params(ctx)
            step.fingerprint = fingerprint(
                {"inputs": step.inputs, "params": step.params, "seed": ctx.seed, "stage": stage.name}
            )
            ctx.fingerprints[stage.name] = step.fingerprint
            step.needs = _needs(ctx, step)
        _judge(ctx, step)
        if (reached_end or (only is not None and stage.name != only)) and step.action != "skip":
            step.deferred = f"not run now ({_scope(until, only)})"
        reached_end = reached_end or stage.name == until
    return steps


def _scope(until: str | None, only: str | None) -> str:
    return f"--until {until}" if until is not None else f"--only {only}"


def _needs(ctx: Context[C], step: Step[C]) -> tuple[str, ...]:
    """The planned stages whose fingerprints are among ``step``'s inputs: its real dependencies,
    which must be among the stages it declares it reads."""
    fps = {v: k for k, v in ctx.fingerprints.items() if k != step.stage.name}
    needs = tuple(fps[v] for v in step.inputs.values() if isinstance(v, str) and v in fps)
    stray = set(needs) - set(step.stage.reads)
    if stray:
        raise DensePtError(f"stage {step.stage.name!r} reads {sorted(stray)} without declaring it")
    return needs


def _judge(ctx: Context[C], step: Step[C]) -> None:
    """What the folder on disk means for this stage: skip, resume, run, or rerun (and why)."""
    if not step.stage.tracked:
        step.action, step.why = "run", "always rewritten from the finished stages"
        return
    old = artifacts.read(ctx.out / step.stage.name, STAGE)
    if old is None:
        step.action, step.why = "run", "not run yet"
    elif old.get("fingerprint") != step.fingerprint:
        step.action, step.why = "rerun", "changed: " + ", ".join(_changes(ctx, step, old))
    elif old.get("status") == "done":
        step.action, step.why = "skip", "fingerprint matches"
    else:
        step.action, step.why = "resume", "interrupted with the same fingerprint"


def _changes(ctx: Context[C], step: Step[C], old: Manifest) -> list[str]:
    """What differs from the manifest on disk, named: upstream stages, input files, settings."""
    by_fp = {v: k for k, v in ctx.fingerprints.items()}
    out = []
    new_in, old_in = step.inputs, old.get("inputs") or {}
    for key in sorted(set(new_in) | set(old_in)):
        if new_in.get(key) != old_in.get(key):
            value = new_in.get(key)
            out.append(f"stage {by_fp[value]}" if value in by_fp else f"input {key}")
    new_p, old_p = step.params, old.get("params") or {}
    out += [f"setting {k}" for k in sorted(set(new_p) | set(old_p)) if new_p.get(k) != old_p.get(k)]
    if old.get("seed") != ctx.seed:
        out.append("seed")
    return out or ["fingerprint (same inputs and settings, another definition of the stage)"]


def execute(ctx: Context[C], step: Step[C]) -> Manifest:
    """Run (or skip, or resume) one planned stage; its manifest."""
    stage, folder = step.stage, ctx.out / step.stage.name
    if not stage.tracked:
        artifacts.claim(folder, kind_of_command(f"pipeline {stage.name}"), COMMAND, force=ctx.force)
        result = stage.run(ctx, folder)
        artifacts.finish(folder)
        return result
    if step.action == "skip":
        old = refresh_metrics(ctx, stage, folder, artifacts.read(folder, STAGE) or {})
        ctx.log(f"[{stage.name}] up to date, skipped")
        ctx.results[stage.name] = old
        return old
    if os.path.lexists(folder) and step.action != "resume":
        _clear_stage_folder(ctx, stage.name, folder, step.why)  # inputs changed: start afresh
    elif step.action == "resume":
        ctx.log(f"[{stage.name}] resuming an interrupted run")
    folder.mkdir(parents=True, exist_ok=True)
    base = {"stage": stage.name, "fingerprint": step.fingerprint, "inputs": step.inputs,
            "params": step.params, "seed": ctx.seed, "code_version": __version__}  # fmt: skip
    head = artifacts.header(STAGE, COMMAND, key=step.fingerprint, settings=step.params)
    artifacts.write(folder, head, {**base, "status": "running"})
    ctx.log(f"[{stage.name}] running")
    t0 = time.perf_counter()
    result = stage.run(ctx, folder)
    ctx.log(f"[{stage.name}] done in {time.perf_counter() - t0:,.1f} s")
    missing = [o for o in stage.outputs if not (folder / o).exists()]
    if missing:
        raise DensePtError(f"stage {stage.name!r} finished without its declared outputs {missing}")
    if "metrics" in result:
        result = {**result, "evaluation": ctx.eval_key}
        _card_metrics(ctx, stage, result["metrics"])
    manifest = artifacts.write(folder, {**head, "complete": True}, {**base, "status": "done", **result,
                               "wall_s": round(time.perf_counter() - t0, 2), "written": _entries(folder)})  # fmt: skip
    ctx.results[stage.name] = manifest
    if "metrics" in result:
        shown = ", ".join(f"{k} {v:.4f}" for k, v in result["metrics"].items())
        ctx.log(f"[{stage.name}] dev: {shown}")
    return manifest


def _card_metrics(ctx: Context[C], stage: Stage[C], metrics: dict[str, float]) -> None:
    """The stage's dev metrics on the model card of what it trained (zero-shot: of the
    pre-trained encoder, when the pipeline pre-trained one)."""
    from dense_pt.model_card import add_metrics

    if stage.card is None:
        return
    ev = ctx.cfg.eval
    add_metrics(ctx.out / stage.card, {"split": f"pipeline dev split, {stage.name} stage", "values": metrics,
                "settings": {"tie order": ev.tie_break, "relevance level": ev.rel_level}})  # fmt: skip


def refresh_metrics(ctx: Context[C], stage: Stage[C], folder: Path, manifest: Manifest) -> Manifest:
    """A finished stage's metrics, recomputed from its run file when they were computed with
    other evaluation settings or an older version of the metrics."""
    run_file = existing_run(folder / (stage.run_file or "-"))
    if "metrics" not in manifest or manifest.get("evaluation") == ctx.eval_key or not run_file.is_file():
        return manifest
    from dense_pt.pipeline.common import evaluate

    metrics = evaluate(ctx, run_file)
    manifest = {**manifest, "metrics": metrics, "evaluation": ctx.eval_key}
    artifacts.write(
        folder, {k: manifest[k] for k in artifacts.manifest.HEADER_KEYS}, artifacts.body(manifest)
    )
    ctx.log(f"[{stage.name}] metrics recomputed from {run_file.name} (evaluation settings changed)")
    return manifest


def existing_run(path: Path) -> Path:
    """A stage's run file: ``path`` (``run.arrow``), or, in a folder finished before runs were
    Arrow files, the ``.trec`` file it holds instead (the same run: its fingerprint is unchanged,
    and every reader reads both formats)."""
    legacy = path.with_suffix(".trec")
    return legacy if not path.exists() and legacy.exists() else path


def check_only(ctx: Context[C], steps: list[Step[C]], only: str) -> None:
    """``--only STAGE`` runs one stage whose inputs are finished: every stage it needs must be
    up to date on disk (their manifests are loaded for it), else one clear error."""
    by_name = {s.stage.name: s for s in steps}
    target = by_name[only]
    needs = target.needs if target.stage.tracked else tuple(n for n in ctx.fingerprints if n != only)
    for name in needs:
        step = by_name[name]
        if step.action != "skip":
            state = {"run": "has not run", "resume": "was interrupted"}.get(step.action, "is out of date")
            raise DensePtError(
                f"--only {only}: it reads stage {name!r}, which {state} ({step.why}); "
                f"run up to it first (--until {name})"
            )
        ctx.results[name] = artifacts.read(ctx.out / name, STAGE) or {}


def run_stages(
    ctx: Context[C], stages: tuple[Stage[C], ...], until: str | None = None, only: str | None = None
) -> None:
    """Plan, then run every planned stage up to ``until`` (or just ``only``); ``ctx.results``
    holds the manifests."""
    steps = plan(ctx, stages, until, only)
    artifacts.claim(ctx.out, "pipeline", COMMAND, force=ctx.force)
    if only is not None:
        check_only(ctx, steps, only)
    for step in steps:
        if step.action == "off" or step.deferred or (only is not None and step.stage.name != only):
            continue
        execute(ctx, step)
        if step.stage.name in (until, only):
            return
    if only is None and not any(s.deferred for s in steps):
        artifacts.finish(ctx.out)


def format_plan(steps: list[Step[Any]]) -> str:
    """The plan as a table: one line per stage, what a run does with it, and why."""
    words = {"run": "run", "rerun": "rerun", "resume": "resume", "skip": "up to date", "off": "disabled"}
    width = max(len(s.stage.name) for s in steps)
    return "\n".join(
        f"{s.stage.name:<{width}}  {'not now' if s.deferred else words[s.action]:<10}  "
        + (f"{s.deferred}; {s.why}" if s.deferred else s.why)
        for s in steps
    )
