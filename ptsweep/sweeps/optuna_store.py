"""Persistent Optuna studies of the searches (``run_search``): a journal file in the study folder, driven by Ray Tune
through Optuna's public ask-and-tell interface (``study.ask`` / ``study.tell`` / ``study.enqueue_trial``).

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
- Trial keys (``identity.trial_key``): Optuna numbers trials per study; the ledger (``sweeps.ledger``) keys each run
  by its result-relevant config. That is what this module adds to Optuna: a trial another search or sweep already
  ran (same key, in the same study folder) is read from the ledger, not trained again, and a trial whose outcome
  Optuna never heard (the driver was killed) gets it from the ledger on the next run (``search._reconcile``).
- User attrs ``status``/``interrupted``/``error`` are written through the live ``optuna.Trial`` that the searcher
  asked; a trial finished later by number (a killed driver's) carries its state only. An interrupted trial is the one
  whose parameters were queued again: the queued copy has user attr ``requeued_from`` = its number.
- TPE's random start-up trials are set from the budget: ``n_startup_trials = clip(num_samples // 3, 1, 10)``; the
  sampler is seeded with ``seed + len(study.trials)`` so an extension never repeats an earlier random draw.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from ptsweep.errors import SweepError
from ptsweep.sweeps.code_version import REFUSED

STUDY_FILE = "optuna.journal"
STATUS_ATTR = "status"
INTERRUPTED_ATTR = "interrupted"
REQUEUED_ATTR = "requeued_from"


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


def describe_difference(old: Mapping[str, Any], new: Mapping[str, Any], limit: int = 4) -> str:
    """``key: old -> new`` for the first ``limit`` keys whose values differ."""
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    parts = [f"{k}: {old.get(k, '<unset>')} -> {new.get(k, '<unset>')}" for k in keys[:limit]]
    return ", ".join(parts) + (f" (+{len(keys) - limit} more)" if len(keys) > limit else "")


def open_study(study_dir: Path, name: str, signature: Mapping[str, Any]):
    """Create or load study ``name``; SweepError (one line) if it was created for another ``signature``
    (``{"space": ..., "fixed": ..., "label": ..., "base": {flat result-relevant config}}``)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    store = storage(study_dir)
    study = optuna.create_study(study_name=name, storage=store, direction="minimize", load_if_exists=True)
    if not any(k in study.user_attrs for k in signature):  # a new study: remember what it searches
        for k, v in signature.items():
            study.set_user_attr(k, v)
        return study, store
    for k, v in signature.items():
        old = study.user_attrs.get(k)
        if old != v:
            what = describe_difference(old, v) if isinstance(old, dict) and isinstance(v, dict) else f"{old} -> {v}"
            raise SweepError(f"optuna study '{name}' in {study_file(study_dir)} was created for another {k} ({what}); "
                             f"re-run with the old settings, or start a new study with sweep.study=<new name>")
    return study, store


def interrupted_numbers(study) -> set[int]:
    """Numbers of the trials that were interrupted (their parameters were queued again)."""
    return {int(t.user_attrs[REQUEUED_ATTR]) for t in study.get_trials(deepcopy=False)
            if REQUEUED_ATTR in t.user_attrs}


def counts(study) -> tuple[int, int]:
    """(trials that count towards num_samples, trials waiting in the queue)."""
    from optuna.trial import TrialState

    interrupted = interrupted_numbers(study)
    done = waiting = 0
    for t in study.get_trials(deepcopy=False):
        if t.state == TrialState.WAITING:
            waiting += 1
        elif t.state in (TrialState.COMPLETE, TrialState.PRUNED) or (
                t.state == TrialState.FAIL and t.number not in interrupted):
            done += 1
    return done, waiting


def tell_from_record(study, trial, record: Mapping[str, Any] | None, interrupted: bool = False) -> None:
    """Finish Optuna trial ``trial`` (the live ``optuna.Trial`` the searcher asked, or a trial number) from a ledger
    record / last result (module docstring for the state mapping). Early-stopped trials are told PRUNED: their last
    loss must already be reported as an intermediate value."""
    import optuna
    from optuna.trial import TrialState

    live = trial if isinstance(trial, optuna.Trial) else None
    number = live.number if live is not None else int(trial)
    record = dict(record or {})
    status = record.get("status")

    def note(key: str, value: Any) -> None:  # user attrs: public only on the live trial
        if live is not None:
            live.set_user_attr(key, value)

    if interrupted or status in ("interrupted", REFUSED):  # not trained to its end: queued again
        note(INTERRUPTED_ATTR, True)
        note(STATUS_ATTR, status if status == REFUSED else "interrupted")
        params = live.params if live is not None else study.get_trials(deepcopy=False)[number].params
        study.tell(number, state=TrialState.FAIL)
        study.enqueue_trial(params, user_attrs={REQUEUED_ATTR: number}, skip_if_exists=False)
        return
    if status in ("ok", "diverged"):
        note(STATUS_ATTR, status)
        loss = _finite_or_nan(record.get("val_loss"))
        study.tell(number, loss if status == "ok" and math.isfinite(loss) else math.inf, state=TrialState.COMPLETE)
    elif status == "failed":
        note(STATUS_ATTR, "failed")
        note("error", str(record.get("error", ""))[:500])
        study.tell(number, state=TrialState.FAIL)
    else:  # early_stopped, or no final status: stopped by the scheduler (ASHA) before its budget
        note(STATUS_ATTR, "early_stopped")
        study.tell(number, state=TrialState.PRUNED)


def _finite_or_nan(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def make_searcher(space: Mapping[str, tuple[float, float]], study_name: str, store, seed: int, num_samples: int,
                  n_existing: int):
    """A Ray Tune searcher on the persistent study: TPE with its start-up trials from the budget, Optuna told the
    real outcome of each trial (``tell_from_record``) instead of COMPLETE with a partial loss."""
    import optuna

    from ptsweep.sweeps.ledger_searcher import LedgerSearcher  # imports Ray: only when a search runs

    distributions = {k: optuna.distributions.FloatDistribution(float(lo), float(hi), log=True)
                     for k, (lo, hi) in space.items()}
    sampler = optuna.samplers.TPESampler(seed=seed + n_existing, n_startup_trials=n_startup(num_samples))
    study = optuna.create_study(study_name=study_name, storage=store, sampler=sampler, direction="minimize",
                                load_if_exists=True)
    return LedgerSearcher(study, distributions, tell_from_record)
