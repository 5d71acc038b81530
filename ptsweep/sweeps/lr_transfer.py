"""Learning-rate transfer study: does the optimal base LR stay put across widths under muP (and move under SP)?

Grid (one Ray Tune trial per point, through ``sweeps.common.run_trials``: resumable, failures and divergences kept):

    LR study      sweep.lr_parametrizations x sweep.lr_widths x geomspace(*sweep.lr_grid_range, sweep.lr_grid_points)
                  x sweep.lr_seeds                                  (overrides model.parametrization, model.width,
                                                                     optim.lr, seed)
    weight study  muP only: sweep.lr_widths x sweep.lr_weight_grid (model.w_attn) x sweep.lr_seeds at the base LR
                  optim.lr                                          (skipped when lr_weight_grid is empty)

Every trial uses the scaling paradigm ``sweep.lr_scaling`` and trains PT for the same token budget (``sweep.lr_tokens``
or ``train.tokens``) with the preset's schedule and warm-up; the metric is the
final validation loss. For each parametrization, :func:`ptsweep.analysis.stats.lr_optimum_drift` gives the optimum
per width (seeds averaged, diverged runs dropped) and the drift log2(lr*(largest width) / lr*(smallest width)) in
factors of 2 (muP: ~0; SP: typically negative). The same is done for model.w_attn. An optimum on the edge of its grid
is flagged (``at_edge``): its drift is then only a bound.

Outputs in ``<out_dir>/<study or lr-transfer>/``: ``trials.csv/.parquet`` (every trial), ``summary.json``,
``lr_transfer.png`` (validation loss vs LR, one curve per width, one panel per parametrization) and
``w_attn_transfer.png``; Ray state in ``ray/`` and the per-trial ledger in ``trials/``.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from ptsweep.config import RunConfig
from ptsweep.sweeps.common import (log_summary, ray_session, run_trials, save_table, study_path, sweep_tags,
                                   write_json)

SWEEP = "lr-transfer"
WEIGHT_KEY = "model.w_attn"
"""The information weight studied alongside the LR (spec §7: omega_ZH, the attention temperature)."""


def lr_grid(cfg: RunConfig) -> list[float]:
    """The log-spaced LR grid (both ends included), rounded to 4 significant digits for readable trial keys."""
    lo, hi = cfg.sweep.lr_grid_range
    return [float(f"{x:.4g}") for x in np.geomspace(lo, hi, cfg.sweep.lr_grid_points)]


def trial_list(cfg: RunConfig) -> tuple[list[dict], list[str]]:
    """(overrides, labels) of every trial of the study (module docstring)."""
    sw = cfg.sweep
    common = {"model.scaling": sw.lr_scaling, "train.tokens": float(sw.lr_tokens or cfg.train.tokens)}
    trials, labels = [], []
    for par in sw.lr_parametrizations:
        for width in sw.lr_widths:
            for s in range(sw.lr_seeds):
                seed = cfg.seed + s
                for lr in lr_grid(cfg):
                    trials.append({**common, "model.parametrization": par, "model.width": int(width),
                                   "optim.lr": lr, "seed": seed})
                    labels.append(f"lr-{par}-w{width}")
                if par != "mup":  # the information weights are muP hyperparameters (spec §7)
                    continue
                for wa in sw.lr_weight_grid:
                    trials.append({**common, "model.parametrization": par, "model.width": int(width),
                                   WEIGHT_KEY: float(wa), "seed": seed})
                    labels.append(f"wattn-{par}-w{width}")
    return trials, labels


def _with_edges(drift: dict, grid: list[float]) -> dict:
    """Add ``at_edge`` {width: bool} (optimum on the first/last grid point) and ``drift_is_bound``."""
    lo, hi = min(grid), max(grid)
    for res in drift.values():
        edge = {w: bool(math.isclose(v, lo, rel_tol=1e-6) or math.isclose(v, hi, rel_tol=1e-6))
                for w, v in res["optimum_lr"].items()}
        res["at_edge"] = edge
        res["drift_is_bound"] = bool(edge.get(res["smallest_width"]) or edge.get(res["largest_width"]))
    return drift


def analyse(df, cfg: RunConfig) -> dict:
    """Optima and drifts of the LR study and of the w_attn study from a trials table (see module docstring)."""
    from ptsweep.analysis.stats import lr_optimum_drift

    out: dict = {}
    lr_rows = df[df["label"].str.startswith("lr-")]
    if len(lr_rows):
        out["lr"] = _with_edges(lr_optimum_drift(lr_rows, lr_col="optim.lr", width_col="model.width",
                                                 loss_col="val_loss", param_col="model.parametrization"),
                                lr_grid(cfg))
    w_rows = df[df["label"].str.startswith("wattn-")]
    if len(w_rows):
        out["w_attn"] = _with_edges(lr_optimum_drift(w_rows, lr_col=WEIGHT_KEY, width_col="model.width",
                                                     loss_col="val_loss", param_col="model.parametrization"),
                                    list(cfg.sweep.lr_weight_grid))
    return out


def plot(df, sdir: Path) -> dict[str, Path]:
    """lr_transfer.png (+ w_attn_transfer.png when the weight study ran)."""
    from ptsweep.analysis.plots import plot_lr_transfer

    images = {}
    lr_rows = df[df["label"].str.startswith("lr-")]
    if len(lr_rows) and np.isfinite(lr_rows["val_loss"].astype(float)).any():
        images["lr_transfer"] = plot_lr_transfer(
            lr_rows, sdir / "lr_transfer.png", lr_col="optim.lr", width_col="model.width", loss_col="val_loss",
            param_col="model.parametrization", title="PT: validation loss vs base LR across widths (muP vs SP)")
    w_rows = df[df["label"].str.startswith("wattn-")]
    if len(w_rows) and np.isfinite(w_rows["val_loss"].astype(float)).any():
        images["w_attn_transfer"] = plot_lr_transfer(
            w_rows, sdir / "w_attn_transfer.png", lr_col=WEIGHT_KEY, width_col="model.width", loss_col="val_loss",
            param_col="model.parametrization",
            title="PT: validation loss vs information weight model.w_attn (x axis) across widths")
    return images


def run(cfg: RunConfig) -> Path:
    """Run (or resume) the study and write its tables, plots and summary; returns the study folder."""
    t0 = time.perf_counter()
    sdir = study_path(cfg, SWEEP)
    sdir.mkdir(parents=True, exist_ok=True)
    trials, labels = trial_list(cfg)
    with ray_session(cfg.ray):
        df = run_trials(cfg, trials, sdir, "grid", labels=labels, tags=sweep_tags(SWEEP, cfg.model))
    for col in ("optim.lr", WEIGHT_KEY):  # the rows of the other study ran at the base value
        base = cfg.optim.lr if col == "optim.lr" else cfg.model.w_attn
        df[col] = df[col].fillna(base) if col in df else base
    save_table(df, sdir, "trials")
    result = analyse(df, cfg)
    images = plot(df, sdir)
    counts = df["status"].value_counts().to_dict()
    summary = {
        "study": sdir.name,
        "lr": result.get("lr", {}),
        "w_attn": result.get("w_attn", {}),
        "settings": {"widths": list(cfg.sweep.lr_widths), "lr_grid": lr_grid(cfg),
                     "w_attn_grid": list(cfg.sweep.lr_weight_grid), "w_attn_study_lr": cfg.optim.lr,
                     "seeds": cfg.sweep.lr_seeds, "parametrizations": list(cfg.sweep.lr_parametrizations),
                     "tokens": float(cfg.sweep.lr_tokens or cfg.train.tokens), "batch_size": cfg.train.batch_size, "seq_len": cfg.data.seq_len,
                     "schedule": cfg.optim.schedule, "warmup_frac": cfg.optim.warmup_frac,
                     "scaling": cfg.sweep.lr_scaling, "data": cfg.data.name, "preset": cfg.preset,
                     "w_attn_parametrizations": ["mup"]},
        "n_trials": int(len(df)),
        "status_counts": {str(k): int(v) for k, v in counts.items()},
        "images": {k: Path(v).name for k, v in images.items()},
        "wall_s": time.perf_counter() - t0,
    }
    write_json(sdir / "summary.json", summary)
    for name, res in summary["lr"].items():
        opt = ", ".join(f"{w}: {v:.3g}" for w, v in res["optimum_lr"].items())
        print(f"lr-transfer {name}: optimum LR per width {{{opt}}}; drift {res['drift_log2']:+.2f} factors of 2"
              + (" (optimum at a grid edge: a bound)" if res["drift_is_bound"] else ""))
    log_summary(cfg, sdir, SWEEP, {"trials": df}, images, {k: v for k, v in summary.items() if k != "settings"},
                tags=[f"sweep={SWEEP}"])
    return sdir
