"""The demo lives in one package on top of the others (issue 13 item 3): no subpackage imports it,
the expansion <-> pretrain cycle it caused is gone, its generated corpus is unchanged by the move, and
a run names each stage on stderr with its time (issue 14 items 8-9)."""

from __future__ import annotations

import ast
import hashlib
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import dense_pt
from dense_pt.demo import generate_demo, run_demo
from dense_pt.demo.run import plumbing_note

PACKAGE = Path(dense_pt.__file__).resolve().parent
SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())


def _imported_subpackages(path: Path) -> set[str]:
    """dense_pt subpackages that ``path`` imports anywhere (module level or inside functions)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "dense_pt" and len(parts) > 1 and parts[1] in SUBPACKAGES:
                found.add(parts[1])
    return found


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in SUBPACKAGES}
    for name in SUBPACKAGES:
        for f in (PACKAGE / name).rglob("*.py"):
            graph[name] |= _imported_subpackages(f) - {name}
    return graph


def test_every_subpackage_imports():
    assert {"demo", "expansion", "pretrain", "pipeline", "pmi"} <= set(SUBPACKAGES)
    for name in SUBPACKAGES:
        importlib.import_module(f"dense_pt.{name}")


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one subpackage (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(comp)

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_expansion_does_not_import_pretrain_and_no_cycle():
    """pretrain reads expansion's queries (one way); the demo's expanded pre-training used to make
    expansion import pretrain back. The last cycle (config <-> finetune, objectives, retrieval,
    training: the models read the papers' numbers and choice lists from the modules that take the
    models) went when config became a leaf (below): no cycle among the subpackages at all."""
    graph = _graph()
    assert "pretrain" not in graph["expansion"]
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [{"a", "b"}]  # the detector itself
    assert _cycles(graph) == []


def _dense_pt_imports(path: Path, package: str) -> set[str]:
    """Every ``dense_pt`` module name ``path`` imports, anywhere in the file (function-level imports
    too), relative imports resolved against ``package``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            found |= {base} | {f"{base}.{a.name}" for a in node.names}
    return {n for n in found if n == "dense_pt" or n.startswith("dense_pt.")}


def test_config_is_a_leaf(tmp_path: Path):
    """The config models import only ``dense_pt.errors`` and themselves: every default and choice
    list they check lives in ``dense_pt.config`` (the torch-side modules import them from there)."""
    outside = {}
    for f in (PACKAGE / "config").rglob("*.py"):
        package = ".".join(("dense_pt", *f.relative_to(PACKAGE).parent.parts))
        names = {
            n for n in _dense_pt_imports(f, package) if n.split(".")[1:2] not in (["config"], ["errors"])
        }
        if names:
            outside[f.relative_to(PACKAGE).as_posix()] = sorted(names)
    assert not outside, outside
    # the scanner itself: imports inside functions and relative ones are found
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from dense_pt.retrieval import fusion\n    from ..objectives import x\n")
    assert _dense_pt_imports(probe, "dense_pt.config.defaults") >= {
        "dense_pt.retrieval.fusion",
        "dense_pt.config.objectives.x",
    }
    assert "dense_pt.objectives.x" in _dense_pt_imports(probe, "dense_pt.config")


def test_importing_config_loads_no_torch_and_no_other_subpackage():
    code = (
        "import sys, dense_pt.config, dense_pt.config.pipeline, dense_pt.config.choices, "
        "dense_pt.config.defaults.finetune, dense_pt.config.defaults.objectives; "
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('dense_pt')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = ast.literal_eval(out.strip())
    assert "torch" not in loaded
    others = [m for m in loaded if m not in ("dense_pt", "dense_pt._native", "dense_pt.errors")]
    assert others and all(m == "dense_pt.config" or m.startswith("dense_pt.config.") for m in others), others


def test_the_demo_sits_on_top():
    """Only the CLI imports dense_pt.demo (the library never depends on its demo)."""
    importers = {name for name, deps in _graph().items() if "demo" in deps}
    top_level = {f.stem for f in PACKAGE.glob("*.py") if "demo" in _imported_subpackages(f)}
    assert importers <= {"cli"} and not top_level, (importers, top_level)
    assert not (PACKAGE / "demo_data").exists() and not (PACKAGE / "demo.py").exists()
    for sub in ("pipeline", "pretrain", "expansion"):
        assert not (PACKAGE / sub / "demo.py").exists()


def test_no_test_fixture_ships_in_the_package():
    for f in PACKAGE.rglob("*.py"):
        defs = {
            n.name
            for n in ast.walk(ast.parse(f.read_text(encoding="utf-8")))
            if isinstance(n, ast.FunctionDef)
        }
        assert not defs & {"synthetic_corpus", "tiny_model", "write_beir"}, f


def test_demo_functions_stay_short():
    for f in (PACKAGE / "demo").glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef):
                assert node.end_lineno is not None  # set by ast.parse
                assert node.end_lineno - node.lineno + 1 <= 80, f"{f.name}:{node.name}"


def test_generated_corpus_is_what_the_demo_numbers_were_measured_on():
    """The split of generate_demo into steps kept every random draw in place: same bytes as before."""
    d = generate_demo(0)
    digest = hashlib.sha256(json.dumps([d.passages, d.queries, d.qrels, d.keys]).encode()).hexdigest()
    assert digest == "b778b5a189ec81c56af9705ac6f82586fa4f92b0b2e0221a829259e4e2b408b3"
    small = generate_demo(3, 20, 10, 15)
    assert (len(small.passages), hashlib.sha256(json.dumps([small.__dict__]).encode()).hexdigest()) == (
        45,
        "6d85718f5daf885cca0f4638a1d3e09b31e7835e35df6a2f777133b7421e5d4d",
    )


def test_each_stage_is_named_on_stderr_with_its_time(tmp_path, capsys):
    from dense_pt import logs

    logs.configure()  # status lines at INFO, as the command line sets them (alone, the logger is unset)

    def first(ctx):
        return {"status": "ran"}

    def second(ctx):
        return {"status": "up to date"}

    report = run_demo(tmp_path / "d", stages=[("first", first), ("second", second)], print_summary=False)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "demo: [1/2] first ..." and err[2] == "demo: [2/2] second ..."
    assert err[1] == f"demo: [1/2] first: ran in {report['stages']['first']['seconds']:.1f} s"
    assert err[3].startswith("demo: [2/2] second: up to date in ") and err[4].startswith(
        "demo: all 2 stages in "
    )
    assert capsys.readouterr().out == ""  # stdout is for the results table only


def test_threads_are_set_for_the_whole_demo(tmp_path):
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    seen = []

    def probe(ctx):
        seen.append(torch.get_num_threads())
        return {"status": "ran"}

    try:
        torch.set_num_threads(2)
        run_demo(tmp_path / "d", stages=[("probe", probe)], print_summary=False)  # the default: one
        run_demo(tmp_path / "d", stages=[("probe", probe)], threads=0, print_summary=False)  # torch's own
    finally:
        torch.set_num_threads(before)
    assert seen == [1, 1]  # threads=0 leaves torch as it was (1, set by the first run)


def test_the_demo_says_when_it_is_only_plumbing():
    def stages(**ndcg):
        metrics = {k: {"nDCG@10": v, "R@100": 0.9} for k, v in ndcg.items()}
        return {"finetune": {"steps": 200, "metrics": metrics}}

    note = plumbing_note(stages(bm25=0.677, r1=0.19, distill=0.178))
    assert note is not None and "plumbing demo" in note and "BENCHMARKS.md" in note
    assert "0.190" in note and "0.677" in note and "200 steps" in note
    assert plumbing_note(stages(bm25=0.5, r1=0.6)) is None  # a dense retriever beat BM25: no excuse needed
    assert plumbing_note({"finetune": {"status": "skipped"}}) is None
