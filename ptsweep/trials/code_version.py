"""Which code a trial ran: a fingerprint of ptsweep's Python source (``source_sha``), taken by the driver and checked
by every Ray worker before training (workers import ptsweep from the working tree, edits included): a worker that
sees other code refuses the trial (status ``REFUSED``, no ledger record; the next run of the command trains it).
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from ptsweep.errors import SourceChanged

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the ptsweep package
SOURCE_CHANGED = "ptsweep's source changed after the sweep started"  # prefix of the worker's error
REFUSED = "refused"  # the status a worker reports for a trial it did not train (never a ledger record)


def source_fingerprint(root: Path = PACKAGE_DIR) -> str:
    """sha1 (12 hex digits) over the relative path and bytes of every ``*.py`` file under ``root`` (caches and
    compiled files excluded): equal exactly when the importable source is equal."""
    h = hashlib.sha1()
    root = Path(root)
    for path in sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def check_worker_source(expected: str, root: Path = PACKAGE_DIR) -> str:
    """The worker's fingerprint; raises :class:`SourceChanged` (one line) when it is not ``expected``."""
    actual = source_fingerprint(root)
    if expected and actual != expected:
        raise SourceChanged(f"{SOURCE_CHANGED} (driver saw {expected}, this worker sees {actual} in {root}): not "
                            f"training on code nobody submitted; commit or revert the edit, then re-run the same "
                            f"command (finished trials are kept)")
    return actual


def git_commit() -> str:
    """``git rev-parse HEAD`` of the repository holding ptsweep, or "unknown"."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PACKAGE_DIR, capture_output=True, text=True,
                             timeout=10)
        return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
