"""The demo's final models (:func:`final_models`), read from its three study folders for the report
(``demo_report``) and its figures (``demo_figures``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ptsweep import metric_keys
from ptsweep.trials.fields import finished


def with_context(df: pd.DataFrame, study_dir: Path) -> pd.DataFrame:
    """``df`` (column trial_key) plus every ledger metric (``metric_keys.LEDGER_KEYS``) and ``shared_from``."""
    from ptsweep.trials.ledger import read_ledger, with_ledger_metrics

    out = with_ledger_metrics(df, study_dir, names=metric_keys.LEDGER_KEYS)
    out["shared_from"] = [(read_ledger(study_dir, str(k)) or {}).get("shared_from", "") for k in out["trial_key"]]
    return out


def mean_gain(rows: pd.DataFrame) -> tuple[float, float]:
    """Mean test context gain over runs (seeds) and its SE (token SEs of independent runs: sqrt(sum se^2) / n)."""
    g, se = rows["test_context_gain"].astype(float), rows["test_context_gain_se"].astype(float)
    ok = np.isfinite(g) & np.isfinite(se)
    if not ok.any():
        return math.nan, math.nan
    return float(g[ok].mean()), float(math.sqrt((se[ok] ** 2).sum()) / ok.sum())


def final_models(root: Path) -> pd.DataFrame:
    """One row per final model of the report (test split): the tuned point (its trial re-scored on test), every
    verification point (mean over its seeds), every scaling point (mean over seeds); columns role, name, width,
    loss, unigram, no_context, gain, gain_se, learned, n_runs."""
    t, v, s = root / "tune-small", root / "verify-transfer", root / "scaling-curves"
    rows = []

    def add(role, name, width, runs: pd.DataFrame, model="pt"):
        g, se = mean_gain(runs)
        rows.append({"role": role, "name": name, "model": model, "width": width,
                     "loss": float(runs["test_loss"].mean()), "unigram": float(runs["test_unigram_loss"].mean()),
                     "no_context": float(runs["test_no_context_loss"].mean()), "gain": g, "gain_se": se,
                     "learned": metric_keys.learned_context({"context_gain": g, "context_gain_se": se}),
                     "n_runs": int(len(runs)), "shared": ", ".join(x for x in runs.get("shared_from", []) if x)})

    trials = with_context(pd.read_parquet(t / "trials.parquet"), t)
    ok = finished(trials)
    if len(ok):
        best = ok.loc[ok["val_loss"].astype(float).idxmin()]
        add("tuned point", f"trial {best['trial_id']}", None, ok[ok["trial_id"] == best["trial_id"]])
    verify_runs = with_context(pd.read_parquet(v / "trials.parquet"), v)
    verify_runs = verify_runs[np.isfinite(verify_runs["val_loss"].astype(float))]
    for point, g in verify_runs.groupby(verify_runs["trial"].str.replace(r"-s\d+$", "", regex=True), sort=True):
        add("verification", point, int(g["model.width"].iloc[0]), g)
    scaling_runs = with_context(pd.read_parquet(s / "runs.parquet"), s)
    scaling_runs = scaling_runs[np.isfinite(scaling_runs["loss"].astype(float))]
    for (series, scale), g in scaling_runs.groupby(["series", "scale"], sort=True):
        add("scaling", f"{series} N={int(scale)}", int(scale), g, model=str(g["model"].iloc[0]))
    return pd.DataFrame(rows)
