"""Shared machinery of the sweeps: Ray Tune runs every trial, Optuna proposes trials where a search is needed.

Public API (used by tune_small, verify_transfer, scaling_curves, demo, coord_check, lr_transfer):

    with ray_session(cfg.ray):                         # local Ray with token auth (or RAY_ADDRESS / ray.address)
        df = run_trials(cfg, [{"optim.lr": 1e-3}, ...], study_dir, "final", tags=[...])   # fixed list
        df = run_search(cfg, {"optim.lr": (1e-4, 1e-2)}, study_dir, "search", num_samples=8, seed=0)  # Optuna

    study_name(cfg, "tune-small") / study_path(cfg, "tune-small")    runs/<study> (absolute)
    sweep_tags(sweep, model_cfg)                                       W&B tags (sweep, model, width)
    save_table(df, study_dir, "trials")                                trials.parquet + trials.csv
    log_summary(cfg, study_dir, name, tables, images, summary)         one W&B summary run per sweep
    git_commit(), write_json(path, obj), read_json(path)

Each trial's config is the base RunConfig plus dotted overrides (``config.with_overrides``); the trainable calls
``train.run`` with a tracker from ``cfg.tracker`` (one W&B run per trial, group = study, tags), so every trial also
lands in the local results table ``<out_dir>/results.jsonl``.

Ledger and resume. Every trial has a stable ``trial_key`` = [label-]sha1(resolved trial config minus bookkeeping keys
such as out_dir, tracker, ray, sweep)[:10], and a folder ``<study>/trials/<trial_key>/`` holding ``trial.json``
(written at start: key, label, overrides) and, once the trial is over, ``final.json`` (the ledger record: status
ok | diverged | failed | early_stopped, error, val_loss and the other final metrics of ``train.run``; written
atomically). A ledger entry means "finished, never run again". A worker that finds other ptsweep source than the
driver (``code_version``) reports status "refused" and writes no record: the sweep stops with one line.

- fixed lists (``run_trials``): trials whose ``final.json`` exists are not submitted to Ray at all;
- Optuna searches (``run_search``): the study lives in ``<study>/optuna.journal`` (``sweeps.optuna_store``); a
  re-run asks Optuna only for the trials missing to reach ``num_samples`` (a larger ``num_samples`` extends the same
  study), re-queues trials that were interrupted, and refuses another search space with one line. The trainable
  itself also checks the ledger first and, when the trial already finished (killed after ``final.json``), reports
  the recorded metrics instead of training again.

Ctrl-C (``sweeps.ray_session.interrupt_guard``): the first one stops the Ray experiment; trials stopped then record
``interrupted.json`` (no ledger record: they run again, from their checkpoint); ``SweepInterrupted`` tells the CLI to
print the resume command. The second one kills the local Ray and exits.

Every actual start of training appends one line ``<time> start <trial_key>`` to ``<study>/trial_starts.log``
(tests count these to prove nothing is re-run). A trial started again after being killed mid-run (no ledger record)
resumes from its own last checkpoint (``train.checkpoint_every_s``; ``train.resume`` is set when one exists).

Failures never kill a sweep: an exception inside a trial (bad override, OOM, ...) is caught in the trainable and
recorded as status "failed" with its one-line error and val_loss = inf; a diverged run (``train.run`` returns
diverged) is recorded as status "diverged" with val_loss = inf.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ptsweep import metric_keys
from ptsweep.config import TRANSFER_KEYS, RunConfig, flatten, to_dict, with_overrides
from ptsweep.sweeps.code_version import (REFUSED, SOURCE_CHANGED, SourceChanged, check_worker_source, git_commit,
                                        source_fingerprint)
from ptsweep.sweeps.ray_session import (SweepError, SweepInterrupted, interrupt_guard, make_stopper, quiet_worker_exit,
                                        ray_session)

__all__ = [
    "SweepError",
    "SweepInterrupted",
    "transfer_path",
    "read_transfer",
    "METRIC",
    "MODE",
    "ray_session",
    "run_trials",
    "run_search",
    "study_name",
    "study_path",
    "sweep_tags",
    "trial_key",
    "read_ledger",
    "save_table",
    "log_summary",
    "git_commit",
    "write_json",
    "read_json",
    "optuna_study_from_table",
]

METRIC, MODE = "val_loss", "min"
TRIAL_FIELD = "__trial__"
"""param_space key that carries the trial key of a fixed-list trial (never a config key: no dot)."""
STARTS_LOG = "trial_starts.log"
INTERRUPT_MARKER = ".interrupted"
"""Written into the study folder by the first Ctrl-C: a trial stopped while it exists was interrupted, not pruned."""
# Keys that do not change what a trial computes: left out of the trial key (so e.g. a different out_dir, W&B mode
# or Ray setting still finds the finished trials).
_KEY_EXCLUDE_PREFIXES = ("tracker.", "ray.", "sweep.")
_KEY_EXCLUDE = {"out_dir", "run_name", "preset", "data.cache_dir", "data.num_proc", "train.progress",
                "train.threads", "train.resume", "train.checkpoint", "train.checkpoint_every_s", "train.device",
                "train.stop_after_steps", "train.log_every"}
# Final metrics copied from the ledger into result tables (in this order; history is never copied).
TABLE_METRICS = ("val_loss", "status", "error", "steps", "tokens", "best_val_loss", "val_loss_init", "train_loss",
                 "params", "non_embedding_params", "flops_per_token", "tokens_per_s", "wall_s", "device",
                 "source_sha", *metric_keys.LEDGER_KEYS)


TUNE_STUDY = "tune-small"
"""Default study name of tune-small: where verify-transfer / scaling-curves look for transfer.yaml."""


def transfer_path(cfg: RunConfig) -> Path:
    """``sweep.transfer_file`` or ``<out_dir>/tune-small/transfer.yaml`` (absolute)."""
    return Path(cfg.sweep.transfer_file or Path(cfg.out_dir) / TUNE_STUDY / "transfer.yaml").resolve()


def read_transfer(cfg: RunConfig) -> tuple[dict[str, float], dict, Path]:
    """(the 7 transferred values by dotted key, provenance, path) from transfer.yaml; SweepError if missing or if it
    was tuned under other settings (``sweep.provenance.check_transfer``; ``provenance["mismatch"]`` lists them when
    ``sweep.allow_transfer_mismatch`` lets the sweep proceed)."""
    import yaml

    path = transfer_path(cfg)
    if not path.exists():
        raise SweepError(f"sweep.transfer_file: {path} not found - run `make tune-small` first "
                         f"(or point sweep.transfer_file=... to a transfer.yaml)")
    doc = yaml.safe_load(path.read_text()) or {}
    values = doc.get("values", doc)
    missing = [k for k in TRANSFER_KEYS if k not in values]
    if missing:
        raise SweepError(f"sweep.transfer_file: {path} lacks {', '.join(missing)}")
    provenance = dict(doc.get("provenance", {}))
    from ptsweep.sweeps.provenance import check_transfer  # SweepError naming mismatched settings (or records them)

    provenance["mismatch"] = check_transfer(cfg, provenance, path)
    return {k: float(values[k]) for k in TRANSFER_KEYS}, provenance, path


# --------------------------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------------------------
def _jsonable(v: Any) -> Any:
    from ptsweep.tracking import _jsonable as tj

    return tj(v)


def write_json(path: Path, obj: Any) -> None:
    """Atomic JSON write (temporary file + os.replace); non-finite floats as Infinity/NaN."""
    from ptsweep.tracking import write_atomic

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(_jsonable(obj), indent=1))


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def study_name(cfg: RunConfig, default: str) -> str:
    """``sweep.study`` or the sweep's default name (e.g. "tune-small")."""
    return cfg.sweep.study or default


def study_path(cfg: RunConfig, default: str) -> Path:
    """Absolute ``<out_dir>/<study>``."""
    return (Path(cfg.out_dir) / study_name(cfg, default)).resolve()


def sweep_tags(sweep: str, model_cfg) -> list[str]:
    """W&B tags of a trial: sweep, model and width."""
    return [f"sweep={sweep}", f"model={model_cfg.name}", f"width={model_cfg.width}"]


def _one_line(e: BaseException) -> str:
    return (f"{type(e).__name__}: {e}".splitlines() or [type(e).__name__])[0][:500]


def _finite_or_inf(x: Any) -> float:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return math.inf
    return x if math.isfinite(x) else math.inf


# --------------------------------------------------------------------------------------------------------------
# Trial keys and the ledger
# --------------------------------------------------------------------------------------------------------------
def _norm(v: Any) -> Any:
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    return v


def trial_key(base: Mapping[str, Any], overrides: Mapping[str, Any], label: str = "") -> str:
    """Stable key of a trial: ``[label-]`` + sha1 of the flattened base config (a nested dict from ``to_dict``)
    with the overrides applied, leaving out bookkeeping keys (``_KEY_EXCLUDE``). Same computation, same key."""
    flat = flatten(dict(base)) if any(isinstance(v, dict) for v in base.values()) else dict(base)
    flat.update(overrides)
    if "model.name" in overrides:  # switching models drops the other model's keys (as with_overrides does)
        flat = {k: v for k, v in flat.items() if not k.startswith("model.") or k in overrides or k == "model.name"}
    keep = {k: _norm(v) for k, v in sorted(flat.items())
            if k not in _KEY_EXCLUDE and not k.startswith(_KEY_EXCLUDE_PREFIXES)}
    digest = hashlib.sha1(json.dumps(keep, sort_keys=True).encode()).hexdigest()[:10]
    return f"{label}-{digest}" if label else digest


def trial_dir(study_dir: Path, key: str) -> Path:
    return Path(study_dir) / "trials" / key


def read_ledger(study_dir: Path, key: str) -> dict | None:
    """The ledger record (``final.json``) of a finished trial, or None if it has not finished."""
    path = trial_dir(study_dir, key) / "final.json"
    if not path.exists():
        return None
    try:
        rec = read_json(path)
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(rec, dict) or "status" not in rec:
        return None
    if rec.get("status") == "interrupted":  # train.run's record of a run stopped by Ctrl-C: not finished
        return None
    # train.run's tracker also writes final.json (without trial_key) just before the trainable's record: a record
    # without trial_key is the tracker's, i.e. the process died in between; it still means "finished". A trial
    # stopped by ASHA ends train.run with SystemExit/_EarlyStopped, which the tracker records as "failed": that is
    # an early stop, with the metrics of its last report.
    if "trial_key" not in rec and rec.get("status") in ("failed", "interrupted", "early_stopped") and \
            str(rec.get("error", "")).startswith(("SystemExit", "_EarlyStopped")):
        prog = path.parent / "progress.json"
        last = read_json(prog) if prog.exists() else {}
        rec = {**rec, **last, "status": "early_stopped", "error": ""}
    return rec


def _record(study_dir: Path, key: str, label: str, overrides: Mapping[str, Any], metrics: Mapping[str, Any],
            source_sha: str = "") -> dict:
    rec = {"trial_key": key, "label": label, "overrides": dict(overrides),
           **{k: v for k, v in metrics.items() if k != "history"},
           "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "source_sha": source_sha}
    rec["val_loss"] = _finite_or_inf(rec.get("val_loss"))
    rec.setdefault("error", "")
    write_json(trial_dir(study_dir, key) / "final.json", rec)
    return rec


# --------------------------------------------------------------------------------------------------------------
# The trainable (runs inside a Ray worker)
# --------------------------------------------------------------------------------------------------------------
def _report_subset(m: Mapping[str, Any]) -> dict:
    out = {"val_loss": _finite_or_inf(m.get("val_loss")), "tokens": float(m.get("tokens", 0) or 0),
           "steps": int(m.get("step", m.get("steps", 0)) or 0)}
    for k in ("status", "error", "trial_key", "train_loss", "best_val_loss"):
        if k in m:
            v = m[k]
            out[k] = _finite_or_inf(v) if k in ("train_loss", "best_val_loss") else str(v)
    for k in ("val_loss_se", "unigram_loss", "gain_over_unigram", "gain_over_unigram_se", "no_context_loss",
              "context_gain", "context_gain_se", "test_loss", "test_loss_se", "test_context_gain",
              "test_context_gain_se"):  # every loss with its noise and its baselines (NaN stays NaN: not estimated)
        if isinstance(m.get(k), (int, float)):
            out[k] = float(m[k])
    return out


class _EarlyStopped(Exception):
    """Raised inside a trial once Tune has stopped it (ASHA): ends train.run at its next evaluation (train.run
    records the run with this ``status``)."""

    status = "early_stopped"


def _stop_requested() -> bool:
    """True once Tune has asked this trial to stop (its session is finishing or already gone)."""
    try:
        from ray.train._internal.session import get_session

        session = get_session()
        return session is None or session.stop_event.is_set()
    except Exception:  # noqa: BLE001 - private Ray API: never let it break a trial
        return False


def _node_id() -> str:
    """The Ray node this trial runs on (recorded in trial.json; multi-node runs show where each trial ran)."""
    try:
        import ray

        return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001
        return ""


def _trainable(config: dict, *, base: dict, fixed: dict, table: dict, study_dir: str, threads: int,
               source: str = "") -> None:
    """Ray Tune function trainable: one ``train.run`` of base + overrides; never raises for a failed run. When
    ptsweep's source on disk is not the driver's ``source`` fingerprint (``code_version``) it reports status
    "refused" without training or a ledger record: the trial runs again on the next invocation."""
    import torch
    from ray import tune

    from ptsweep import train
    from ptsweep.config import from_dict
    from ptsweep.tracking import make_tracker

    quiet_worker_exit()
    study = Path(study_dir)
    if TRIAL_FIELD in config:  # fixed list: the key was computed in the driver
        key = config[TRIAL_FIELD]
        label = table[key]["label"]
        overrides = {**fixed, **table[key]["overrides"]}
    else:  # Optuna: the proposed dotted params
        label = table.get("__label__", "")
        overrides = {**fixed, **{k: v for k, v in config.items() if "." in k}}
        key = trial_key(base, overrides, label)

    done = read_ledger(study, key)
    if done is not None:  # finished before an interruption: report the record, do not train again
        tune.report(_report_subset({**done, "trial_key": key}))
        return

    try:
        source_sha = check_worker_source(source)
    except SourceChanged as e:
        print(f"[ptsweep] trial {key} not run: {e}", file=sys.stderr)
        tune.report(_report_subset({"status": REFUSED, "error": str(e), "val_loss": math.inf, "trial_key": key}))
        return
    tdir = trial_dir(study, key)
    tdir.mkdir(parents=True, exist_ok=True)
    write_json(tdir / "trial.json", {"trial_key": key, "label": label, "overrides": overrides,
                                     "started_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "pid": os.getpid(),
                                     "node_id": _node_id(), "host": os.uname().nodename, "source_sha": source_sha,
                                     "git_commit": git_commit()})
    from ptsweep.tracking import append_line

    append_line(study / STARTS_LOG, f"{time.strftime('%Y-%m-%dT%H:%M:%S')} start {key}")
    if threads > 0:
        torch.set_num_threads(threads)

    last: dict = {}
    tracker = None

    def interrupted() -> bool:
        return (study / INTERRUPT_MARKER).exists()

    def record_interrupt() -> None:  # not a ledger record: the trial runs again (from its checkpoint) on resume
        write_json(tdir / "interrupted.json", {"trial_key": key, "status": "interrupted", **last,
                                               "at": time.strftime("%Y-%m-%dT%H:%M:%S")})

    def report_fn(m: dict) -> None:
        if _stop_requested():  # ASHA (or Ctrl-C) stopped the trial: do not train on while the actor shuts down
            if interrupted():
                raise KeyboardInterrupt("sweep interrupted (Ctrl-C)")
            raise _EarlyStopped(f"stopped by the Tune scheduler (ASHA) after step {last.get('step', 0)}")
        last.update(m)
        sub = _report_subset({**m, "trial_key": key})
        write_json(tdir / "progress.json", sub)  # last reported metrics: the record of an ASHA-stopped trial
        tune.report(sub)

    try:
        # continue from the trial's own checkpoint if an earlier attempt was killed mid-run
        ckpt = tdir / train.CHECKPOINT
        cfg = with_overrides(from_dict(base), {**overrides, "train.resume": ckpt.exists()})
        # W&B tags (sweep, model, width) of THIS trial: the model/width tags follow the trial's own config
        tags = [t for t in cfg.tracker.tags if not t.startswith(("model=", "width="))]
        cfg = with_overrides(cfg, {"tracker.tags": [*tags, f"model={cfg.model.name}", f"width={cfg.model.width}"]})
        tracker = make_tracker(cfg.tracker)
        metrics = train.run(cfg, tracker, run_dir=tdir, report_fn=report_fn)
        if metrics.get("diverged"):
            metrics = {**metrics, "status": "diverged", "val_loss": math.inf,
                       "error": metrics.get("error") or "diverged: non-finite loss"}
    except KeyboardInterrupt:  # Ctrl-C: the sweep stops; this trial is continued by the next run
        record_interrupt()
        return
    except (SystemExit, _EarlyStopped):  # Tune stopped the trial (ASHA)
        if interrupted():
            record_interrupt()
            return
        _record(study, key, label, overrides, {**last, "steps": last.get("step", 0), "status": "early_stopped",
                                               "error": ""}, source_sha)
        return  # (Ray's sys.exit only ends this trial's thread: returning does the same, without an error)
    except Exception as e:  # noqa: BLE001 - any failure is recorded, never propagated
        if _stop_requested() and interrupted():
            record_interrupt()
            return
        if _stop_requested():  # e.g. W&B torn down while the stopped trial's actor exits
            _record(study, key, label, overrides, {**last, "steps": last.get("step", 0),
                                                   "status": "early_stopped", "error": ""}, source_sha)
            return
        metrics = {"status": "failed", "error": _one_line(e), "val_loss": math.inf,
                   "steps": last.get("step", 0), "tokens": last.get("tokens", 0)}
        print(f"[ptsweep] trial {key} failed: {metrics['error']}", file=sys.stderr)
    finally:
        if tracker is not None:
            with contextlib.suppress(Exception):  # never lose the trial's record to a tracker shutdown error
                tracker.release()
    rec = _record(study, key, label, overrides, metrics, source_sha)
    if rec.get("status") in ("ok", "diverged", "failed") and not base.get("sweep", {}).get("keep_checkpoints", False):
        with contextlib.suppress(OSError):
            (tdir / train.CHECKPOINT).unlink()
    tune.report(_report_subset({**rec, "trial_key": key}))


def _prepare_base(cfg: RunConfig, study_dir: Path, group: str, tags: Sequence[str]) -> RunConfig:
    """Absolute paths (workers run elsewhere), per-trial threads, resumable trials, tracker group/tags."""
    from ptsweep.data import resolve_path

    threads = max(1, int(cfg.ray.cpus_per_trial))
    return with_overrides(cfg, {
        "out_dir": str(Path(cfg.out_dir).resolve()),
        "data.cache_dir": str(resolve_path(cfg.data.cache_dir)),
        "train.threads": threads,
        "train.progress": False,
        "tracker.group": group,
        "tracker.tags": list(tags),
    })


def _warm_data(cfg: RunConfig) -> int:
    """Tokenise/cache the corpus once in the driver (trials then only open the cache); returns the vocab size."""
    from ptsweep import data as data_mod

    return int(data_mod.prepare(cfg.data).vocab_size)


def _trainable_with_resources(cfg: RunConfig, base: dict, fixed: dict, table: dict, study_dir: Path):
    from ray import tune

    fn = tune.with_parameters(_trainable, base=base, fixed=dict(fixed), table=table, study_dir=str(study_dir),
                              threads=max(1, int(cfg.ray.cpus_per_trial)), source=driver_source())
    return tune.with_resources(fn, {"cpu": cfg.ray.cpus_per_trial, "gpu": cfg.ray.gpus_per_trial})


@functools.cache
def driver_source() -> str:
    """The ptsweep source fingerprint this driver process submits every trial with: taken at its first sweep, so an
    edit made while a multi-stage sweep runs stops its later trials too (``code_version``)."""
    return source_fingerprint()


def _storage(cfg: RunConfig, study_dir: Path) -> str:
    """Ray's storage_path: ``<study_dir>/ray``, or ``ray.storage_path/<study>`` (a URI such as s3://bucket/x is kept
    as a string - ``Path`` would turn it into s3:/bucket/x; local paths are made absolute)."""
    sp = cfg.ray.storage_path
    if not sp:
        return str(Path(study_dir) / "ray")
    if "://" in sp:
        return sp.rstrip("/") + "/" + Path(study_dir).name
    return str(Path(sp).expanduser().resolve() / Path(study_dir).name)


def _progress_callback(name: str, total: int):
    from ray.tune import Callback

    class _Progress(Callback):
        """One line per finished trial (Ray's own progress table is off)."""

        def __init__(self) -> None:
            self.n = 0

        def on_trial_complete(self, iteration, trials, trial, **info):
            self.n += 1
            r = trial.last_result or {}
            print(f"[{name}] trial {r.get('trial_key', trial.trial_id)} {r.get('status', 'done')} "
                  f"val_loss={r.get('val_loss', float('nan')):.4f} ({self.n}/{total})", file=sys.stderr, flush=True)

        def on_trial_error(self, iteration, trials, trial, **info):
            self.n += 1
            print(f"[{name}] trial {trial.trial_id} errored ({self.n}/{total})", file=sys.stderr, flush=True)

    return _Progress()


def _ray_run_config(cfg: RunConfig, study_dir: Path, name: str, total: int):
    from ray import tune

    return tune.RunConfig(name=name, storage_path=_storage(cfg, study_dir), verbose=0, stop=make_stopper(),
                          failure_config=tune.FailureConfig(max_failures=0),
                          callbacks=[_progress_callback(name, total)])


def _fit(tuner, study_dir: Path, name: str):
    """``tuner.fit()`` under the Ctrl-C guard (first Ctrl-C stops the experiment, second exits), without the
    warning about result files (Tune's file loggers are off: the ledger is the record). Raises SweepInterrupted
    after a Ctrl-C, once Tune has stopped the trials."""
    import logging

    log = logging.getLogger("ray.tune.analysis.experiment_analysis")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with interrupt_guard(f"{Path(study_dir).name}/{name}", Path(study_dir) / INTERRUPT_MARKER) as flag:
            grid = tuner.fit()
    finally:
        log.setLevel(level)
    if flag.requested:
        raise SweepInterrupted(f"{Path(study_dir).name}: interrupted; finished trials are kept in "
                               f"{Path(study_dir) / 'trials'} - re-run the same command to resume")
    stale = [r for r in grid if (r.metrics or {}).get("status") == REFUSED]
    if stale:
        raise SweepError(f"{Path(study_dir).name}/{name}: {SOURCE_CHANGED} ({driver_source()}); {len(stale)} "
                         f"trial(s) refused to train on the edited code and have no ledger record - commit or revert "
                         f"the edit, then re-run the same command (finished trials are kept)")
    return grid


def _short_dirname(trial) -> str:
    return f"trial_{trial.trial_id}"


# --------------------------------------------------------------------------------------------------------------
# Fixed list of trials
# --------------------------------------------------------------------------------------------------------------
def run_trials(cfg: RunConfig, trials: Sequence[Mapping[str, Any]], study_dir: Path, experiment_name: str, *,
               labels: Sequence[str] | None = None, tags: Sequence[str] = (), group: str | None = None) -> "pd.DataFrame":
    """Run a fixed list of trials (each = ``cfg`` + dotted overrides) on Ray Tune; resumable.

    Args:
        cfg: the composed base RunConfig (its ``ray`` section sets resources and concurrency).
        trials: one dict of dotted overrides per trial, e.g. ``{"optim.lr": 3e-3, "seed": 1}``.
        study_dir: ``runs/<study>`` (ledger in ``<study_dir>/trials``, Ray state in ``<study_dir>/ray``).
        experiment_name: Ray experiment name (a timestamp is appended: each invocation is a fresh experiment).
        labels: optional readable prefix of each trial key (e.g. "base-s1", "p007").
        tags: W&B tags of every trial (``model=``/``width=`` tags are set per trial from its own config);
            group: W&B group (default: the study folder name).

    Trials with a ledger entry are not run again. Returns one row per trial, in input order: trial_key, label,
    the override columns (dotted), then ``TABLE_METRICS`` (val_loss = inf for failed/diverged runs)."""
    import pandas as pd

    study_dir = Path(study_dir).resolve()
    labels = list(labels) if labels is not None else [""] * len(trials)
    if len(labels) != len(trials):
        raise ValueError("labels and trials differ in length")
    group = group or study_dir.name
    base_cfg = _prepare_base(cfg, study_dir, group, tags)
    base = to_dict(base_cfg)
    keys = [trial_key(base, ov, lab) for ov, lab in zip(trials, labels)]
    if len(set(keys)) != len(keys):
        raise ValueError("two trials have identical configs (same trial key); give them different seeds or labels")
    table = {k: {"overrides": dict(ov), "label": lab} for k, ov, lab in zip(keys, trials, labels)}
    pending = [k for k in keys if read_ledger(study_dir, k) is None]
    n_done = len(keys) - len(pending)
    print(f"[{study_dir.name}/{experiment_name}] {len(keys)} trials: {n_done} already finished (ledger), "
          f"{len(pending)} to run", file=sys.stderr, flush=True)

    errors: dict[str, str] = {}
    if pending:
        from ray import tune

        _warm_data(base_cfg)
        fn = _trainable_with_resources(base_cfg, base, {}, table, study_dir)
        tuner = tune.Tuner(
            fn,
            param_space={TRIAL_FIELD: tune.grid_search(pending)},
            tune_config=tune.TuneConfig(num_samples=1, max_concurrent_trials=cfg.ray.max_concurrent or None,
                                        reuse_actors=True, trial_dirname_creator=_short_dirname),
            run_config=_ray_run_config(cfg, study_dir, f"{experiment_name}-{time.strftime('%Y%m%d-%H%M%S')}",
                                       len(pending)),
        )
        grid = _fit(tuner, study_dir, experiment_name)
        for r in grid:
            if r.error is not None and r.config:
                errors[r.config.get(TRIAL_FIELD, "")] = _one_line(r.error)

    rows = []
    for k in keys:
        rec = read_ledger(study_dir, k)
        row = {"trial_key": k, "label": table[k]["label"], **table[k]["overrides"]}
        if rec is None:  # the worker died without a record (e.g. killed by the OS)
            rec = {"status": "failed", "val_loss": math.inf,
                   "error": errors.get(k, "no ledger record: the trial's worker died")}
        row.update({m: rec.get(m) for m in TABLE_METRICS})
        row["val_loss"] = _finite_or_inf(row["val_loss"])
        row["error"] = row["error"] or ""
        rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------------------------
# Optuna-driven search (in sweeps/search.py; re-exported here for the sweeps that import it from common)
# --------------------------------------------------------------------------------------------------------------
def run_search(cfg: RunConfig, space: Mapping[str, tuple[float, float]], study_dir: Path, experiment_name: str, *,
               num_samples: int, seed: int = 0, fixed: Mapping[str, Any] | None = None, label: str = "",
               asha: Mapping[str, float] | None = None, tags: Sequence[str] = (),
               group: str | None = None) -> "pd.DataFrame":
    """Optuna proposes, Ray Tune runs, the study persists: see :func:`ptsweep.sweeps.search.run_search`."""
    from ptsweep.sweeps.search import run_search as _run_search

    return _run_search(cfg, space, study_dir, experiment_name, num_samples=num_samples, seed=seed, fixed=fixed,
                       label=label, asha=asha, tags=tags, group=group)


def optuna_study_from_table(df, space: Mapping[str, tuple[float, float]], study_name: str = "ptsweep"):
    """Rebuild an in-memory Optuna study from a trials table (for optuna.visualization): status ok -> COMPLETE,
    early_stopped -> PRUNED, failed/diverged -> FAIL."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {k: optuna.distributions.FloatDistribution(float(lo), float(hi), log=True) for k, (lo, hi) in space.items()}
    study = optuna.create_study(study_name=study_name, direction="minimize")
    for _, row in df.iterrows():
        params = {k: float(row[k]) for k in space}
        status, loss = row.get("status"), float(row.get("val_loss", math.inf))
        if status == "ok" and math.isfinite(loss):
            t = optuna.trial.create_trial(params=params, distributions=dists, value=loss)
        elif status == "early_stopped":
            inter = {int(row.get("tokens") or 0): loss} if math.isfinite(loss) else {}
            t = optuna.trial.create_trial(params=params, distributions=dists, state=optuna.trial.TrialState.PRUNED,
                                          intermediate_values=inter)
        else:
            t = optuna.trial.create_trial(params=params, distributions=dists, state=optuna.trial.TrialState.FAIL)
        study.add_trial(t)
    return study


# --------------------------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------------------------
def save_table(df, study_dir: Path, name: str) -> tuple[Path, Path]:
    """``<study_dir>/<name>.parquet`` + ``.csv`` (object columns stringified for parquet)."""
    study_dir = Path(study_dir)
    study_dir.mkdir(parents=True, exist_ok=True)
    pq, csv = study_dir / f"{name}.parquet", study_dir / f"{name}.csv"
    df.to_csv(csv, index=False)
    d = df.copy()
    for c in d.columns:
        if d[c].dtype == object:
            d[c] = d[c].map(lambda v: v if v is None or isinstance(v, str) else json.dumps(_jsonable(v)))
    d.to_parquet(pq, index=False)
    return pq, csv


def log_summary(cfg: RunConfig, study_dir: Path, name: str, tables: Mapping[str, Any] | None = None,
                images: Mapping[str, str | Path] | None = None, summary: Mapping[str, Any] | None = None,
                tags: Iterable[str] = (), artifacts: Iterable[str] = ()) -> str:
    """One W&B summary run per sweep (job_type="summary", group = study) with the tables (wandb.Table), plots
    (wandb.Image) and artifacts: ``<study>-transfer`` (transfer.yaml, if present) and ``<study>-summary`` (the
    study's *.csv, summary*.json, *.md and the extra ``artifacts`` file names). Only when ``tracker.mode != disabled``; wandb is imported lazily by the tracker. Never fails the
    sweep: returns "" on success, or a one-line note of what went wrong / why it was skipped."""
    if cfg.tracker.mode == "disabled":
        return "tracker.mode=disabled: no W&B summary run"
    try:
        from ptsweep.tracking import make_tracker

        tracker = make_tracker(cfg.tracker)
        run_dir = Path(study_dir) / "wandb_summary"
        tracker.start(run_dir, to_dict(cfg), name=f"{Path(study_dir).name}-summary", group=Path(study_dir).name,
                      tags=list(tags), job_type="summary")
        for tname, df in (tables or {}).items():
            tracker.log_table(tname, df)
        if images:
            tracker.log_images({k: str(v) for k, v in images.items() if Path(v).exists()})
        # the study's result files as versioned artifacts: transfer.yaml (its own type, what later sweeps consume)
        # and the summary tables
        sdir = Path(study_dir)
        if (sdir / "transfer.yaml").is_file():
            tracker.log_artifact(f"{sdir.name}-transfer", "transfer", [sdir / "transfer.yaml"])
        files = [*sorted(sdir.glob("*.csv")), *sorted(sdir.glob("summary*.json")), *sorted(sdir.glob("*.md")),
                 *[sdir / f for f in (artifacts or ())]]
        tracker.log_artifact(f"{sdir.name}-summary", "sweep-summary", files)
        tracker.finish({**(summary or {}), "status": "ok"})
        note = ""
        if cfg.tracker.mode == "online":
            note = "W&B report creation skipped (optional); the summary run holds the table and plots"
        return note
    except Exception as e:  # noqa: BLE001
        return f"W&B summary run failed: {_one_line(e)}"
