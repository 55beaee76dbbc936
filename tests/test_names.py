"""Issue 25's "names that say one thing": two different public classes or functions of the package
do not share a name (there were two ``Generator`` classes, two ``lr_factor`` functions, three
``read_manifest``...), and two modules outside the folders that mirror the pipeline do not share a
file name. An old name kept for user code is an alias (``Generator = ElectraGenerator``): it is the
same object, so it does not count. A duplicate that is deliberate is listed below, with why."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections import defaultdict
from pathlib import Path

import dense_pt

PACKAGE = Path(dense_pt.__file__).parent

# Not scanned: cli/ (a command's function is named after the command, by design), the entry point,
# and the native binding (``dense_pt.collate.Collator`` / ``pmi.NgramTable`` wrap its classes).
SKIPPED = ("dense_pt.cli", "dense_pt.__main__", "dense_pt._native")

# Modules that declare the same names on purpose: each pipeline stage module its ``inputs`` /
# ``params`` / ``run`` / ``disabled`` (the ``Stage`` it declares points at them), each demo stage
# module its ``demo_stage``.
PROTOCOL_MODULES = {
    "dense_pt.pipeline.stages.": {"inputs", "params", "run", "disabled"},
    "dense_pt.demo.": {"demo_stage"},
}
# Deliberate: the package's torch-free front of the registry's function (imports it when called).
SAME_THING = {"build_objective": {"dense_pt.objectives", "dense_pt.objectives.registry"}}

# Folders whose modules are named after the part of the pipeline they serve (config/pretrain.py:
# pre-training's settings; pipeline/stages/pretrain.py: its stage; demo/pretrain.py: its demo
# stage), so the folder says which: a module there may share its name with the part it mirrors.
MIRRORS = ("cli", "config", "config/defaults", "pipeline/stages", "demo")
# Module names shared outside the mirrors today, each a different thing: to rename (issue 25,
# item 3, left for a later change: every test and benchmark imports these paths). A new entry
# here needs a reason; the list only shrinks.
SHARED_MODULE_NAMES = {
    "build.py": {"data", "pmi"},
    "config.py": {"pipeline", "pretrain", "training"},
    "data.py": {"finetune", "pretrain", "training"},
    "encoder.py": {"models", "retrieval"},
    "progress.py": {"", "training"},
    "run.py": {"pipeline", "pretrain"},
}


def _modules():
    for info in pkgutil.walk_packages(dense_pt.__path__, "dense_pt."):
        if not info.name.startswith(SKIPPED):
            yield importlib.import_module(info.name)


def _definitions() -> dict[str, set[str]]:
    """Each public class or function name: the modules that define one under it."""
    where: dict[str, set[str]] = defaultdict(set)
    for mod in [dense_pt, *_modules()]:
        for name, obj in vars(mod).items():
            if name.startswith("_") or not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if obj.__module__ == mod.__name__ and obj.__name__ == name:  # not an alias or an import
                where[name].add(mod.__name__)
    return where


def _deliberate(name: str, modules: set[str]) -> bool:
    if SAME_THING.get(name) == modules:
        return True
    return any(
        name in names and all(m.startswith(prefix) for m in modules)
        for prefix, names in PROTOCOL_MODULES.items()
    )


def test_no_two_public_classes_or_functions_share_a_name():
    shared = {n: sorted(m) for n, m in _definitions().items() if len(m) > 1 and not _deliberate(n, m)}
    assert not shared, shared


def test_the_old_names_are_aliases_of_the_new():
    """What the README and the tests imported still imports, as the renamed object."""
    from dense_pt import expansion, models, objectives, progress
    from dense_pt.expansion import curriculum, generate, writer
    from dense_pt.finetune import stages
    from dense_pt.pretrain import context_data

    pairs = [
        (models.Generator, models.ElectraGenerator),
        (generate.Generator, generate.QueryGenerator),
        (curriculum.lr_factor, curriculum.curriculum_lr_factor),
        (progress.Stage, progress.TimedStep),
        (stages.score, stages.score_negatives),
        (expansion.load_queries, writer.load_pseudo_queries),
        (context_data.plan, context_data.plan_curriculum),
        (objectives.describe, objectives.describe_method),
    ]
    assert all(old is new for old, new in pairs)


def _folder(path: Path) -> str:
    return path.parent.relative_to(PACKAGE).as_posix().replace(".", "")


def test_no_two_modules_outside_the_mirrors_share_a_file_name():
    by_name: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py" and _folder(path) not in MIRRORS:
            by_name[path.name].add(_folder(path))
    shared = {name: folders for name, folders in by_name.items() if len(folders) > 1}
    assert shared == SHARED_MODULE_NAMES
