"""The seed noise of a fitted scaling curve, and the interval of the difference of two curves at given x.

A model's curve (``fits.fit_scaling_law``) is fitted to its cell means ybar_k (k over its distinct x, each the mean
of m_k seeds), so its prediction L(x) is a function of those means. Its noise, by the delta method:

    var L(x) = sum_k g_k(x)^2 v_k,    g_k(x) = dL(x) / d ybar_k,    v_k = s_k^2 / m_k

with s_k^2 the cell's own seed variance (df m_k - 1), or, for a cell with one seed, the model's seed variance pooled
over its cells (df their sum): a noisy cell is charged its own spread, never its neighbours'. For the pure law
(ln L linear in ln x, least squares on the K cell means) g is exact: g_k(x) = L(x) w_k(x) / ybar_k with
w_k(x) = 1/K + (ln x - mean ln x)(ln x_k - mean ln x) / S_xx; for the saturating law it is a central difference of
the refit.

The difference of two independent curves D(x) = L_a(x) - L_b(x) gets the Welch-Satterthwaite interval over all
terms (``blocked_fit.satterthwaite_interval``). At a baseline's own cell, with two cells per model, that is Welch's
interval of the two cells' seeds.

Lack of fit (the classical test of a regression with replicates, on ln loss): with more cells than the law has
parameters p, F = [sum_k m_k (ln ybar_k - ln L(x_k))^2 / (K - p)] / [SS_pure / (n - K)], SS_pure the seeds' squared
deviations from their cell's mean of ln loss (n runs), against F(K - p, n - K). Where its p-value is below
LACK_OF_FIT_ALPHA the curve misses its own cells by more than their seed noise explains; its terms are then scaled by
F, with K - p df (the residual mean square in place of the pure seed error), so that the interval carries the
misfit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ptsweep.analysis.blocked_fit import satterthwaite_interval
from ptsweep.analysis.fits import fit_power_law, pooled_seed_variance, predict

LACK_OF_FIT_ALPHA = 0.05
"""Significance level of the lack-of-fit test below which a curve is said to miss its cells."""
STEP = 1e-4
"""Relative step of the central difference that gives the saturating law's sensitivity to a cell mean."""
ZERO_WEIGHT = 1e-9
"""A cell whose sensitivity is below this fraction of the largest does not move L(x) (rounding of an exact 0)."""


@dataclass
class Cells:
    """A model's runs grouped by x: distinct x (ascending), seed means, the variance of each mean and its df."""

    x: np.ndarray
    mean: np.ndarray
    var_of_mean: np.ndarray
    df: np.ndarray
    m: np.ndarray
    """Seeds per cell."""
    pure_ss: float
    """Sum over cells of the seeds' squared deviations of ln loss from their cell's mean (df n - K)."""


def cells(x, y) -> Cells:
    """:class:`Cells` of runs (x, y) (one entry per run; non-finite or non-positive ones dropped, as the fit
    drops them). Variances are NaN when no cell has two seeds."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    x, y = x[keep], y[keep]
    ux = np.unique(x)
    groups = [y[x == v] for v in ux]
    pooled, pooled_df = pooled_seed_variance(groups)
    var = [g.var(ddof=1) / g.size if g.size >= 2 else pooled / g.size for g in groups]
    df = [g.size - 1 if g.size >= 2 else pooled_df for g in groups]
    pure_ss = float(sum(((np.log(g) - np.log(g).mean()) ** 2).sum() for g in groups))
    return Cells(ux, np.array([g.mean() for g in groups]), np.array(var, dtype=float), np.array(df, dtype=float),
                 np.array([g.size for g in groups]), pure_ss)


def sensitivity(fit: dict, c: Cells, at) -> np.ndarray:
    """(K, len(at)): dL(x) / d ybar_k of ``fit`` (fitted to ``c``'s means, its form kept) at every x of ``at``."""
    at = np.asarray(at, dtype=float)
    if fit["form"] == "power_law":
        lx, lk = np.log(at), np.log(c.x)
        w = 1 / lk.size + np.outer(lk - lk.mean(), lx - lk.mean()) / float(((lk - lk.mean()) ** 2).sum())
        return predict(fit, at)[None, :] * w / c.mean[:, None]
    out = np.empty((c.x.size, at.size))
    for k in range(c.x.size):
        h = STEP * c.mean[k]
        up, down = c.mean.copy(), c.mean.copy()
        up[k] += h
        down[k] -= h
        out[k] = (predict(fit_power_law(c.x, up, with_const=True), at)
                  - predict(fit_power_law(c.x, down, with_const=True), at)) / (2 * h)
    return out


def lack_of_fit(fit: dict, c: Cells) -> dict | None:
    """{"F", "df1", "df2", "p"} of the lack-of-fit test (module docstring); None when the curve has no spare cell
    (K <= p) or the seeds have no spread (no cell with two seeds, or every seed equal)."""
    from scipy.special import fdtrc

    df1, df2 = c.x.size - (3 if fit["form"] == "power_law_const" else 2), int(c.m.sum() - c.x.size)
    if df1 <= 0 or df2 <= 0 or c.pure_ss <= 0:
        return None
    resid = np.log(c.mean) - np.log(predict(fit, c.x))
    f = float((c.m * resid**2).sum() / df1 / (c.pure_ss / df2))
    return {"F": f, "df1": int(df1), "df2": df2, "p": float(fdtrc(df1, df2, f))}


def terms(fit: dict, c: Cells, at) -> list[list[tuple[float, float]]]:
    """Per x of ``at``: the (u, df) variance terms of L(x), one per cell that moves it (|g| above ZERO_WEIGHT of
    the largest), scaled for a significant lack of fit (module docstring)."""
    g = sensitivity(fit, c, at)
    test = lack_of_fit(fit, c)
    scale, misfit_df = (test["F"], test["df1"]) if test and test["p"] < LACK_OF_FIT_ALPHA else (1.0, None)
    out = []
    for i in range(g.shape[1]):
        tiny = ZERO_WEIGHT * np.abs(g[:, i]).max()
        out.append([(gk * gk * v * scale, misfit_df or df) for gk, v, df in zip(g[:, i], c.var_of_mean, c.df)
                    if abs(gk) > tiny])
    return out


def difference_interval(fit_a: dict, cells_a: Cells, fit_b: dict, cells_b: Cells, at,
                        level: float) -> list[tuple[float, float, float, float]]:
    """(se, df, lo, hi) of D(x) = L_a(x) - L_b(x) at every x of ``at`` (module docstring); NaN where a cell that
    moves D has no variance (one seed per cell)."""
    at = np.asarray(at, dtype=float)
    diff = predict(fit_a, at) - predict(fit_b, at)
    out = []
    for d, ta, tb in zip(diff, terms(fit_a, cells_a, at), terms(fit_b, cells_b, at)):
        both = ta + tb
        ok = all(math.isfinite(u) and df > 0 for u, df in both)
        out.append(satterthwaite_interval(float(d), both, level) if ok else (math.nan,) * 4)
    return out
