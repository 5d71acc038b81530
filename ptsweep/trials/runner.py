"""Running trials on Ray Tune: a fixed list of trials (``run_trials``; trials with a ledger record are never
submitted), and what every Tune run of a sweep shares with ``trials.search``: the trials' base config, the one
``tune.Tuner`` (``make_tuner``) and ``tuner.fit`` under the Ctrl-C guard (``fit``).
"""

from __future__ import annotations

import contextlib
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ptsweep.config import RunConfig, to_dict, with_overrides
from ptsweep.errors import SweepError, SweepInterrupted
from ptsweep.identity import trial_key
from ptsweep.trials import results
from ptsweep.trials.code_version import REFUSED, SOURCE_CHANGED
from ptsweep.trials.fields import METRIC, MODE, TABLE_METRICS, TRIAL_FIELD, finite_or_inf, one_line
from ptsweep.trials.ledger import interrupt_marker, read_ledger
from ptsweep.trials.ray_session import interrupt_guard, make_stopper, ray_session
from ptsweep.trials.trainable import driver_source, trainable_with_resources

if TYPE_CHECKING:
    import pandas as pd


MISSING = "not in the results folder (report only: not trained)"
NO_RECORD = "no ledger record: the trial's worker died"


def prepare_base(cfg: RunConfig, study_dir: Path, group: str, tags: Sequence[str]) -> RunConfig:
    """Absolute paths (workers run elsewhere), per-trial threads, resumable trials, tracker group/tags."""
    from ptsweep.io import resolve_path

    return with_overrides(cfg, {
        "out_dir": str(Path(cfg.out_dir).resolve()),
        "data.cache_dir": str(resolve_path(cfg.data.cache_dir)),
        "train.threads": max(1, int(cfg.ray.cpus_per_trial)),
        "train.progress": False,
        "tracker.group": group,
        "tracker.tags": list(tags),
    })


@contextlib.contextmanager
def sweep_session(cfg: RunConfig, study: str, sweep: str, vocab: int):
    """A sweep's training context: its results folder's study.json written first (when ``sweep.results`` names one),
    then Ray for the duration; under sweep.report_only neither (every trial comes from the results folder)."""
    if cfg.sweep.report_only:
        yield
        return
    if results.folder(cfg) is not None:
        results.write_study(results.folder(cfg), cfg, study, sweep, vocab)
    with ray_session(cfg.ray):
        yield


def warm_data(cfg: RunConfig) -> int:
    """Tokenise/cache the corpus once in the driver (trials then only open the cache); returns the vocab size
    (under sweep.report_only the one the results folder recorded: no corpus needed)."""
    from ptsweep import data as data_mod

    if cfg.sweep.report_only:
        return int(results.read_study(results.folder(cfg))["vocab_size"])
    return int(data_mod.prepare(cfg.data).vocab_size)


def _storage(cfg: RunConfig, study_dir: Path) -> str:
    """Ray's storage_path: ``<study_dir>/ray``, or ``ray.storage_path/<study>`` (a URI such as s3://bucket/x is kept
    as a string - ``Path`` would turn it into s3:/bucket/x; local paths are made absolute)."""
    sp = cfg.ray.storage_path
    if not sp:
        return str(Path(study_dir) / "ray")
    if "://" in sp:
        return sp.rstrip("/") + "/" + Path(study_dir).name
    return str(Path(sp).expanduser().resolve() / Path(study_dir).name)


def _progress_callback(name: str, total: int, study_dir: Path, results_dir: Path | None, base: dict):
    from ray.tune import Callback

    class _Progress(Callback):
        """One line per finished trial (Ray's own progress table is off); its record goes to the results folder."""

        n = 0  # trials finished so far

        def on_trial_complete(self, iteration, trials, trial, **info):
            self.n += 1
            r = trial.last_result or {}
            if results_dir is not None and r.get("trial_key"):
                try:
                    results.export(study_dir, results_dir, base, [r["trial_key"]])
                except results.ResultsError as e:  # the ledger keeps the trial; the next sync says why again
                    print(f"[{name}] not exported to the results folder: {e}", file=sys.stderr, flush=True)
            print(f"[{name}] trial {r.get('trial_key', trial.trial_id)} {r.get('status', 'done')} "
                  f"val_loss={r.get('val_loss', float('nan')):.4f} ({self.n}/{total})", file=sys.stderr, flush=True)

        def on_trial_error(self, iteration, trials, trial, **info):
            self.n += 1
            print(f"[{name}] trial {trial.trial_id} errored ({self.n}/{total})", file=sys.stderr, flush=True)

    return _Progress()


def make_tuner(trainable, cfg: RunConfig, study_dir: Path, experiment_name: str, total: int, *,
               param_space: Mapping[str, Any] | None = None, search_alg=None, scheduler=None, num_samples: int = 1,
               base: dict | None = None):
    """The one ``tune.Tuner`` of the sweeps: ``total`` trials of ``trainable`` (a grid over ``param_space``, or
    ``num_samples`` proposals of ``search_alg``), the Ctrl-C stopper, one progress line per trial and, given the
    trials' ``base`` config, each finished trial's record exported to the results folder. Each call is a fresh
    experiment: resume goes through the ledger and the Optuna study, not ``Tuner.restore``. Without a ``scheduler``
    (Tune's FIFO: a fixed list, or a search without early stopping) actors are reused: every trial returns on its
    own, and the next one skips the worker's start and imports; the same trial gives the same record in a reused
    actor. Never under a scheduler (ASHA): an actor whose trial ASHA stopped can keep its training thread."""
    import time

    from ray import tune

    metric = dict(metric=METRIC, mode=MODE) if search_alg is not None or scheduler is not None else {}
    name = f"{experiment_name}-{time.strftime('%Y%m%d-%H%M%S')}"
    return tune.Tuner(
        trainable,
        param_space=dict(param_space) if param_space is not None else None,
        tune_config=tune.TuneConfig(search_alg=search_alg, scheduler=scheduler, num_samples=num_samples, **metric,
                                    max_concurrent_trials=cfg.ray.max_concurrent or None,
                                    reuse_actors=scheduler is None,
                                    trial_dirname_creator=short_dirname),
        run_config=tune.RunConfig(name=name, storage_path=_storage(cfg, study_dir), verbose=0, stop=make_stopper(),
                                  failure_config=tune.FailureConfig(max_failures=cfg.ray.max_failures),
                                  callbacks=[_progress_callback(name, total, Path(study_dir),
                                                                results.folder(cfg) if base else None, base or {})]),
    )


def fit(tuner, study_dir: Path, name: str):
    """``tuner.fit()`` under the Ctrl-C guard, without Tune's warning about result files (the ledger is the record);
    SweepInterrupted after a Ctrl-C, SweepError when a worker refused edited code."""
    import logging

    log = logging.getLogger("ray.tune.analysis.experiment_analysis")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with interrupt_guard(f"{Path(study_dir).name}/{name}", interrupt_marker(study_dir)) as flag:
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


def short_dirname(trial) -> str:
    """Ray's folder of a trial: ``trial_<id>`` (the ledger folder carries the readable key)."""
    return f"trial_{trial.trial_id}"


def run_trials(cfg: RunConfig, trials: Sequence[Mapping[str, Any]], study_dir: Path, experiment_name: str, *,
               labels: Sequence[str] | None = None, tags: Sequence[str] = (),
               group: str | None = None) -> "pd.DataFrame":
    """Run a fixed list of trials (each ``cfg`` + dotted overrides) on Ray Tune, except those with a ledger record.
    ``labels``: readable prefixes of the trial keys; ``tags`` / ``group``: W&B tags and group (default: the study
    folder's name). One row per trial, in input order: trial_key, label, the overrides, ``TABLE_METRICS``."""
    import pandas as pd

    study_dir = Path(study_dir).resolve()
    labels = list(labels) if labels is not None else [""] * len(trials)
    if len(labels) != len(trials):
        raise ValueError("labels and trials differ in length")
    group = group or study_dir.name
    base_cfg = prepare_base(cfg, study_dir, group, tags)
    base = to_dict(base_cfg)
    keys = [trial_key(base, ov, lab) for ov, lab in zip(trials, labels)]
    if len(set(keys)) != len(keys):
        raise ValueError("two trials have identical configs (same trial key); give them different seeds or labels")
    planned = {k: {"overrides": dict(ov), "label": lab} for k, ov, lab in zip(keys, trials, labels)}
    rdir = results.folder(cfg)
    if rdir is not None:
        results.restore(rdir, study_dir)
        if not cfg.sweep.report_only:
            results.export(study_dir, rdir, base)
    pending = [k for k in keys if read_ledger(study_dir, k) is None]
    in_repo = sum(1 for k in keys if rdir is not None and (rdir / "trials" / f"{k}.json").exists())
    print(f"[{study_dir.name}/{experiment_name}] {len(keys)} trials: {len(keys) - len(pending)} already finished "
          f"(ledger{f'; {in_repo} in the repository, {rdir}' if rdir is not None else ''}), {len(pending)} "
          f"{'missing from the results folder' if cfg.sweep.report_only else 'to run'}", file=sys.stderr, flush=True)

    errors: dict[str, str] = {}
    if pending and cfg.sweep.report_only:
        errors = {k: MISSING for k in pending}
    elif pending:
        from ray import tune

        warm_data(base_cfg)
        trainable = trainable_with_resources(base_cfg, base, {}, study_dir, planned=planned)
        tuner = make_tuner(trainable, cfg, study_dir, experiment_name, len(pending),
                           param_space={TRIAL_FIELD: tune.grid_search(pending)}, base=base)
        grid = fit(tuner, study_dir, experiment_name)
        errors = {r.config.get(TRIAL_FIELD, ""): one_line(r.error) for r in grid if r.error is not None and r.config}

    rows = []
    for k in keys:
        record = read_ledger(study_dir, k)
        if record is None:  # not run (report only), or the worker died without a record (e.g. killed by the OS)
            record = {"status": "missing" if errors.get(k) == MISSING else "failed", "val_loss": math.inf,
                      "error": errors.get(k, NO_RECORD)}
        rows.append(table_row({"trial_key": k, "label": planned[k]["label"], **planned[k]["overrides"]}, record))
    return pd.DataFrame(rows)


def table_row(row: dict, record: Mapping[str, Any]) -> dict:
    """``row`` with the ``TABLE_METRICS`` of a ledger record (val_loss inf unless finite, error "" for none)."""
    row = {**row, **{m: record.get(m) for m in TABLE_METRICS}}
    return {**row, "val_loss": finite_or_inf(row["val_loss"]), "error": row["error"] or ""}
