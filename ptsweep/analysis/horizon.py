"""The optimal LR over the training horizon: a power law in the budget and the range of exponents its brackets allow.

With budgets T_i (optimizer steps), the optimum eta*_i found on an LR grid at each and its bracket [lo_i, hi_i] (the
grid values on either side of the plausible optima; 0 or inf where the bracket is open at a grid edge), in
x = ln(T / T0), y = ln eta (T0 = the smallest budget):

    eta*(T) = eta0 (T / T0)^-beta,   y = ln eta0 - beta x                                                      (H1)

(H1) is fitted by least squares to the per-budget optima (:func:`fit_power`) and to every seed's optimum between grid
points (:func:`slope_interval`: the seeds' scatter gives a t interval of beta, which the brackets of a factor-2 grid
cannot resolve); :func:`beta_range` bounds beta by the brackets, :func:`slope_difference` compares the betas of two
settings, :func:`scale_lr` carries an LR to another budget.

The range of beta: for a fixed beta the intercepts allowed by budget i are [ln lo_i + beta x_i, ln hi_i + beta x_i];
intervals on a line share a point iff every two do, so beta is allowed iff beta (x_i - x_j) <= ln hi_j - ln lo_i for
every pair: beta_max is the least (ln hi_j - ln lo_i) / (x_i - x_j) over x_i > x_j, beta_min the largest
(ln lo_i - ln hi_j) / (x_j - x_i) over x_i < x_j; an empty range means no power law passes through every bracket.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def _logs(steps: Sequence[float], eta: Sequence[float]) -> tuple[np.ndarray, np.ndarray, float]:
    """(x = ln(T / T0), y = ln eta, T0) with T0 the smallest budget; ValueError on non-positive values."""
    t, e = np.asarray(steps, dtype=float), np.asarray(eta, dtype=float)
    if t.shape != e.shape or t.ndim != 1:
        raise ValueError(f"horizon fit: {t.size} budgets and {e.size} optima differ in number")
    if not (np.all(t > 0) and np.all(np.isfinite(t)) and np.all(e > 0) and np.all(np.isfinite(e))):
        raise ValueError("horizon fit: budgets and optimal LRs must be positive and finite")
    t0 = float(t.min())
    return np.log(t / t0), np.log(e), t0


def fit_power(steps: Sequence[float], eta: Sequence[float]) -> dict:
    """(H1) by least squares on the log-log points: {"beta", "eta0" (at T0), "T0", "n", "rms_log" (RMS residual of
    ln eta), "steps", "eta"}. Needs >= 2 distinct budgets (ValueError otherwise)."""
    x, y, t0 = _logs(steps, eta)
    if len(np.unique(x)) < 2:
        raise ValueError("horizon fit: need >= 2 distinct budgets")
    xm, ym = x.mean(), y.mean()
    slope = float(((x - xm) * (y - ym)).sum() / ((x - xm) ** 2).sum())
    icpt = float(ym - slope * xm)
    resid = y - (icpt + slope * x)
    return {"beta": 0.0 - slope, "eta0": math.exp(icpt), "T0": t0, "n": int(len(x)),
            "rms_log": float(np.sqrt(np.mean(resid ** 2))), "steps": [float(v) for v in steps],
            "eta": [float(v) for v in eta]}


def beta_range(steps: Sequence[float], lo: Sequence[float], hi: Sequence[float]) -> tuple[float, float] | None:
    """(beta_min, beta_max) of the power laws through every bracket [lo_i, hi_i] (module docstring; lo_i = 0 and
    hi_i = inf for open sides give -inf / inf bounds), or None when no power law passes through all of them."""
    t = np.asarray(steps, dtype=float)
    lo_l = np.array([math.log(v) if v > 0 else -math.inf for v in map(float, lo)])
    hi_l = np.array([math.log(v) if v > 0 else math.nan for v in map(float, hi)])
    if not (len(t) == len(lo_l) == len(hi_l)) or not np.all(lo_l <= hi_l):
        raise ValueError("horizon fit: each bracket needs lo <= hi, one per budget")
    x = np.log(t / t.min())
    b_min, b_max = -math.inf, math.inf
    for i in range(len(x)):
        for j in range(len(x)):
            if x[i] > x[j]:
                b_max = min(b_max, float((hi_l[j] - lo_l[i]) / (x[i] - x[j])))
            elif x[i] < x[j]:
                b_min = max(b_min, float((lo_l[i] - hi_l[j]) / (x[j] - x[i])))
            elif hi_l[j] < lo_l[i]:  # the same budget twice with disjoint brackets
                return None
    return (b_min, b_max) if b_min <= b_max else None


def vertex_lr(lrs: Sequence[float], losses: Sequence[float]) -> float | None:
    """exp(u*) of the parabola through (ln lr, loss) at the lowest finite loss and its two grid neighbours (``lrs``
    ascending); None when that loss is at an edge of the grid, a neighbour is not finite, or the three are level."""
    u, y = np.log(np.asarray(lrs, dtype=float)), np.asarray(losses, dtype=float)
    if len(u) < 3 or not np.isfinite(y).any():
        return None
    i = int(np.nanargmin(np.where(np.isfinite(y), y, np.nan)))
    if i in (0, len(u) - 1) or not (np.isfinite(y[i - 1]) and np.isfinite(y[i + 1])):
        return None
    (u0, u1, u2), (y0, y1, y2) = u[i - 1:i + 2], y[i - 1:i + 2]
    den = (u1 - u0) * (y1 - y2) - (u1 - u2) * (y1 - y0)
    if den == 0:
        return None
    return math.exp(u1 - 0.5 * ((u1 - u0) ** 2 * (y1 - y2) - (u1 - u2) ** 2 * (y1 - y0)) / den)


def slope_interval(steps: Sequence[float], eta: Sequence[float], level: float = 0.95) -> dict:
    """:func:`fit_power` over every (budget, seed optimum) point plus "beta_se", "beta_ci" (the t interval at
    ``level``, df = n - 2) and "df". Needs >= 3 points at >= 2 distinct budgets (ValueError otherwise)."""
    from ptsweep.analysis.blocked_fit import t_ppf

    fit = fit_power(steps, eta)
    x = _logs(steps, eta)[0]
    if len(x) < 3:
        raise ValueError("horizon fit: an interval needs >= 3 seed optima")
    sse = len(x) * fit["rms_log"] ** 2  # the residual sum of squares of the same fit
    se = math.sqrt(sse / (len(x) - 2) / float(((x - x.mean()) ** 2).sum()))
    q = t_ppf(0.5 + level / 2, len(x) - 2)
    return {**fit, "beta_se": se, "beta_ci": [fit["beta"] - q * se, fit["beta"] + q * se], "df": len(x) - 2}


def slope_difference(a: tuple[Sequence[float], Sequence[float]], b: tuple[Sequence[float], Sequence[float]],
                     level: float = 0.95) -> dict:
    """Whether beta differs between two settings (two widths, say): (H1) fitted to each set of (budgets, optima)
    points with its own intercept and slope, and beta_b - beta_a with its t interval from the pooled residual variance
    (df = n_a + n_b - 4). {"beta_a", "beta_b", "diff", "se", "ci", "df"}; each set needs >= 2 distinct budgets and
    the two >= 5 points in all (ValueError otherwise)."""
    from ptsweep.analysis.blocked_fit import t_ppf

    fits = [fit_power(*pts) for pts in (a, b)]
    sxx = [float(((x - x.mean()) ** 2).sum()) for x in (_logs(*pts)[0] for pts in (a, b))]
    df = sum(f["n"] for f in fits) - 4
    if df < 1:
        raise ValueError("horizon fit: comparing two slopes needs >= 5 points in all")
    s2 = sum(f["n"] * f["rms_log"] ** 2 for f in fits) / df
    se = math.sqrt(s2 * (1 / sxx[0] + 1 / sxx[1]))
    diff = fits[1]["beta"] - fits[0]["beta"]
    q = t_ppf(0.5 + level / 2, df)
    return {"beta_a": fits[0]["beta"], "beta_b": fits[1]["beta"], "diff": diff, "se": se,
            "ci": [diff - q * se, diff + q * se], "df": df}


def scale_lr(lr: float, tuned_steps: float, target_steps: float, beta: float) -> float:
    """lr (target_steps / tuned_steps)^-beta: (H1) carried from the tuned budget to the target one."""
    if not (lr > 0 and tuned_steps > 0 and target_steps > 0 and math.isfinite(beta)):
        raise ValueError("horizon rule: the LR and both budgets must be positive, beta finite")
    return float(lr * (target_steps / tuned_steps) ** (-beta))
