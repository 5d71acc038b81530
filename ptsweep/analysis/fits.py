"""Curve fits for the scaling comparison ([S] §3.2, Figure 2) and the coordinate check.

- Power law   L(P) = a * P^(-b)            : least squares on log L = log a - b log P (log-log straight line).
- With floor  L(P) = c + a * P^(-b)        : scipy ``curve_fit`` (>= 4 points), an irreducible loss c >= 0.
  [S] only shows log-log plots (Figure 2) and fits nothing; both forms are ours. The result always says which form
  was used (``form``) and why a requested form was not (``note``) - never a silent fallback.
- Log-log slope of a coordinate statistic vs width (microsoft/mup "coord check"): under muP the activations'
  mean |coordinate| is flat in width (slope ~ 0); a slope ~ +0.5 or +1 reveals a blow-up.

Pure numpy / scipy / pandas.
"""

from __future__ import annotations

import warnings
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = ["fit_power_law", "predict", "fit_loglog_slope", "coord_slopes"]


def _r2(y: np.ndarray, yhat: np.ndarray) -> float:
    ss_res = float(((y - yhat) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)


def _clean(params, losses) -> tuple[np.ndarray, np.ndarray, int]:
    x = np.asarray(params, dtype=float).ravel()
    y = np.asarray(losses, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"params and losses differ in length: {x.size} vs {y.size}")
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    return x[keep], y[keep], int((~keep).sum())


def fit_power_law(params: Sequence[float], losses: Sequence[float], with_const: bool = False) -> dict:
    """Fit L = a * P^(-b) (log-log least squares), or L = c + a * P^(-b) when ``with_const`` and >= 4 points.

    Non-finite or non-positive points (diverged runs) are dropped and counted in ``n_dropped``.
    Returns {"form": "power_law" | "power_law_const", "a", "b", "c" (0.0 for the pure form), "r2", "n_points",
    "n_dropped", "note"}. r2 is computed on log(loss) for both forms, so the two are comparable.
    If the form with a constant was requested but cannot be fitted (< 4 points, no convergence, or c at its bounds)
    the pure power law is returned and ``note`` says why.
    """
    x, y, n_drop = _clean(params, losses)
    if x.size < 2 or np.unique(x).size < 2:
        raise ValueError(f"need >= 2 distinct positive finite points to fit a power law, got {x.size}")
    lx, ly = np.log(x), np.log(y)
    slope, intercept = np.polyfit(lx, ly, 1)
    pure = {
        "form": "power_law",
        "a": float(np.exp(intercept)),
        "b": float(-slope),
        "c": 0.0,
        "r2": _r2(ly, intercept + slope * lx),
        "n_points": int(x.size),
        "n_dropped": n_drop,
        "note": "",
    }
    if not with_const:
        return pure
    if x.size < 4:
        pure["note"] = f"constant term requested but only {x.size} points (< 4): pure power law fitted"
        return pure

    from scipy.optimize import curve_fit  # local import keeps `import ptsweep.analysis` light

    # Fit in a well-conditioned unit: P / P0 with P0 the geometric mean, then a = a0 * P0^b.
    p0 = float(np.exp(lx.mean()))
    xs = x / p0
    c_hi = float(y.min())

    def f(xv, a0, b, c):
        return c + a0 * xv ** (-b)

    start = [max(y.mean() - 0.5 * c_hi, 1e-12), max(pure["b"], 1e-3), 0.5 * c_hi]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            popt, _ = curve_fit(
                f, xs, y, p0=start, bounds=([0.0, 0.0, 0.0], [np.inf, 10.0, c_hi]), maxfev=20000
            )
    except (RuntimeError, ValueError) as e:
        pure["note"] = f"constant-term fit failed ({e.__class__.__name__}: {e}); pure power law fitted"
        return pure
    a0, b, c = (float(v) for v in popt)
    if not (a0 > 0 and b > 0 and np.all(np.isfinite(popt))) or c >= c_hi * (1 - 1e-9):
        pure["note"] = f"constant-term fit degenerate (a0={a0:.3g}, b={b:.3g}, c={c:.3g}); pure power law fitted"
        return pure
    yhat = f(xs, a0, b, c)
    note = "c at its lower bound 0: the data show no irreducible loss" if c <= 1e-9 * c_hi else ""
    return {
        "form": "power_law_const",
        "a": float(a0 * p0**b),
        "b": b,
        "c": c,
        "r2": _r2(ly, np.log(yhat)),
        "n_points": int(x.size),
        "n_dropped": n_drop,
        "note": note,
    }


def predict(fit: Mapping[str, float], params) -> np.ndarray:
    """Loss predicted by a :func:`fit_power_law` result: c + a * P^(-b) (c = 0 for the pure form)."""
    p = np.asarray(params, dtype=float)
    return float(fit.get("c", 0.0)) + float(fit["a"]) * p ** (-float(fit["b"]))


def fit_loglog_slope(x: Sequence[float], y: Sequence[float]) -> dict:
    """Least-squares slope of log(y) vs log(x): {"slope", "intercept", "r2", "n_points"} (natural logs).

    Points with non-finite or non-positive x or y are dropped. Fewer than 2 distinct x -> slope NaN.
    """
    xv, yv, _ = _clean(x, y)
    if xv.size < 2 or np.unique(xv).size < 2:
        return {"slope": float("nan"), "intercept": float("nan"), "r2": float("nan"), "n_points": int(xv.size)}
    lx, ly = np.log(xv), np.log(yv)
    slope, intercept = np.polyfit(lx, ly, 1)
    return {
        "slope": float(slope),
        "intercept": float(intercept),
        "r2": _r2(ly, intercept + slope * lx),
        "n_points": int(xv.size),
    }


def coord_slopes(
    df: pd.DataFrame,
    group_cols: Sequence[str] = ("parametrization", "quantity", "step"),
    width_col: str = "width",
    value_col: str = "value",
) -> pd.DataFrame:
    """Slope of log(value) vs log(width) per (parametrization, quantity, step) of a coordinate-check table.

    ``df`` has columns quantity, width, step, value, parametrization (group columns that are absent are skipped).
    Several rows per (group, width) - seeds - are averaged first. Returns one row per group with columns
    group_cols..., slope, intercept, r2, n_points (the number of widths). muP expectation: slope ~ 0.
    """
    groups = [c for c in group_cols if c in df.columns]
    d = df[np.isfinite(df[value_col].astype(float))]
    rows = []
    if groups:
        it = d.groupby(groups, sort=True)
    else:
        it = [((), d)]
    for key, g in it:
        key = key if isinstance(key, tuple) else (key,)
        m = g.groupby(width_col)[value_col].mean()
        fit = fit_loglog_slope(m.index.to_numpy(dtype=float), m.to_numpy(dtype=float))
        rows.append({**dict(zip(groups, key)), **fit})
    return pd.DataFrame(rows, columns=[*groups, "slope", "intercept", "r2", "n_points"])
