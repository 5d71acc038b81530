"""The names every sweep module shares: the metric Tune optimises, the results-table columns, the param_space key of
a fixed-list trial, and how a loss and an error are written into a record. Imports no other sweeps module."""

from __future__ import annotations

import math
from typing import Any

from ptsweep import metric_keys

METRIC, MODE = "val_loss", "min"
FINAL_STATUSES = ("ok", "diverged", "failed")
"""Statuses of a trial that ran to its end (anything else was stopped early or interrupted)."""
TRIAL_FIELD = "__trial__"
"""param_space key that carries the trial key of a fixed-list trial (never a config key: no dot)."""
# Final metrics copied from the ledger into result tables (in this order; history is never copied).
TABLE_METRICS = ("val_loss", "status", "error", "steps", "tokens", "best_val_loss", "val_loss_init", "train_loss",
                 "params", "non_embedding_params", "flops_per_token", "tokens_per_s", "wall_s", "device",
                 "source_sha", *metric_keys.LEDGER_KEYS)


def one_line(e: BaseException) -> str:
    """``Type: message``, first line only, at most 500 characters (a trial's recorded error)."""
    return (f"{type(e).__name__}: {e}".splitlines() or [type(e).__name__])[0][:500]


def finite_or_inf(x: Any) -> float:
    """``x`` as a float; inf for a missing, non-numeric or non-finite loss (failed and diverged trials rank last)."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return math.inf
    return x if math.isfinite(x) else math.inf


def finished(trials):
    """The rows of a trials table that ran their budget to a finite validation loss (status ok)."""
    if trials.empty:
        return trials
    return trials[trials["val_loss"].map(math.isfinite) & (trials["status"] == "ok")]


def early_stopping_label(grace_frac: float, reduction: float) -> str:
    """How a search stops trials early, as reports name it: ASHA with its grace period and reduction, or none
    (``sweep.asha_reduction`` <= 1)."""
    if reduction > 1:
        return f"ASHA (grace {grace_frac:g} of the budget, reduction {reduction:g})"
    return "no early stopping"
