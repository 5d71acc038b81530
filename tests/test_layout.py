"""Layout checks of the package: no import circle among ptsweep's modules (imports inside functions count too)."""

from __future__ import annotations

import ast
import re
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
    assert "ptsweep.train" in graph["ptsweep.trials.trainable"]  # imported inside the trainable only
    assert "ptsweep.trials.ledger" in graph["ptsweep.trials.trainable"]  # ``from ptsweep.trials import ledger``


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert not cycle, "import circle: " + " -> ".join(cycle)


def test_sweep_machinery_and_reports_import_no_command():
    graph = import_graph()
    machinery = {m: {d for d in deps if d.startswith(("ptsweep.sweeps", "ptsweep.reports"))}
                 for m, deps in graph.items() if m.startswith("ptsweep.trials")}
    reports = {m: {d for d in deps if d.startswith("ptsweep.sweeps")}
               for m, deps in graph.items() if m.startswith("ptsweep.reports")}
    assert "ptsweep.trials.runner" in machinery and "ptsweep.reports.demo_report" in reports
    assert not any(machinery.values()), machinery
    assert not any(reports.values()), reports


MAX_LINES = 400
LONG_FILES: dict[str, str] = {}
"""Files allowed over MAX_LINES, with why. Shrink this list; do not grow it."""


def test_every_module_is_short_and_says_its_job():
    too_long = {str(p.relative_to(REPO)): n for p in _modules().values()
                if (n := len(p.read_text().splitlines())) > MAX_LINES and str(p.relative_to(REPO)) not in LONG_FILES}
    assert not too_long, f"files over {MAX_LINES} lines: {too_long}"
    no_doc = [str(p.relative_to(REPO)) for p in _modules().values()
              if p.read_text().strip() and not ast.get_docstring(ast.parse(p.read_text()))]
    assert not no_doc, f"modules without a docstring saying their job: {no_doc}"


MAX_FUNCTION_LINES = 60
LONG_FUNCTIONS: dict[str, str] = {}
"""Functions allowed over MAX_FUNCTION_LINES (``path::name``), with why. Shrink this list; do not grow it."""


def _function_lengths() -> dict[str, int]:
    """``path::name`` -> lines (decorators excluded) of every function and method in ptsweep/, nested ones too."""
    out = {}
    for path in _modules().values():
        rel = path.relative_to(REPO).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{rel}::{node.name}"
                out[key] = max(out.get(key, 0), node.end_lineno - node.lineno + 1)
    return out


def test_no_function_is_longer_than_a_screen():
    too_long = {k: n for k, n in _function_lengths().items() if n > MAX_FUNCTION_LINES and k not in LONG_FUNCTIONS}
    assert not too_long, f"functions over {MAX_FUNCTION_LINES} lines (split them): {too_long}"


HISTORY = re.compile(r"\bissues?[ -]?#?\d+|\bsessions?[ -]\d+|\bwork[ -]periods?\b", re.IGNORECASE)
"""A line that tells the project's past (by issue or session number, or by period of work) instead of explaining the
code or stating a result by date and commit. The samples below are built from parts so that this file does not match
its own pattern."""
HISTORY_SUFFIXES = {".py", ".yaml", ".yml", ".md", ".sh", ".ipynb"}
"""Code, configs, Markdown, shell scripts and notebooks: every text a reader outside the project reads."""
HISTORY_SKIP = {".git", ".venv", "runs", "__pycache__", ".pytest_cache", ".ipynb_checkpoints"}
"""Folders that are not the project's text (outputs, environments, caches)."""
HISTORY_PENDING: set[str] = set()
"""Files still holding such lines, owned by work in progress elsewhere; remove each once it is cleaned."""


def _project_texts() -> list[Path]:
    """Every file of the project (outside HISTORY_SKIP) with a suffix in HISTORY_SUFFIXES, plus the Makefile."""
    found = [REPO / "Makefile"]
    for path in sorted(REPO.rglob("*")):
        parts = set(path.relative_to(REPO).parts)
        if path.suffix in HISTORY_SUFFIXES and path.is_file() and not parts & HISTORY_SKIP and \
                not any(p.endswith(".egg-info") for p in parts):
            found.append(path)
    return found


def history_lines(paths: list[Path], root: Path = REPO) -> list[str]:
    """``path:line: text`` (relative to ``root``) of each line of ``paths`` that HISTORY matches (a notebook is read
    as its JSON text)."""
    found = []
    for path in paths:
        rel = path.relative_to(root).as_posix()
        if rel in HISTORY_PENDING:
            continue
        found += [f"{rel}:{i}: {line.strip()}" for i, line in enumerate(path.read_text().splitlines(), 1)
                  if HISTORY.search(line)]
    return found


def test_no_line_narrates_history_by_issue_or_session():
    paths = _project_texts()
    rels = {p.relative_to(REPO).as_posix() for p in paths}
    assert {"README.md", "ptsweep/cli.py", "conf/config.yaml", "experiments/demo/README.md"} <= rels
    assert any(r.endswith(".sh") for r in rels) and any(r.endswith(".ipynb") for r in rels)
    found = history_lines(paths)
    assert not found, "state the present instead (results by date and commit; history belongs in git log):\n" + \
        "\n".join(found)


def test_the_history_check_reads_markdown_shell_and_notebooks(tmp_path):
    """A cited work-log entry in a Markdown file, a shell script or a notebook is found (the check is not blind to
    the suffixes it claims to read)."""
    entry = "Session" + " 17"
    for name, text in (("a.md", f"## {entry}: results"), ("b.sh", f"# see {entry}"),
                       ("c.ipynb", '{"cells": [{"source": ["' + entry + '"]}]}')):
        (tmp_path / name).write_text("fine line\n" + text + "\n")
    assert [f.split(":")[0] for f in history_lines(sorted(tmp_path.iterdir()), tmp_path)] == ["a.md", "b.sh", "c.ipynb"]


def test_the_history_pattern_flags_numbers_not_words():
    issue, session, period = "Issue", "session", "work"
    assert HISTORY.search(f"fixed in {issue}-16's checks") and HISTORY.search(f"({session} 9: 37 %)")
    assert HISTORY.search(f"before the {period} period") and HISTORY.search(f"{session}s 14-17")
    assert HISTORY.search(f"see {issue.lower()} #29")
    assert not HISTORY.search("ray_session(cfg.ray)") and not HISTORY.search("a session-scoped fixture")
    assert not HISTORY.search("the issue this refuses") and not HISTORY.search("session_dir=/tmp/ray/session_2026")
