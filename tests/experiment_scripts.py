"""The scripts under experiments/ as modules, for the tests that exercise them (they are not an importable package)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(rel: str) -> ModuleType:
    """The script at ``rel`` (from the repository root) executed as a module named after its file."""
    path = ROOT / rel
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
