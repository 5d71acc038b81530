"""Optuna-driven search: Optuna (TPE, the persistent journal study of ``trials.optuna_store``) proposes trials, Ray
Tune runs them with the trainable and ledger of fixed lists. A re-run asks only for the trials missing to reach
``num_samples``, re-queues interrupted ones, and refuses another search space with one line.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ptsweep.config import RunConfig, to_dict, with_overrides
from ptsweep.errors import SweepError
from ptsweep.identity import trial_config, trial_key
from ptsweep.io import jsonable, read_json
from ptsweep.trials import optuna_store
from ptsweep.trials.ledger import read_ledger, trial_dir
from ptsweep.trials.runner import NO_RECORD, fit, make_tuner, prepare_base, table_row, warm_data
from ptsweep.trials.trainable import trainable_with_resources

if TYPE_CHECKING:
    import pandas as pd


def run_search(cfg: RunConfig, space: Mapping[str, tuple[float, float]], study_dir: Path, experiment_name: str, *,
               num_samples: int, seed: int = 0, fixed: Mapping[str, Any] | None = None, label: str = "",
               asha: Mapping[str, float] | None = None, tags: Sequence[str] = (),
               group: str | None = None, start: Mapping[str, float] | None = None) -> "pd.DataFrame":
    """Optuna TPE proposes trials over ``space`` (dotted key -> (low, high), log-uniform) until the study
    ``experiment_name`` holds ``num_samples``; Ray Tune runs them (ASHA per ``asha``: :func:`_scheduler`).
    ``fixed``: overrides of every trial; ``label``: prefix of the trial keys; ``start``: a point run first in a new
    study. One row per trial (Optuna's order): trial_id, trial_key, the params, ``TABLE_METRICS``;
    ``df.attrs["search"]``: the sampler and ``not_run`` (trials of the budget without a result)."""
    import pandas as pd

    study_dir = Path(study_dir).resolve()
    fixed = dict(fixed or {})
    group = group or study_dir.name
    base_cfg = prepare_base(cfg, study_dir, group, tags)
    base = to_dict(base_cfg)
    trial_cfg0 = with_overrides(base_cfg, fixed)  # validates the fixed overrides in the driver

    start = {k: float(v) for k, v in (start or {}).items()}
    signature = _signature(space, fixed, label, base, start)
    study, store = optuna_store.open_study(study_dir, experiment_name, signature)
    fresh = bool(start) and not study.trials  # a new study queues the config's own point first
    if fresh:
        study.enqueue_trial(start)
    _reconcile(study, study_dir, base, fixed, label, space)
    done, waiting = optuna_store.counts(study)
    remaining = num_samples - done
    tag = f"[{study_dir.name}/{experiment_name}]"
    first = ("" if remaining <= 0 else ", the config's own point first" if fresh else
             f", {waiting} interrupted trial(s) continue first" if waiting else "")
    print(f"{tag} optuna study {optuna_store.study_file(study_dir)}: {done} trials finished, {max(remaining, 0)} to "
          f"run (num_samples={num_samples}){first}", file=sys.stderr, flush=True)
    if remaining > 0:
        try:
            _tune_remaining(cfg, base_cfg, trial_cfg0, (study_dir, experiment_name, base, fixed, label), remaining,
                            store=store, asha=asha, space=space, seed=seed, num_samples=num_samples,
                            n_trials=len(study.trials))
        finally:  # a fresh view of the journal: trials left running are queued again, lost tells get their outcome
            study = optuna_store.open_study(study_dir, experiment_name, signature)[0]
            _reconcile(study, study_dir, base, fixed, label, space)
    not_run = not_run_count(study, num_samples)
    if not_run and remaining > 0:
        print(f"{tag} {not_run} of num_samples={num_samples} trials did not run (Ray ended them before they "
              f"trained; see its log above); they are queued: re-run the same command to run them",
              file=sys.stderr, flush=True)

    df = pd.DataFrame(_search_rows(study, study_dir, base, fixed, label, space))
    df.attrs["search"] = _sampler_note(study_dir, experiment_name, num_samples, seed, len(df), not_run)
    return df


def _tune_remaining(cfg: RunConfig, base_cfg: RunConfig, trial_cfg0: RunConfig, ident: tuple, remaining: int, *,
                    store, asha, space, seed: int, num_samples: int, n_trials: int) -> None:
    """Ray Tune runs the ``remaining`` trials Optuna proposes; ``ident``: (study folder, experiment, base, fixed,
    label)."""
    from ptsweep.train import num_steps

    study_dir, experiment_name, base, fixed, label = ident
    warm_data(trial_cfg0)
    trainable = trainable_with_resources(base_cfg, base, fixed, study_dir, search_label=label)
    scheduler = _scheduler(asha, float(num_steps(trial_cfg0) * trial_cfg0.train.batch_size * trial_cfg0.data.seq_len))
    searcher = optuna_store.make_searcher(space, experiment_name, store, seed, num_samples, n_trials)
    fit(make_tuner(trainable, cfg, study_dir, experiment_name, remaining, search_alg=searcher, scheduler=scheduler,
                   num_samples=remaining), study_dir, experiment_name)


def _signature(space: Mapping[str, tuple[float, float]], fixed: dict, label: str, base: dict,
               start: dict[str, float]) -> dict:
    """What makes a study the same study (``optuna_store.open_study`` refuses another one): the space, the fixed
    overrides, the label, the trial-relevant base config and the start point (SweepError unless it gives every key
    of the space a value inside its range)."""
    signature = {"space": {k: [float(lo), float(hi)] for k, (lo, hi) in space.items()},
                 "fixed": json.loads(json.dumps(jsonable(fixed))), "label": label,
                 "base": json.loads(json.dumps(jsonable(trial_config(base))))}
    if start:
        if set(start) != set(space):
            raise SweepError(f"search start point: keys {sorted(start)} differ from the space's {sorted(space)}")
        if outside := outside_space(start, space):
            raise SweepError(f"search start point outside the search space: {'; '.join(outside)} "
                             f"(change the config's value or the sweep's range)")
        signature["start"] = start
    return signature


def _scheduler(asha: Mapping[str, float] | None, budget: float):
    """ASHA on val_loss with time = tokens (``asha`` reduction > 1), else None: Tune's FIFO, every trial runs its
    budget (and, stopped by no scheduler, reuses its actor: ``runner.make_tuner``)."""
    from ray.tune.schedulers import ASHAScheduler

    if not asha or asha.get("reduction", 1) <= 1:
        return None
    # max_t just above the budget: ASHA stops a trial that reaches max_t at once, which would cut off the final
    # report (and the ledger record) of trials that ran their whole budget.
    return ASHAScheduler(time_attr="tokens", max_t=budget + 1.0,
                         grace_period=max(1.0, float(asha.get("grace_frac", 0.25)) * budget),
                         reduction_factor=float(asha["reduction"]))


def _sampler_note(study_dir: Path, experiment_name: str, num_samples: int, seed: int, n_trials: int,
                  not_run: int) -> dict:
    """``df.attrs["search"]`` of :func:`run_search`: the study, the sampler and how many trials were random."""
    k = optuna_store.n_startup(num_samples)
    return {"study_file": str(optuna_store.study_file(study_dir)), "study_name": experiment_name,
            "sampler": f"TPE(n_startup_trials={k}, seed={seed}+trials so far, constant_liar, multivariate)",
            "n_startup_trials": k,
            "random_search": n_trials <= k, "num_samples": int(num_samples), "not_run": not_run,
            "note": (f"random search: all {n_trials} trials are TPE's random start-up trials (n_startup_trials={k})"
                     if n_trials <= k else f"the first {k} trials are random start-up trials, the rest TPE")}


def outside_space(point: Mapping[str, float], space: Mapping[str, tuple[float, float]]) -> list[str]:
    """One "key=value not in [low, high]" per coordinate of ``point`` outside its range in ``space``."""
    return [f"{k}={point[k]:g} not in [{lo:g}, {hi:g}]" for k, (lo, hi) in space.items()
            if not lo <= float(point[k]) <= hi]


def not_run_count(study, num_samples: int) -> int:
    """Trials of the budget the study does not hold a result for: proposed but never trained (Ray errored them
    before they started, e.g. a lost worker; ``_reconcile`` queued them again) or never proposed."""
    return max(0, int(num_samples) - optuna_store.counts(study)[0])


def _reconcile(study, study_dir: Path, base: dict, fixed: Mapping[str, Any], label: str,
               space: Mapping[str, Any]) -> None:
    """Trials left RUNNING by a driver that was killed: finished ones get their ledger outcome, the others are
    recorded as interrupted and queued again. A trial killed before all of ``space`` was sampled never trained: its
    partial params would name another trial's key (the base config's, with none), so it is queued, never matched."""
    from optuna.trial import TrialState

    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        sampled = set(space) <= set(t.params)
        record = read_ledger(study_dir, trial_key(base, {**fixed, **t.params}, label)) if sampled else None
        optuna_store.tell_from_record(study, t.number, record, interrupted=record is None)


def _search_rows(study, study_dir: Path, base: dict, fixed: Mapping[str, Any], label: str,
                 space: Mapping[str, Any]) -> list[dict]:
    from optuna.trial import TrialState

    rows = []
    interrupted = optuna_store.interrupted_numbers(study)
    for t in study.get_trials(deepcopy=False):
        if t.state in (TrialState.WAITING, TrialState.RUNNING) or t.number in interrupted:
            continue
        params = {k: t.params[k] for k in space if k in t.params}
        key = trial_key(base, {**fixed, **params}, label)
        record = read_ledger(study_dir, key)
        if record is None and t.state == TrialState.PRUNED:  # stopped by ASHA: its last report
            progress_file = trial_dir(study_dir, key) / "progress.json"
            record = {**(read_json(progress_file) if progress_file.exists() else {}), "error": ""}
        row = {"trial_id": str(t.number), "trial_key": key, **params}
        row = table_row(row, record) if record is not None else {**row, "status": "failed", "val_loss": math.inf,
                                                                 "error": t.user_attrs.get("error") or NO_RECORD}
        if t.state == TrialState.PRUNED:
            row["status"] = "early_stopped"
        rows.append(row)
    return rows
