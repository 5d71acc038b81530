"""Analysis of ptsweep results: statistics of the transfer test ([S] §3.1), power-law fits, figures.

Pure functions on numpy / pandas tables; no model, Ray or W&B imports. Plotting is imported lazily
(``from ptsweep.analysis import plots``) so that importing this package does not import matplotlib.
"""

from .fits import coord_slopes, fit_loglog_slope, fit_power_law, predict
from .stats import (
    distance,
    lr_optimum_drift,
    n_required,
    noise_band,
    perturb,
    rank_table,
    verdict,
)

__all__ = [
    "n_required",
    "perturb",
    "distance",
    "noise_band",
    "rank_table",
    "verdict",
    "lr_optimum_drift",
    "fit_power_law",
    "predict",
    "fit_loglog_slope",
    "coord_slopes",
]
