"""The demo report's own figures, each with the baselines drawn as lines: ``demo_tuning.png``, ``demo_losses.png``
and ``demo_context.png``, from tune-small's trials table (with ledger metrics) and ``demo_models.final_models``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ptsweep.analysis.plots import new_figure

PT_TARGET = 0.2
"""Context gain (nats) the demo's PT models should reach (the context-gain line of demo_context.png)."""
COLORS = {"pt": "tab:blue", "bert": "tab:orange", "ut": "tab:green"}


def _axes(size: tuple[float, float]):
    fig, axes = new_figure(size=size, layout=None)
    return fig, axes[0, 0]


def _baseline_lines(ax, unigram: float, no_context: float) -> None:
    if math.isfinite(unigram):
        ax.axhline(unigram, color="0.3", ls="--", lw=1, label=f"unigram {unigram:.3f}")
    if math.isfinite(no_context):
        ax.axhline(no_context, color="tab:red", ls=":", lw=1.2, label=f"no-context {no_context:.3f}")


def _finish(fig, ax, path: Path, xlabel: str, ylabel: str, title: str, legend_size: int = 8) -> Path:
    """Labels, legend, save."""
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.legend(fontsize=legend_size)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path


def plot_tuning(trials: pd.DataFrame, path: Path) -> Path:
    """tune-small: validation loss of every trial in order (ASHA-stopped ones hollow), both baselines as lines."""
    fig, ax = _axes((7, 4))
    t = trials.assign(n=trials["trial_id"].astype(int)).sort_values("n")
    for status, marker, fill in (("ok", "o", "tab:blue"), ("early_stopped", "o", "none")):
        g = t[(t["status"] == status) & np.isfinite(t["val_loss"].astype(float))]
        ax.scatter(g["n"], g["val_loss"], marker=marker, facecolors=fill, edgecolors="tab:blue",
                   label=f"{status} ({len(g)})")
    _baseline_lines(ax, float(t["unigram_loss"].dropna().mean()), float(t["no_context_loss"].dropna().mean()))
    return _finish(fig, ax, path, "trial (Optuna order)", "validation loss",
                   "tune-small: every trial against both baselines")


def plot_losses(models: pd.DataFrame, path: Path) -> Path:
    """Test loss of every final model vs PT width (scaling points per series, the verification base and points),
    the test baselines as lines."""
    fig, ax = _axes((7, 4.5))
    sc = models[models["role"] == "scaling"]
    for series, g in sc.groupby(sc["name"].str.split(" ").str[0]):
        g = g.sort_values("width")
        ax.plot(g["width"], g["loss"], marker="o", color=COLORS.get(str(g["model"].iloc[0])),
                label=f"{series} (scaling, mean of seeds)")
    ver = models[models["role"] == "verification"]
    if len(ver):
        base = ver[ver["name"].str.startswith("base")]
        pts = ver[~ver["name"].str.startswith("base")]
        ax.scatter(pts["width"] * 1.03, pts["loss"], marker="x", color="0.5", label="verification: perturbed points")
        ax.scatter(base["width"] * 1.03, base["loss"], marker="*", s=120, color="k", label="verification: base")
    _baseline_lines(ax, float(models["unigram"].mean()), float(models["no_context"].mean()))
    ax.set_xscale("log", base=2)
    return _finish(fig, ax, path, "PT width N (BERT / UT at matched parameter count)", "test loss (MLM)",
                   "Final models against the unigram and no-context baselines", legend_size=7)


def plot_context(models: pd.DataFrame, path: Path) -> Path:
    """Context gain +- 2 SE of every final model (test, [MASK]-input targets), with 0 and the PT target as lines."""
    fig, ax = _axes((max(7, 0.35 * len(models)), 4.5))
    x = np.arange(len(models))
    ax.errorbar(x, models["gain"], yerr=2 * models["gain_se"], fmt="none", ecolor="0.4", capsize=2)
    ax.scatter(x, models["gain"], c=[COLORS.get(m, "k") for m in models["model"]], zorder=3)
    ax.axhline(0, color="0.3", ls="--", lw=1, label="0 = unigram (nothing learned)")
    ax.axhline(PT_TARGET, color="tab:red", ls=":", lw=1.2, label=f"PT target {PT_TARGET} nats")
    ax.set_xticks(x, [f"{r['role'][:5]} {r['name']}" for _, r in models.iterrows()], rotation=70, fontsize=7,
                  ha="right")
    return _finish(fig, ax, path, "", "context gain on [MASK] targets (nats, +- 2 SE)",
                   "Did every final model learn context? (blue PT, orange BERT, green UT)")
