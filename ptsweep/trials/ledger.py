"""The trial ledger of a study folder: ``<study>/trials/<trial_key>/`` holds ``trial.json`` (written at start) and,
once the trial is over, ``final.json``, the ledger record (status ok | diverged | failed | early_stopped, error, the
final metrics of ``train.run``): "finished, never run again". A trial stopped by Ctrl-C records ``interrupted.json``
instead and runs again on resume.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Mapping

from ptsweep.io import append_line, read_json, write_json
from ptsweep.metric_keys import LEDGER_KEYS
from ptsweep.trials.fields import finite_or_inf

STARTS_LOG = "trial_starts.log"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


def trial_dir(study_dir: Path, key: str) -> Path:
    return Path(study_dir) / "trials" / key


def read_ledger(study_dir: Path, key: str) -> dict | None:
    """The ledger record (``final.json``) of a finished trial, or None if it has not finished."""
    path = trial_dir(study_dir, key) / "final.json"
    try:
        rec = read_json(path)
    except (OSError, json.JSONDecodeError):  # none yet (FileNotFoundError) or unreadable
        return None
    # no status, or train.run's record of a run stopped by Ctrl-C: not finished
    if not isinstance(rec, dict) or rec.get("status", "interrupted") == "interrupted":
        return None
    # a record without trial_key is the tracker's (the process died before the trainable's): still "finished"; one
    # of a trial ASHA stopped says "failed" with SystemExit/_EarlyStopped: an early stop at its last report
    if "trial_key" not in rec and rec.get("status") in ("failed", "early_stopped") and \
            str(rec.get("error", "")).startswith(("SystemExit", "_EarlyStopped")):
        prog = path.parent / "progress.json"
        last = read_json(prog) if prog.exists() else {}
        rec = {**rec, **last, "status": "early_stopped", "error": ""}
    return rec


def record_start(study_dir: Path, key: str, label: str, overrides: Mapping[str, Any], **info: Any) -> None:
    """``trial.json`` (key, label, overrides, start time, then ``info``: pid, node, host, source, commit) and one
    line in the study's ``trial_starts.log``."""
    write_json(trial_dir(study_dir, key) / "trial.json", {"trial_key": key, "label": label, "overrides": overrides,
                                                          "started_at": _now(), **info})
    append_line(Path(study_dir) / STARTS_LOG, f"{_now()} start {key}")


def record(study_dir: Path, key: str, label: str, overrides: Mapping[str, Any], metrics: Mapping[str, Any],
           source_sha: str = "") -> dict:
    """Write the ledger record ``final.json`` of a finished trial (val_loss = inf unless finite) and return it."""
    rec = {"trial_key": key, "label": label, "overrides": dict(overrides),
           **{k: v for k, v in metrics.items() if k != "history"},
           "finished_at": _now(), "source_sha": source_sha}
    rec["val_loss"] = finite_or_inf(rec.get("val_loss"))
    rec.setdefault("error", "")
    write_json(trial_dir(study_dir, key) / "final.json", rec)
    return rec


def interrupt_marker(study_dir: Path) -> Path:
    """``<study>/.interrupted``: created by the first Ctrl-C (``ray_session.interrupt_guard``); a trial stopped while
    it exists was interrupted, not pruned."""
    return Path(study_dir) / ".interrupted"


def record_interrupt(study_dir: Path, key: str, last: Mapping[str, Any]) -> None:
    """``interrupted.json`` with the last reported metrics: not a ledger record, the trial runs again (from its
    checkpoint) on resume."""
    write_json(trial_dir(study_dir, key) / "interrupted.json", {"trial_key": key, "status": "interrupted", **last,
                                                                "at": _now()})


def with_ledger_metrics(df, study_dir: Path, names=LEDGER_KEYS):
    """``df`` (a DataFrame, one row per trial, column trial_key) plus the final metrics ``names`` from each trial's
    ledger record (NaN where a record lacks them, e.g. runs without a test split)."""
    df = df.copy()
    recs = [read_ledger(study_dir, k) or {} for k in df["trial_key"]]
    for name in names:
        df[name] = [float(r[name]) if isinstance(r.get(name), (int, float)) else math.nan for r in recs]
    return df
