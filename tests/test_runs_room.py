"""Issue 32's room for runs (``dense_pt.runs``), pinned from the source: its modules import each
other without a circle and at module level only, no module reaches for another's private names,
``dense_pt.data`` (qrels, corpora) never imports it back, and a run is read one public way (plus
the dict loader for small runs)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "dense_pt"
RUNS = PACKAGE / "runs"


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, list[str], bool]]:
    """``(module, names, inside a function)`` of each ``import`` / ``from ... import`` in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    local: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            local.update(id(n) for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, [a.name for a in node.names], id(node) in local))
        elif isinstance(node, ast.Import):
            out.extend((a.name, [], id(node) in local) for a in node.names)
    return out


def _targets(module: str, names: list[str]) -> set[str]:
    """The dense_pt modules an import loads: ``from dense_pt.runs import chunk`` loads the package
    and its submodule ``chunk``."""
    if not module.startswith("dense_pt"):
        return set()
    found = {module}
    for name in names:
        sub = PACKAGE.parent / Path(*f"{module}.{name}".split("."))
        if sub.with_suffix(".py").exists() or sub.is_dir():
            found.add(f"{module}.{name}")
    return found


def _runs_graph() -> dict[str, set[str]]:
    graph = {}
    for path in sorted(RUNS.glob("*.py")):
        edges: set[str] = set()
        for module, names, _ in _imports(path):
            edges |= {t for t in _targets(module, names) if t.startswith("dense_pt.runs")}
        graph[_module(path)] = edges
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path, node, nxt]
            if nxt not in state and (found := visit(nxt, [*path, node])) is not None:
                return found
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node, [])) is not None:
            return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_the_runs_modules_import_each_other_without_a_circle():
    graph = _runs_graph()
    assert {"dense_pt.runs.chunk", "dense_pt.runs.read", "dense_pt.runs.write", "dense_pt.runs.merge"} <= set(
        graph
    )
    assert _cycle(graph) is None, _cycle(graph)
    # no module of the room goes through the package's __init__ (which imports them all)
    inner = {m: e for m, e in graph.items() if m != "dense_pt.runs"}
    assert not [m for m, e in inner.items() if "dense_pt.runs" in e]


def test_data_never_imports_runs_back():
    back = [
        (_module(p), module)
        for p in sorted((PACKAGE / "data").glob("*.py"))
        for module, names, _ in _imports(p)
        if any(t.startswith("dense_pt.runs") for t in _targets(module, names))
    ]
    assert back == []


def test_the_runs_modules_import_at_module_level_only():
    local = [(p.name, m) for p in sorted(RUNS.glob("*.py")) for m, _, inside in _imports(p) if inside]
    assert local == []


def test_no_private_name_crosses_a_runs_module_boundary():
    crossing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        mine = path.is_relative_to(RUNS)
        for module, names, _ in _imports(path):
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private and (mine or module.startswith("dense_pt.runs")) and module != _module(path):
                crossing.append((_module(path), module, private))
    assert crossing == []


def test_a_run_is_read_one_public_way():
    import dense_pt.data
    import dense_pt.runs

    readers = sorted(n for n in dense_pt.runs.__all__ if n.startswith(("read", "load")))
    assert readers == ["load_run", "read_run"]
    # the qrels side names no run reader or writer any more
    assert not {"RunEntry", "load_run", "rank_hits", "read_run", "write_run"} & set(dense_pt.data.__all__)
    import dense_pt.retrieval.bm25 as bm25

    assert not hasattr(bm25, "HitChunk")
