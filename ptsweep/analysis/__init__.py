"""Analysis of ptsweep results: design and verdict of the transfer test ([S] §3.1), power-law fits, figures.

Pure functions on numpy / pandas tables; no model, Ray or W&B imports. Plotting is imported lazily
(``from ptsweep.analysis import plots``) so that importing this package does not import matplotlib.
"""

from .design import distance, n_required, perturb
from .fits import coord_slopes, fit_power_law, predict
from .verification import noise_band, rank_table, verdict

__all__ = ["n_required", "perturb", "distance", "noise_band", "rank_table", "verdict", "fit_power_law", "predict",
           "coord_slopes"]
