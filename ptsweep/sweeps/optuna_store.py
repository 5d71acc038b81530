"""Persistent Optuna studies of the searches (``run_search``): a journal file in the study folder.

``<study_dir>/optuna.journal`` (``optuna.storages.JournalStorage`` + ``JournalFileBackend``: many processes may append,
it works on NFS) holds one Optuna study per search, named after the search's experiment (``search`` for tune-small,
``search-bert-w192`` ...). Open it with::

    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    study = optuna.load_study(study_name="search", storage=JournalStorage(JournalFileBackend("runs/tune-small/optuna.journal")))

or ``optuna-dashboard runs/tune-small/optuna.journal``.

- A study remembers what it searched (user attrs ``space``, ``fixed``, ``label``, ``base``: the result-relevant config):
  re-running with another space or config is refused with one line naming what differs (use ``sweep.study=<new>``).
- A re-run with a larger ``num_samples`` adds trials to the same study (only the missing ones are run).
- Trial states: ran its budget -> COMPLETE (diverged: value inf); stopped by ASHA -> PRUNED (with its last
  intermediate value); failed -> FAIL; interrupted (Ctrl-C, or the driver was killed) or refused (the worker found
  edited source, ``code_version``) -> FAIL with user attr ``interrupted`` and its parameters are queued again
  (``enqueue_trial``), so the next run continues it from its checkpoint. Interrupted trials do not count towards
  ``num_samples``.
- TPE's random start-up trials are set from the budget: ``n_startup_trials = clip(num_samples // 3, 1, 10)``; the
  sampler is seeded with ``seed + len(study.trials)`` so an extension never repeats an earlier random draw.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from ptsweep.errors import SweepError
from ptsweep.sweeps.code_version import REFUSED
from ptsweep.sweeps.ray_session import INTERRUPT

STUDY_FILE = "optuna.journal"
STATUS_ATTR = "status"
INTERRUPTED_ATTR = "interrupted"


def study_file(study_dir: Path) -> Path:
    return Path(study_dir) / STUDY_FILE


def storage(study_dir: Path):
    """The JournalStorage of ``<study_dir>/optuna.journal`` (created on first use)."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    path = study_file(study_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(str(path)))


def n_startup(num_samples: int) -> int:
    return int(min(10, max(1, num_samples // 3)))


def _diff(old: Mapping[str, Any], new: Mapping[str, Any], limit: int = 4) -> str:
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    parts = [f"{k}: {old.get(k, '<unset>')} -> {new.get(k, '<unset>')}" for k in keys[:limit]]
    return ", ".join(parts) + (f" (+{len(keys) - limit} more)" if len(keys) > limit else "")


def open_study(study_dir: Path, name: str, signature: Mapping[str, Any]):
    """Create or load study ``name``; SweepError (one line) if it was created for another ``signature``
    (``{"space": ..., "fixed": ..., "label": ..., "base": {flat result-relevant config}}``)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    store = storage(study_dir)
    try:
        study = optuna.load_study(study_name=name, storage=store)
    except KeyError:
        study = optuna.create_study(study_name=name, storage=store, direction="minimize")
        for k, v in signature.items():
            study.set_user_attr(k, v)
        return study, store
    for k, v in signature.items():
        old = study.user_attrs.get(k)
        if old != v:
            what = _diff(old, v) if isinstance(old, dict) and isinstance(v, dict) else f"{old} -> {v}"
            raise SweepError(f"optuna study '{name}' in {study_file(study_dir)} was created for another {k} ({what}); "
                             f"re-run with the old settings, or start a new study with sweep.study=<new name>")
    return study, store


def counts(study) -> tuple[int, int]:
    """(trials that count towards num_samples, trials waiting in the queue)."""
    from optuna.trial import TrialState

    done = waiting = 0
    for t in study.get_trials(deepcopy=False):
        if t.state == TrialState.WAITING:
            waiting += 1
        elif t.state in (TrialState.COMPLETE, TrialState.PRUNED) or (
                t.state == TrialState.FAIL and not t.user_attrs.get(INTERRUPTED_ATTR)):
            done += 1
    return done, waiting


def tell_from_record(study, trial_number: int, rec: Mapping[str, Any] | None, interrupted: bool = False) -> None:
    """Finish an Optuna trial from a ledger record / last result (module docstring for the state mapping)."""
    from optuna.trial import TrialState

    status = (rec or {}).get("status")
    loss = (rec or {}).get("val_loss")
    try:
        loss = float(loss)
    except (TypeError, ValueError):
        loss = math.nan
    trial_id = study._storage.get_trial_id_from_study_id_trial_number(study._study_id, trial_number)
    storage_ = study._storage
    if interrupted or status in ("interrupted", REFUSED):  # not trained to its end: queued again
        storage_.set_trial_user_attr(trial_id, INTERRUPTED_ATTR, True)
        storage_.set_trial_user_attr(trial_id, STATUS_ATTR, status if status == REFUSED else "interrupted")
        study.tell(trial_number, state=TrialState.FAIL)
        params = study._storage.get_trial(trial_id).params
        study.enqueue_trial(params, user_attrs={"requeued_from": trial_number}, skip_if_exists=False)
        return
    if status in ("ok", "diverged"):
        storage_.set_trial_user_attr(trial_id, STATUS_ATTR, status)
        study.tell(trial_number, loss if status == "ok" and math.isfinite(loss) else math.inf,
                   state=TrialState.COMPLETE)
    elif status == "failed":
        storage_.set_trial_user_attr(trial_id, STATUS_ATTR, "failed")
        storage_.set_trial_user_attr(trial_id, "error", str((rec or {}).get("error", ""))[:500])
        study.tell(trial_number, state=TrialState.FAIL)
    else:  # early_stopped, or no final status: stopped by the scheduler (ASHA) before its budget
        storage_.set_trial_user_attr(trial_id, STATUS_ATTR, "early_stopped")
        if math.isfinite(loss):
            step = int((rec or {}).get("tokens") or (rec or {}).get("steps") or 0)
            if step not in storage_.get_trial(trial_id).intermediate_values:
                storage_.set_trial_intermediate_value(trial_id, step, loss)
        study.tell(trial_number, state=TrialState.PRUNED)


def make_searcher(space: Mapping[str, tuple[float, float]], study_name: str, store, seed: int, num_samples: int,
                  n_existing: int):
    """Ray's OptunaSearch on the persistent study, with TPE start-up from the budget and ledger-aware ``tell``."""
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    class LedgerOptunaSearch(OptunaSearch):
        """Tells Optuna the trial's real outcome (status of its final report) instead of COMPLETE-with-partial-loss."""

        def on_trial_result(self, trial_id: str, result: dict) -> None:
            ot_trial = self._ot_trials.get(trial_id)
            val = result.get(self.metric)
            if ot_trial is None or val is None or not math.isfinite(float(val)):
                return
            step = int(result.get("tokens") or result.get("training_iteration") or 0)
            seen = self.__dict__.setdefault("_reported_steps", {}).setdefault(trial_id, set())
            if step not in seen:  # a trial resumed from its ledger record reports its last step again
                seen.add(step)
                ot_trial.report(float(val), step)

        def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
            if trial_id in self._completed_trials or trial_id not in self._ot_trials:
                return
            number = self._ot_trials[trial_id].number
            rec = dict(result or {})
            if error and "status" not in rec:
                rec["status"] = "failed"
            interrupted = INTERRUPT.requested and rec.get("status") not in ("ok", "diverged", "failed")
            try:
                tell_from_record(self._ot_study, number, rec, interrupted=interrupted)
            except Exception as exc:  # noqa: BLE001 - the ledger still holds the record
                import logging

                logging.getLogger(__name__).warning("optuna tell of trial %s failed: %s", number, exc)
            self._completed_trials.add(trial_id)

    dists = {k: optuna.distributions.FloatDistribution(float(lo), float(hi), log=True) for k, (lo, hi) in space.items()}
    sampler = optuna.samplers.TPESampler(seed=seed + n_existing, n_startup_trials=n_startup(num_samples))
    return LedgerOptunaSearch(space=dists, metric="val_loss", mode="min", sampler=sampler, study_name=study_name,
                              storage=store)
