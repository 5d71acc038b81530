"""Persistent Optuna studies of the searches (``run_search``), one per search experiment in
``<study_dir>/optuna.journal`` (``JournalStorage``: many processes may append), driven through ask-and-tell
(docs/running.md, "Stop, resume, extend"). A study remembers what it searched in its user attrs and refuses another
search. Trial states: ran its budget -> COMPLETE (diverged: inf); stopped by ASHA -> PRUNED; failed -> FAIL;
interrupted or refused -> FAIL with its parameters queued again (``requeued_from``; not counted in ``num_samples``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from ptsweep.errors import SweepError
from ptsweep.trials.code_version import REFUSED
from ptsweep.trials.fields import finite_or_inf

STATUS_ATTR = "status"
INTERRUPTED_ATTR = "interrupted"
REQUEUED_ATTR = "requeued_from"


def study_file(study_dir: Path) -> Path:
    return Path(study_dir) / "optuna.journal"


def storage(study_dir: Path):
    """The JournalStorage of ``<study_dir>/optuna.journal`` (created on first use)."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    path = study_file(study_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(str(path)))


def n_startup(num_samples: int) -> int:
    """TPE's random start-up trials of a budget: clip(num_samples // 3, 1, 10)."""
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
    trials = study.get_trials(deepcopy=False)
    done = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED)
               or (t.state == TrialState.FAIL and t.number not in interrupted) for t in trials)
    return done, sum(t.state == TrialState.WAITING for t in trials)


def tell_from_record(study, trial, record: Mapping[str, Any] | None, interrupted: bool = False) -> None:
    """Finish Optuna trial ``trial`` (the live ``optuna.Trial`` the searcher asked, or a trial number) from a ledger
    record / last result (module docstring); an early-stopped trial's last loss must already be reported. User
    attrs are written only through the live trial."""
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
        study.tell(number, finite_or_inf(record.get("val_loss")) if status == "ok" else math.inf,
                   state=TrialState.COMPLETE)
    elif status == "failed":
        note(STATUS_ATTR, "failed")
        note("error", str(record.get("error", ""))[:500])
        study.tell(number, state=TrialState.FAIL)
    else:  # early_stopped, or no final status: stopped by the scheduler (ASHA) before its budget
        note(STATUS_ATTR, "early_stopped")
        study.tell(number, state=TrialState.PRUNED)


def sampler(seed: int, num_samples: int):
    """The TPE sampler of every search: ``constant_liar`` (running trials count as bad points, so many trials in
    flight spread out) and ``multivariate`` (LR and the information weights interact), set explicitly so that the
    searches do not depend on Optuna's defaults. Seeded with ``seed + len(study.trials)`` by :func:`make_searcher`,
    an extension never repeats an earlier random draw."""
    import optuna

    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup(num_samples), constant_liar=True,
                                      multivariate=True)


def make_searcher(space: Mapping[str, tuple[float, float]], study_name: str, store, seed: int, num_samples: int,
                  n_existing: int):
    """A Ray Tune searcher on the persistent study: TPE with its start-up trials from the budget, Optuna told the
    real outcome of each trial (``tell_from_record``) instead of COMPLETE with a partial loss."""
    import optuna

    from ptsweep.trials.ledger_searcher import LedgerSearcher  # imports Ray: only when a search runs

    distributions = {k: optuna.distributions.FloatDistribution(float(lo), float(hi), log=True)
                     for k, (lo, hi) in space.items()}
    study = optuna.create_study(study_name=study_name, storage=store, sampler=sampler(seed + n_existing, num_samples),
                                direction="minimize", load_if_exists=True)
    return LedgerSearcher(study, distributions, tell_from_record)
