"""A study's results folder: the finished trial records that live in the repository (``sweep.results``).

A results folder holds ``study.json`` (name, sweep, the command's overrides and config, vocabulary size) and one
record per finished trial, ``trials/<trial_key>.json``: the ledger record, label, overrides, seed, source fingerprint
and commit, the config its trial key hashes and the in-loop learning curve. A record found only there is restored into
``<study>/trials/<key>/`` before a sweep plans (:func:`restore`), so the ledger counts it as finished; a trial
finished in runs/ is exported to the repository (:func:`export`). Every record read is checked (:func:`check_record`:
its key is the one this code computes from its config, and its overrides are that config's values); a results folder
of another study or sweep is refused (:func:`check_study`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from ptsweep.errors import SweepError
from ptsweep.identity import trial_config, trial_key
from ptsweep.io import read_json, resolve_path, write_atomic, write_json
from ptsweep.trials import ledger

RECORD_FORMAT = "ptsweep-trial-record/1"
STUDY_FORMAT = "ptsweep-study/1"
CURVE_FIELDS = ("step", "tokens", "val_loss", "val_loss_se", "unigram_loss", "no_context_loss", "context_gain",
                "context_gain_se", "mask_loss")
"""The numbers of each in-loop evaluation a record keeps (the learning curve)."""
MACHINE_PLACES = ("out_dir", "data.cache_dir")
"""Config keys that name where this machine keeps its files."""
PORTABLE_DROP = (*MACHINE_PLACES, "sweep.results", "sweep.report_only")
"""Config keys study.json leaves out: where this machine keeps its files, and how the command was invoked."""


class ResultsError(SweepError):
    """A results folder or record this code cannot use: one line naming the file."""


def folder(cfg) -> Path | None:
    """The results folder of ``cfg`` (``sweep.results`` resolved against the repository root), or None."""
    return resolve_path(cfg.sweep.results) if cfg.sweep.results else None


def dumps(obj: Any) -> str:
    """Deterministic JSON (sorted keys, one space indent, floats by repr, inf/nan as Infinity/NaN)."""
    return json.dumps(obj, indent=1, sort_keys=True) + "\n"


def _write_if_changed(path: Path, text: str) -> bool:
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)
    return True


# -- the study ---------------------------------------------------------------------------------------------------

def _read(path: Path, fmt: str) -> dict:
    """The JSON object in ``path`` of format ``fmt`` (a one-line ResultsError when it is not)."""
    try:
        obj = read_json(path)
    except json.JSONDecodeError as e:
        raise ResultsError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(obj, dict) or obj.get("format") != fmt:
        raise ResultsError(f"{path}: format {obj.get('format') if isinstance(obj, dict) else None!r}, this code "
                           f"reads {fmt!r}")
    return obj


def read_study(results_dir: Path) -> dict:
    """study.json of a results folder (ResultsError when it is missing or not one)."""
    path = Path(results_dir) / "study.json"
    try:
        return _read(path, STUDY_FORMAT)
    except FileNotFoundError:
        raise ResultsError(f"{path}: no study.json - not a results folder written by a ptsweep sweep") from None


PLAN_KEYS = {"lr-horizon": ("sweep.lr_horizon.steps", "sweep.lr_horizon.grid", "sweep.lr_horizon.baseline",
                            "sweep.lr_horizon.baseline_grid", "sweep.lr_horizon.width", "sweep.lr_horizon.scaling",
                            "sweep.lr_horizon.predict"),
             "scaling-curves": ("sweep.scales", "sweep.scaling", "sweep.match", "sweep.baseline.grid")}
"""Per sweep, the keys whose change makes another plan: a folder's report renders the plan that last wrote it, so a
command that changes one of them needs a folder of its own (seeds and models may grow in place, and :data:`GROWS`)."""
SET_LATER = ("sweep.lr_horizon.predict",)
"""Plan keys a folder may get once after it was written: a prediction is written down when the shorter budgets ran."""
GROWS = ("sweep.lr_horizon.steps", "sweep.lr_horizon.grid")
"""Plan keys whose list may gain values in place (a budget, an LR between or beyond the grid's): every record of the
smaller plan is a trial of the larger one, so the folder keeps them and its report renders the larger plan."""


def check_study(results_dir: Path, study: str, sweep: str, cfg) -> None:
    """Refuse a results folder that another study or sweep wrote, or one written under a plan other than ``cfg``'s
    (:data:`PLAN_KEYS`; a prediction set later, :data:`SET_LATER`, and lists that only grow, :data:`GROWS`, are the
    same plan); none yet: fine."""
    if not (Path(results_dir) / "study.json").exists():
        return
    got = read_study(results_dir)
    if (got.get("study"), got.get("sweep")) != (study, sweep):
        raise ResultsError(f"{results_dir}: results of study {got.get('study')!r} ({got.get('sweep')}), not of "
                           f"{study!r} ({sweep}): point sweep.results at this study's own folder")
    from ptsweep.config import flatten, to_dict

    now = json.loads(dumps(flatten(to_dict(cfg))))  # as study.json writes it
    for key in PLAN_KEYS.get(sweep, ()):
        was = got.get("config", {}).get(key)
        if key in got.get("config", {}) and was != now.get(key) and not (key in SET_LATER and not was) \
                and not (key in GROWS and set(was) <= set(now.get(key) or ())):
            raise ResultsError(f"{results_dir}: written with {key}={got['config'][key]}, this command has "
                               f"{now.get(key)}: another plan needs its own folder (sweep.results, sweep.study)")


def write_study(results_dir: Path, cfg, study: str, sweep: str, vocab: int) -> None:
    """study.json: name, sweep, vocab size, the command's Hydra overrides (None when called from Python) and its
    portable config (:data:`PORTABLE_DROP` left out)."""
    import os

    from ptsweep.config import flatten, to_dict
    from ptsweep.tracking import OVERRIDES_ENV

    config = {k: v for k, v in flatten(to_dict(cfg)).items() if k not in PORTABLE_DROP}
    command = json.loads(os.environ[OVERRIDES_ENV]) if os.environ.get(OVERRIDES_ENV) else None
    if command is not None:
        command = portable_command(command, results_dir)
    _write_if_changed(Path(results_dir) / "study.json", dumps({"format": STUDY_FORMAT, "study": study,
                                                               "sweep": sweep, "vocab_size": int(vocab),
                                                               "command": command, "config": config}))


def portable_command(command: Iterable[str], results_dir: Path) -> list[str]:
    """The command's overrides as a clone of the repository would type them: ``sweep.results`` as the results
    folder's path inside the repository that holds it (the nearest folder above it with a pyproject.toml), and this
    machine's places (``out_dir``, ``data.cache_dir``) left out."""
    results_dir = Path(results_dir).resolve()
    home = next((p for p in results_dir.parents if (p / "pyproject.toml").exists()), None)
    out = []
    for arg in command:
        key = arg.partition("=")[0].lstrip("+~")
        if key in MACHINE_PLACES:
            continue
        if key == "sweep.results" and home is not None:
            arg = f"sweep.results={results_dir.relative_to(home).as_posix()}"
        out.append(arg)
    return out


def study_config(results_dir: Path, **overrides: Any):
    """The RunConfig of the command recorded in study.json, composed again from its overrides (or from its config
    when it has none); dotted ``overrides`` (e.g. out_dir) applied last."""
    from ptsweep.config import compose, from_dict, with_overrides

    study = read_study(results_dir)
    if study.get("command") is not None:
        return with_overrides(compose(list(study["command"])), overrides)
    return with_overrides(from_dict({}), {**study["config"], **overrides})


# -- records -----------------------------------------------------------------------------------------------------

def record_of(trial_dir: Path, base: Mapping[str, Any]) -> dict | None:
    """The repository record of a finished trial folder of runs/ (None unless its ledger record is final and its
    overrides on ``base``, the sweep's trial base config, give its key)."""

    trial_dir = Path(trial_dir)
    led = ledger.read_ledger(trial_dir.parent.parent, trial_dir.name)
    if led is None:
        return None
    info = read_json(trial_dir / "trial.json") if (trial_dir / "trial.json").exists() else {}
    label = info.get("label", led.get("label", ""))
    overrides = info.get("overrides", led.get("overrides", {}))
    if trial_key(base, overrides, label) != trial_dir.name:
        return None
    config = trial_config(base, overrides)
    return {"format": RECORD_FORMAT, "trial_key": trial_dir.name, "label": label, "overrides": overrides,
            "config": config, "seed": config.get("seed"),
            "source_sha": led.get("source_sha") or info.get("source_sha", ""),
            "git_commit": info.get("git_commit", ""), "record": {k: v for k, v in led.items() if k != "overrides"},
            "curve": read_curve(trial_dir / "history.jsonl")}


def read_curve(history: Path) -> list[dict]:
    """The in-loop evaluations of a trial's history.jsonl (:data:`CURVE_FIELDS`, in step order, a step's last
    copy); none when the file is missing."""
    rows = {}
    if Path(history).exists():
        for line in Path(history).read_text().splitlines():
            rec = json.loads(line)
            if "val_loss" in rec and "context_gain" in rec:
                rows[int(rec["step"])] = {k: rec[k] for k in CURVE_FIELDS if k in rec}
    return [rows[s] for s in sorted(rows)]


def check_record(rec: Mapping[str, Any], path: Path) -> None:
    """One-line ResultsError unless ``rec`` is a record this code would write for the trial it names."""
    key, config = rec["trial_key"], rec["config"]
    if Path(path).suffix == ".json" and Path(path).stem != key:
        raise ResultsError(f"{path}: holds the record of trial {key}, not of {Path(path).stem}")
    computed = trial_key(config, {}, rec["label"])
    if computed != key:
        raise ResultsError(f"{path}: trial key {key} was made under an identity scheme this code does not produce "
                           f"(its config hashes to {computed} now); re-run the trial or read it with the commit "
                           f"that wrote it ({rec.get('git_commit') or 'unknown'})")
    bad = sorted(k for k, v in trial_config({}, rec["overrides"]).items() if config.get(k) != v)
    if bad:
        raise ResultsError(f"{path}: trial key {key} does not match its overrides ({', '.join(bad)} differ from "
                           f"the config the key hashes)")


def load_record(path: Path) -> dict:
    """A record file, checked (:func:`check_record`)."""
    rec = _read(path, RECORD_FORMAT)
    check_record(rec, path)
    return rec


def record_paths(results_dir: Path) -> list[Path]:
    return sorted((Path(results_dir) / "trials").glob("*.json"))


def export(study_dir: Path, results_dir: Path, base: Mapping[str, Any], keys: Iterable[str] | None = None) -> int:
    """Write the record of every finished trial of ``study_dir`` (or of ``keys``) planned on ``base`` to the
    results folder; returns how many files were new or changed."""
    trials = Path(study_dir) / "trials"
    dirs = [trials / k for k in keys] if keys is not None else sorted(p for p in trials.glob("*") if p.is_dir())
    n = 0
    for d in dirs:
        rec = record_of(d, base) if d.is_dir() else None
        if rec is not None:
            n += _write_if_changed(Path(results_dir) / "trials" / f"{d.name}.json", dumps(rec))
    return n


def restore(results_dir: Path, study_dir: Path) -> int:
    """Copy every record of the results folder whose trial has no ledger record in ``study_dir`` into it (the
    ledger's ``final.json``, ``trial.json``, ``history.jsonl``); returns how many were restored."""

    n = 0
    for path in record_paths(results_dir):
        rec = load_record(path)
        key = rec["trial_key"]
        if ledger.read_ledger(study_dir, key) is not None:
            continue
        tdir = ledger.trial_dir(study_dir, key)
        write_json(tdir / "trial.json", {"trial_key": key, "label": rec["label"], "overrides": rec["overrides"],
                                         "source_sha": rec["source_sha"], "git_commit": rec["git_commit"],
                                         "restored_from": str(path)})
        write_atomic(tdir / "history.jsonl", "".join(json.dumps(r) + "\n" for r in rec["curve"]))
        write_json(tdir / "final.json", {**rec["record"], "overrides": rec["overrides"]})
        n += 1
    return n


def ledger_records(study_dir: Path) -> pd.DataFrame:
    """One row per finished trial of a runs/ study folder (its ledger): trial_key, label, its overrides (dotted
    keys) and the ledger record's scalar fields."""

    rows = []
    for d in sorted(p for p in (Path(study_dir) / "trials").glob("*") if p.is_dir()):
        rec = ledger.read_ledger(study_dir, d.name)
        if rec is None or "trial_key" not in rec:  # unfinished, or the tracker's record of a dead process
            continue
        scalars = {k: v for k, v in rec.items() if isinstance(v, (int, float, str)) or v is None}
        rows.append({**scalars, "trial_key": rec["trial_key"], "label": rec.get("label", ""),
                     **rec.get("overrides", {})})
    return pd.DataFrame(rows)

