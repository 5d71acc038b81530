"""Layout checks of the package: no import circle among ptsweep's modules (imports inside functions count too)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "ptsweep"


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every ``ptsweep/**/*.py`` (a package is its ``__init__.py``)."""
    mods = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _owner(name: str, mods: dict[str, Path]) -> str:
    """The module that defines ``name`` (``ptsweep.x.y.z`` -> the longest prefix that is a module; "" if none)."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name


def import_graph() -> dict[str, set[str]]:
    """Module -> the ptsweep modules it imports, at module level or inside functions. ``from ptsweep.x import y``
    is an edge to ``ptsweep.x.y`` when that is a module, else to ``ptsweep.x``; relative imports are resolved."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: the importing module's package, level - 1 packages up
                    pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
                    src = ".".join([*pkg[:len(pkg) - node.level + 1], *([node.module] if node.module else [])])
                else:
                    src = node.module or ""
                targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in mods else src for a in node.names]
            else:
                continue
            for target in targets:
                owner = _owner(target, mods) if target.split(".")[0] == "ptsweep" else ""
                if owner and owner != mod:
                    graph[mod].add(owner)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle as ``[a, b, ..., a]``, or ``[]`` when the graph has none (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(graph):
        if root in state:
            continue
        path, stack = [root], [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return []


def test_find_cycle_reports_a_circle_and_accepts_a_tree():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_import_graph_sees_imports_inside_functions():
    graph = import_graph()
    assert "ptsweep.train" in graph["ptsweep.sweeps.trainable"]  # imported inside the trainable only
    assert "ptsweep.sweeps.ledger" in graph["ptsweep.sweeps.trainable"]  # ``from ptsweep.sweeps import ledger``


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert not cycle, "import circle: " + " -> ".join(cycle)


def test_shared_sweep_names_import_no_other_sweeps_module():
    graph = import_graph()
    assert not {m for m in graph["ptsweep.sweeps.fields"] if m.startswith("ptsweep.sweeps")}


MAX_LINES = 450  # issue 20: one job per file; the few near the limit are one job each (models/pt.py: the encoder)


def test_every_module_is_short_and_says_its_job():
    too_long = {str(p.relative_to(REPO)): n for p in _modules().values()
                if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not too_long, f"files over {MAX_LINES} lines: {too_long}"
    no_doc = [str(p.relative_to(REPO)) for p in _modules().values()
              if p.read_text().strip() and not ast.get_docstring(ast.parse(p.read_text()))]
    assert not no_doc, f"modules without a docstring saying their job: {no_doc}"
