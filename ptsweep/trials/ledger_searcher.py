"""The Ray Tune searcher of the searches (built by ``optuna_store.make_searcher``; imports Ray, so imported only when
a search runs)."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Callable

import optuna
from ray.tune.search import Searcher

from ptsweep.trials.fields import FINAL_STATUSES, METRIC, MODE
from ptsweep.trials.ray_session import INTERRUPT


class LedgerSearcher(Searcher):
    """Ray's Searcher API over Optuna's ask-and-tell: ``suggest`` asks the study (queued trials first), every
    result with the metric is an intermediate value, and Optuna learns each trial's real outcome from its final
    record (ok, diverged, failed, early-stopped, interrupted), not a COMPLETE with a partial loss."""

    def __init__(self, study, distributions, tell: Callable) -> None:
        """``tell(study, trial, record, interrupted=...)``: how a finished trial's record becomes Optuna's outcome
        (``optuna_store.tell_from_record``)."""
        super().__init__(metric=METRIC, mode=MODE)
        self.study, self.distributions, self.tell = study, distributions, tell
        self.asked: dict[str, optuna.Trial] = {}
        self.reported_steps: dict[str, set[int]] = {}

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return metric in (None, METRIC) and mode in (None, MODE)

    def suggest(self, trial_id: str) -> dict:
        trial = self.study.ask(self.distributions)
        self.asked[trial_id] = trial
        return dict(trial.params)

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        trial, value = self.asked.get(trial_id), result.get(METRIC)
        if trial is None or value is None or not math.isfinite(float(value)):
            return
        seen = self.reported_steps.setdefault(trial_id, set())
        step = int(result.get("tokens") or result.get("training_iteration") or 0)  # ASHA's time axis, else Tune's
        if step not in seen:  # a trial resumed from its ledger record reports its last step again
            seen.add(step)
            trial.report(float(value), step)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if trial_id not in self.asked:
            return
        record = dict(result or {})
        if error and "status" not in record:
            record["status"] = "failed"
        interrupted = INTERRUPT.requested and record.get("status") not in FINAL_STATUSES
        if not interrupted and record.get("status") in (None, "early_stopped"):
            self.on_trial_result(trial_id, record)  # the last loss of a stopped trial is its PRUNED value
        trial = self.asked.pop(trial_id)
        self.reported_steps.pop(trial_id, None)
        try:
            self.tell(self.study, trial, record, interrupted=interrupted)
        except Exception as exc:  # noqa: BLE001 - the ledger still holds the record
            logging.getLogger(__name__).warning("optuna tell of trial %s failed: %s", trial.number, exc)

    def save(self, checkpoint_path: str) -> None:
        """Tune checkpoints its searcher; this one's state is the journal study, so only its name is saved."""
        Path(checkpoint_path).write_text(json.dumps({"study": self.study.study_name}))

    def restore(self, checkpoint_path: str) -> None:
        """Nothing to restore: every run re-opens the journal study."""
