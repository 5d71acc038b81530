"""The paper's model stays apart from its variants, and the shared training code from PT: ``models/pt.py`` and
``pt_attention.py`` import nothing from ``ptsweep/variants`` and name no variant; the training loop, the step and the
MLM loss (``models/__init__.py``; only ``build_model`` dispatches to PT) import no PT-only module."""

from __future__ import annotations

import ast
import subprocess
import sys

from test_layout import REPO, import_graph

from ptsweep.variants import VARIANTS

PT_ONLY = ("ptsweep.models.pt", "ptsweep.variants", "ptsweep.train.message_stats")
"""Module prefixes that only PT uses (the core model and its dense/blockwise paths, its variants, its message
statistics)."""
CORE = ("ptsweep.models.pt", "ptsweep.models.pt_attention")


def _pt_only(module: str) -> bool:
    return module.startswith(PT_ONLY)


def test_the_core_model_imports_no_variant_and_names_none():
    graph = import_graph()
    for module in CORE:
        assert not {m for m in graph[module] if m.startswith("ptsweep.variants")}, module
        source = (REPO / (module.replace(".", "/") + ".py")).read_text()
        named = [name for name in [*VARIANTS, "lever", "row_rms"] if name in source]
        assert not named, f"{module} names {named}"


def test_the_training_loop_and_step_import_no_pt_only_module():
    graph = import_graph()
    for module in ("ptsweep.train.loop", "ptsweep.train.step"):  # monitor: message_stats when chosen only
        assert not {m for m in graph[module] if _pt_only(m)}, module


def test_the_mlm_loss_names_no_pt_module_outside_the_model_registry():
    tree = ast.parse((REPO / "ptsweep/models/__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "build_model":
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.ImportFrom):
                assert not _pt_only(sub.module or ""), (node.name if hasattr(node, "name") else "", sub.module)
            if isinstance(sub, ast.Name):
                assert sub.id != "ProbabilisticTransformer", getattr(node, "name", "")


def test_importing_the_training_code_loads_no_pt_only_module():
    code = ("import sys, ptsweep.models, ptsweep.train.loop, ptsweep.train.step; "
            "print(' '.join(m for m in sys.modules if m.startswith('ptsweep')))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True,
                            text=True).stdout.split()
    assert "ptsweep.train.loop" in loaded and not [m for m in loaded if _pt_only(m)]
