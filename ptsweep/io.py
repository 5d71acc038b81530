"""Files on disk: where the repo root is and how relative paths resolve against it (not against the cwd, because
Ray trials run in their own working directories); JSON records and atomic writes (a reader never sees half a file)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def repo_root() -> Path:
    """The repository root: $PTSWEEP_ROOT, else the folder holding pyproject.toml above this package, else cwd."""
    env = os.environ.get("PTSWEEP_ROOT")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve().parents[1]
    return here if (here / "pyproject.toml").exists() else Path.cwd()


def resolve_path(p: str | os.PathLike[str]) -> Path:
    """Absolute paths stay; relative ones resolve against :func:`repo_root` (not the cwd)."""
    path = Path(p).expanduser()
    return path if path.is_absolute() else repo_root() / path


def jsonable(v: Any) -> Any:
    """Plain JSON types: tensors / numpy scalars -> Python numbers, Paths -> str, tuples -> lists."""
    if isinstance(v, Mapping):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, Path):
        return str(v)
    if hasattr(v, "item"):  # torch / numpy scalars
        try:
            return v.item()
        except (ValueError, RuntimeError):
            pass
    if hasattr(v, "tolist"):
        return v.tolist()
    return str(v)


def append_line(path: Path, line: str) -> None:
    """Append one line with a single ``os.write`` on an O_APPEND descriptor (safe for concurrent writers)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (line.rstrip("\n") + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def replace_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """``write`` a temporary file of this call's own beside ``path``, then ``os.replace`` it onto ``path``: readers
    never see a half-written file, and concurrent writers do not rename each other's file away."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    write(Path(tmp))
    os.replace(tmp, path)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (:func:`replace_atomically`)."""
    replace_atomically(path, lambda tmp: tmp.write_text(text))


def write_json(path: Path, obj: Any) -> None:
    """Atomic JSON write (temporary file + os.replace); non-finite floats as Infinity/NaN."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(jsonable(obj), indent=1))


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())
