"""Seed-blocked least squares, the Student t quantile and Welch-Satterthwaite intervals: the one linear model behind
the verification contrasts, the LR-curve optimum of ``transfer_drift`` and the regret surface.

One row per run r, with the caller's effect columns x_r and the run's seed as a block (randomized-block design):

    y_r = x_r' beta + u_{seed(r)} + e_r,   e ~ N(0, sigma^2) independent                                      (B1)

The seed blocks enter as indicators of every seed but the first (the effect columns must span the constant). One
SVD of the design X gives X^+ y, (X'X)^+ = X^+ X^+' and the rank; sigma^2 = RSS / df, df = runs - rank(X). A contrast
c'beta is estimable when c lies in the row space of X; its t statistic has df degrees of freedom. This is statsmodels'
``OLS`` with ``C(point) + C(seed)``, written out because the verdict simulations fit tens of thousands of small
designs and a non-estimable contrast must come back flagged, not as a number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

ESTIMABLE_TOL = 1e-8
"""A contrast c is estimable when max |c - c X^+ X| is below this (c in the row space of the design)."""


def t_ppf(q: float, df: float) -> float:
    """Student t quantile of probability ``q`` at ``df`` degrees of freedom (df = inf: the normal quantile): the
    project's one t quantile (scipy.special: scipy.stats takes seconds to import)."""
    from scipy.special import stdtrit

    return float(stdtrit(df, q))


def welch_interval(diff: float, u_a: float, df_a: float, u_b: float, df_b: float,
                   level: float) -> tuple[float, float, float, float]:
    """(se, df, lo, hi) of ``diff``, the difference of two independent estimates with variances u_a, u_b estimated
    with df_a, df_b degrees of freedom: :func:`satterthwaite_interval` of the two terms."""
    return satterthwaite_interval(diff, [(u_a, df_a), (u_b, df_b)], level)


def satterthwaite_interval(estimate: float, terms: Sequence[tuple[float, float]],
                           level: float) -> tuple[float, float, float, float]:
    """(se, df, lo, hi) of an estimate whose variance is the sum of independent terms (u_i, df_i), each u_i
    estimated with df_i degrees of freedom: se^2 = sum u_i, Welch-Satterthwaite df = se^4 / sum (u_i^2 / df_i)
    (terms with u_i = 0 carry no weight; inf when se = 0), estimate -+ t_df((1 + level) / 2) se."""
    total = float(sum(u for u, _ in terms))
    se = math.sqrt(total)
    spread = sum(u**2 / df for u, df in terms if u > 0)
    df = total**2 / spread if total > 0 else math.inf
    q = t_ppf(0.5 + level / 2, df)
    return se, df, estimate - q * se, estimate + q * se


def seed_block_columns(seeds: Sequence | None, n_runs: int) -> np.ndarray:
    """(n_runs, k - 1) indicators of the k distinct seeds but the first in sorted order; (n_runs, 0) for None."""
    if seeds is None:
        return np.zeros((n_runs, 0))
    _, code = np.unique(np.asarray(seeds), return_inverse=True)
    return (code.reshape(-1, 1) == np.arange(1, code.max() + 1)).astype(float)


@dataclass(frozen=True)
class BlockedFit:
    """Least squares of (B1); the first ``n_effects`` coefficients belong to the caller's effect columns."""

    design: np.ndarray  # (N, P): effect columns, then seed blocks
    pinv: np.ndarray  # (P, N)
    coef: np.ndarray  # (P,)
    y: np.ndarray  # (N,)
    n_effects: int
    rank: int

    @property
    def df(self) -> int:
        return int(self.y.size - self.rank)

    @property
    def resid(self) -> np.ndarray:
        return self.y - self.design @ self.coef

    @property
    def rss(self) -> float:
        return float(self.resid @ self.resid)

    @property
    def sigma(self) -> float:
        """sqrt(RSS / df); NaN without residual degrees of freedom."""
        return math.sqrt(self.rss / self.df) if self.df > 0 else math.nan

    @property
    def full_rank(self) -> bool:
        return self.rank == self.design.shape[1]

    @property
    def effects(self) -> np.ndarray:
        return self.coef[:self.n_effects]

    @property
    def seed_effect(self) -> np.ndarray:
        """(N,) the fitted seed effect of each run (0 for the first seed)."""
        return self.design[:, self.n_effects:] @ self.coef[self.n_effects:]

    def cov(self) -> np.ndarray:
        """(p, p) sigma^2 (X'X)^+ of the effect coefficients (seed effects profiled out)."""
        return self.sigma**2 * (self.pinv @ self.pinv.T)[:self.n_effects, :self.n_effects]

    def contrasts(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(estimate, se, estimable) of the contrasts c'beta, one per row of ``weights`` (k, p) over the effect
        columns; a non-estimable contrast has estimate NaN and se inf."""
        c = np.zeros((len(weights), self.design.shape[1]))
        c[:, :self.n_effects] = weights
        c_pinv = c @ self.pinv  # (k, N)
        estimable = np.abs(c - c_pinv @ self.design).max(axis=1) < ESTIMABLE_TOL
        with np.errstate(invalid="ignore"):
            se = np.where(estimable, self.sigma * np.sqrt((c_pinv**2).sum(axis=1)), np.inf)
        return np.where(estimable, c @ self.coef, np.nan), se, estimable


def fit_blocked(effects: np.ndarray, y: Sequence[float], seeds: Sequence | None = None) -> BlockedFit:
    """Least squares of (B1): ``effects`` (N, p) the caller's columns, ``y`` (N,) the runs' losses, ``seeds`` (N,)
    their seeds (None: no blocks, the unpaired design)."""
    y = np.asarray(y, dtype=float)
    effects = np.asarray(effects, dtype=float).reshape(y.size, -1)
    design = np.column_stack([effects, seed_block_columns(seeds, y.size)])  # (N, p + seeds - 1)
    pinv = np.linalg.pinv(design)
    return BlockedFit(design=design, pinv=pinv, coef=pinv @ y, y=y, n_effects=effects.shape[1],
                      rank=int(np.linalg.matrix_rank(design)))
