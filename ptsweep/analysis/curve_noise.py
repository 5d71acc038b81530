"""The seed noise of a fitted scaling curve, and the interval of the difference of two curves at given x.

A model's curve (``fits.fit_scaling_law``) is fitted to its cell means ybar_k (k over its K distinct x, each the
mean of m_k seeds), so its prediction L(x) is a function of those means. Its noise, by the delta method:

    var L(x) = sum_k g_k(x)^2 s_k^2 / m_k,    g_k(x) = dL(x) / d ybar_k

with s_k^2 the cell's own seed variance (df m_k - 1): a noisy cell is charged its own spread, never its neighbours'.
A cell with one seed that moves L(x) leaves L(x) without a measured noise, and so does a model whose seeds show no
spread at all (identical seeds): no interval there. For the pure law (ln L linear in ln x, least squares on the cell
means) g is exact: g_k(x) = L(x) w_k(x) / ybar_k with w_k(x) = 1/K + (ln x - mean ln x)(ln x_k - mean ln x) / S_xx;
for the saturating law it is the implicit-function derivative of the least-squares fit, dtheta / dybar = (J'J -
sum_k r_k H_k)^-1 J'.

The difference of two independent curves D(x) = L_a(x) - L_b(x) gets the Welch-Satterthwaite interval over the
terms g_k^2 s_k^2 / m_k (df m_k - 1) of both (``blocked_fit.satterthwaite_interval``). At a baseline's own cell, with
two cells per model, that is Welch's interval of the two cells' seeds.

Lack of fit (the classical test of a regression with replicates, on ln loss, seeds assumed equally noisy at every
size): with more cells than the law has parameters p, the m_k-weighted least-squares fit of ln ybar_k gives
F = [sum_k m_k (ln ybar_k - ln L_w(x_k))^2 / (K - p)] / [SS_pure / (n - K)], SS_pure the seeds' squared deviations
from their cell's mean of ln loss (n runs), against F(K - p, n - K). Where its p-value is below LACK_OF_FIT_ALPHA the
curve misses its own cells by more than their seed noise explains: its variance is then scaled by F and carried as
one term at K - p df (the residual mean square in place of the pure seed error), so the interval carries the misfit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ptsweep.analysis.blocked_fit import satterthwaite_interval
from ptsweep.analysis.fits import predict

LACK_OF_FIT_ALPHA = 0.05
"""Significance level of the lack-of-fit test below which a curve is said to miss its cells."""
ZERO_WEIGHT = 1e-9
"""A coefficient below this fraction of the largest does not move L(x) (rounding of an exact 0)."""


@dataclass
class Cells:
    """A model's runs grouped by x: distinct x (ascending), seeds, seed means and variances."""

    x: np.ndarray
    m: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    """Each cell's own seed variance (NaN with one seed)."""
    pure_ss: float
    """Sum over cells of the seeds' squared deviations of ln loss from their cell's mean (df n - K)."""


def cells(x, y) -> Cells:
    """:class:`Cells` of runs (x, y) (one entry per run; non-finite or non-positive ones dropped, as the fit
    drops them)."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    x, y = x[keep], y[keep]
    ux = np.unique(x)
    groups = [y[x == v] for v in ux]
    return Cells(ux, np.array([g.size for g in groups]), np.array([g.mean() for g in groups]),
                 np.array([g.var(ddof=1) if g.size >= 2 else math.nan for g in groups]),
                 float(sum(((np.log(g) - np.log(g).mean()) ** 2).sum() for g in groups)))


def sensitivity(fit: dict, c: Cells, at) -> np.ndarray:
    """(K, len(at)): dL(x) / d ybar_k of ``fit`` (fitted to ``c``'s means, its form kept) at every x of ``at``."""
    at = np.asarray(at, dtype=float)
    if fit["form"] == "power_law":
        lx, lk = np.log(at), np.log(c.x)
        w = 1 / lk.size + np.outer(lk - lk.mean(), lx - lk.mean()) / float(((lk - lk.mean()) ** 2).sum())
        return predict(fit, at)[None, :] * w / c.mean[:, None]
    p0 = float(np.exp(np.log(c.x).mean()))  # fit_power_law's unit: theta = (a0, b, c) with L = c + a0 (x / p0)^-b
    b, a0 = float(fit["b"]), float(fit["a"]) / p0 ** float(fit["b"])

    def grad(s: np.ndarray) -> np.ndarray:  # dL / dtheta at scaled x s, (len(s), 3)
        return np.column_stack([s**-b, -a0 * np.log(s) * s**-b, np.ones_like(s)])

    s = c.x / p0
    J, r = grad(s), c.mean - predict(fit, c.x)
    curv = np.zeros((3, 3))  # sum_k r_k d2L(x_k) / dtheta2: only the (a0, b) block is non-zero
    for rk, sk in zip(r, s):
        ln, p = math.log(sk), sk**-b
        curv[:2, :2] += rk * np.array([[0.0, -ln * p], [-ln * p, a0 * ln * ln * p]])
    dtheta = np.linalg.solve(J.T @ J - curv, J.T)  # (3, K)
    return (grad(at / p0) @ dtheta).T


def lack_of_fit(fit: dict, c: Cells) -> dict | None:
    """{"F", "df1", "df2", "p"} of the lack-of-fit test (module docstring); None when the curve has no spare cell
    (K <= p) or the seeds have no spread."""
    from scipy.special import fdtrc

    df1, df2 = c.x.size - (3 if fit["form"] == "power_law_const" else 2), int(c.m.sum() - c.x.size)
    if df1 <= 0 or df2 <= 0 or c.pure_ss <= 0:
        return None
    f = float(_weighted_rss(fit, c) / df1 / (c.pure_ss / df2))
    return {"F": f, "df1": int(df1), "df2": df2, "p": float(fdtrc(df1, df2, f))}


def _weighted_rss(fit: dict, c: Cells) -> float:
    """sum_k m_k (ln ybar_k - ln L_w(x_k))^2 of the m_k-weighted least-squares fit of ln ybar_k in ``fit``'s form
    (the pure law in closed form; the saturating one refitted from ``fit``'s values)."""
    lx, ly, w = np.log(c.x), np.log(c.mean), c.m.astype(float)
    if fit["form"] == "power_law":
        slope, icpt = np.polyfit(lx, ly, 1, w=np.sqrt(w))
        return float((w * (ly - icpt - slope * lx) ** 2).sum())
    from scipy.optimize import least_squares

    p0 = float(np.exp(lx.mean()))
    s, top = c.x / p0, float(c.mean.min())

    def resid(theta: np.ndarray) -> np.ndarray:
        a0, b, cc = theta
        return np.sqrt(w) * (ly - np.log(cc + a0 * s**-b))

    start = [float(fit["a"]) / p0 ** float(fit["b"]), float(fit["b"]), min(float(fit["c"]), top * (1 - 1e-6))]
    sol = least_squares(resid, start, bounds=([1e-300, 0.0, 0.0], [np.inf, 10.0, top * (1 - 1e-9)]))
    return float((sol.fun**2).sum())


def terms(fit: dict, c: Cells, at) -> list[list[tuple[float, float]]]:
    """Per x of ``at``: the (variance, df) terms of L(x) (module docstring), one per cell that moves it (NaN for a
    cell with one seed), or one term (F x their sum, K - p df) for a significant lack of fit; [(nan, 0)] where the
    model's seeds show no spread at all."""
    if not np.nansum(c.var) > 0:
        return [[(math.nan, 0)] for _ in np.atleast_1d(at)]
    coef = sensitivity(fit, c, at) ** 2 / c.m[:, None]  # (K, len(at))
    test = lack_of_fit(fit, c)
    out = []
    for col in coef.T:
        keep = col > ZERO_WEIGHT * col.max()
        parts = [(float(u), float(df)) for u, df in zip(col[keep] * c.var[keep], c.m[keep] - 1)]
        if test and test["p"] < LACK_OF_FIT_ALPHA:
            parts = [(test["F"] * sum(u for u, _ in parts), float(test["df1"]))]
        out.append(parts)
    return out


def difference_interval(fit_a: dict, cells_a: Cells, fit_b: dict, cells_b: Cells, at,
                        level: float) -> list[tuple[float, float, float, float]]:
    """(se, df, lo, hi) of D(x) = L_a(x) - L_b(x) at every x of ``at`` (module docstring); NaN where a model's seeds
    show no spread."""
    at = np.asarray(at, dtype=float)
    diff = predict(fit_a, at) - predict(fit_b, at)
    out = []
    for d, ta, tb in zip(diff, terms(fit_a, cells_a, at), terms(fit_b, cells_b, at)):
        both = ta + tb
        ok = all(math.isfinite(u) and df > 0 for u, df in both)
        out.append(satterthwaite_interval(float(d), both, level) if ok else (math.nan,) * 4)
    return out
