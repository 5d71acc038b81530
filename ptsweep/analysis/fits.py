"""Curve fits for the scaling comparison ([S] §3.2, Figure 2) and the coordinate check.

- Power law   L(P) = a * P^(-b)            : least squares on log L = log a - b log P (log-log straight line).
- With floor  L(P) = c + a * P^(-b)        : scipy ``curve_fit`` (>= 4 points), an irreducible loss c >= 0.
  [S] fits nothing (Figure 2 is log-log plots only); both forms are ours. The result says which form was used
  (``form``) and why a requested one was not (``note``) - never a silent fallback.
- Log-log slope of a coordinate statistic vs width (microsoft/mup "coord check"): under muP it is ~ 0.
"""

from __future__ import annotations

import math
import warnings
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from .blocked_fit import t_ppf


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
    """Fit L = a * P^(-b) (log-log least squares), or L = c + a * P^(-b) when ``with_const`` and >= 4 points
    (else, or without convergence or with c at a bound, the pure law and ``note`` says why). Non-finite or
    non-positive points are dropped (``n_dropped``). Returns {"form": "power_law" | "power_law_const", "a", "b", "c"
    (0.0 for the pure form), "r2" (on log loss for both forms), "n_points", "n_dropped", "note"}."""
    x, y, n_drop = _clean(params, losses)
    if x.size < 2 or np.unique(x).size < 2:
        raise ValueError(f"need >= 2 distinct positive finite points to fit a power law, got {x.size}")
    line = fit_loglog_slope(x, y)
    pure = {"form": "power_law", "a": float(np.exp(line["intercept"])), "b": -line["slope"], "c": 0.0,
            "r2": line["r2"], "n_points": int(x.size), "n_dropped": n_drop, "note": ""}
    if not with_const:
        return pure
    if x.size < 4:
        pure["note"] = f"constant term requested but only {x.size} points (< 4): pure power law fitted"
        return pure

    from scipy.optimize import curve_fit  # local import keeps `import ptsweep.analysis` light

    # Fit in a well-conditioned unit: P / P0 with P0 the geometric mean, then a = a0 * P0^b.
    p0 = float(np.exp(np.log(x).mean()))
    xs = x / p0
    c_hi = float(y.min())

    def f(xv, a0, b, c):
        return c + a0 * xv ** (-b)

    start = [max(y.mean() - 0.5 * c_hi, 1e-12), max(pure["b"], 1e-3), 0.5 * c_hi]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            popt, _ = curve_fit(f, xs, y, p0=start, bounds=([0.0, 0.0, 0.0], [np.inf, 10.0, c_hi]), maxfev=20000)
    except (RuntimeError, ValueError) as e:
        pure["note"] = f"constant-term fit failed ({e.__class__.__name__}: {e}); pure power law fitted"
        return pure
    a0, b, c = (float(v) for v in popt)
    if not (a0 > 0 and b > 0 and np.all(np.isfinite(popt))) or c >= c_hi * (1 - 1e-9):
        pure["note"] = f"constant-term fit degenerate (a0={a0:.3g}, b={b:.3g}, c={c:.3g}); pure power law fitted"
        return pure
    yhat = f(xs, a0, b, c)
    note = "c at its lower bound 0: the data show no irreducible loss" if c <= 1e-9 * c_hi else ""
    return {"form": "power_law_const", "a": float(a0 * p0**b), "b": b, "c": c, "r2": _r2(np.log(y), np.log(yhat)),
            "n_points": int(x.size), "n_dropped": n_drop, "note": note}


def predict(fit: Mapping[str, float], params) -> np.ndarray:
    """Loss predicted by a :func:`fit_power_law` result: c + a * P^(-b) (c = 0 for the pure form)."""
    p = np.asarray(params, dtype=float)
    return float(fit.get("c", 0.0)) + float(fit["a"]) * p ** (-float(fit["b"]))


def fit_loglog_slope(x: Sequence[float], y: Sequence[float]) -> dict:
    """Least-squares slope of log(y) vs log(x), non-finite or non-positive points dropped: {"slope", "intercept",
    "r2", "n_points"} (natural logs; slope NaN with fewer than 2 distinct x)."""
    xv, yv, _ = _clean(x, y)
    if xv.size < 2 or np.unique(xv).size < 2:
        return {"slope": float("nan"), "intercept": float("nan"), "r2": float("nan"), "n_points": int(xv.size)}
    lx, ly = np.log(xv), np.log(yv)
    slope, intercept = np.polyfit(lx, ly, 1)
    return {"slope": float(slope), "intercept": float(intercept), "r2": _r2(ly, intercept + slope * lx),
            "n_points": int(xv.size)}


def coord_slopes(df: pd.DataFrame, group_cols: Sequence[str] = ("parametrization", "quantity", "step"),
                 width_col: str = "width", value_col: str = "value") -> pd.DataFrame:
    """Slope of log(value) vs log(width) per group of a coordinate-check table (absent group columns skipped; seeds
    averaged first): one row per group with group_cols..., slope, intercept, r2, n_points (widths). muP: slope ~ 0."""
    groups = [c for c in group_cols if c in df.columns]
    d = df[np.isfinite(df[value_col].astype(float))]
    rows = []
    for key, g in d.groupby(groups, sort=True) if groups else [((), d)]:  # key: a tuple (list of group columns)
        m = g.groupby(width_col)[value_col].mean()
        fit = fit_loglog_slope(m.index.to_numpy(dtype=float), m.to_numpy(dtype=float))
        rows.append({**dict(zip(groups, key)), **fit})
    return pd.DataFrame(rows, columns=[*groups, "slope", "intercept", "r2", "n_points"])


SATURATING_MIN_POINTS = 4
F_TEST_ALPHA = 0.05


def fit_scaling_law(x: Sequence[float], y: Sequence[float], n_boot: int = 1000, level: float = 0.95,
                    seed: int = 0, grid: Sequence[float] | None = None, keep_curves: bool = False) -> dict:
    """Fit L = a x^-b + c (saturating, where c is identified: :func:`_choose_form`) or L = a x^-b to the seed means
    of ``x`` / ``y`` (one entry per run, runs at the same x are seeds; non-finite runs dropped), with percentile
    intervals at ``level`` from a residual bootstrap over seeds (:func:`_bootstrap`; docs/verdicts.md, "Scaling
    fits") for a, b, c and the curve on ``grid`` (default: 60 points spanning x).

    Returns {"form", "a", "b", "c", "r2" (log scale), "n_points" (distinct x), "n_runs", "seeds_per_point",
    "note", "ci": {"a": [lo, hi], "b": [...], "c": [...]}, "band": {"x", "lo", "mid", "hi"}, "n_boot", "level"};
    with ``keep_curves`` also "curves": the (n_boot, len(grid)) bootstrap predictions on ``grid`` (a numpy array:
    pop it before writing JSON).
    """
    x, y, _ = _clean(x, y)
    ux = np.unique(x)
    groups = [y[x == v] for v in ux]  # the finite positive losses (seeds) at each distinct x
    if ux.size < 2:
        raise ValueError(f"need >= 2 distinct x with a finite loss to fit a scaling law, got {ux.size}")
    fit, use_sat, notes = _choose_form(ux, np.array([g.mean() for g in groups]))
    grid = np.geomspace(ux.min(), ux.max(), 60) if grid is None else np.asarray(grid, dtype=float)
    m = np.array([g.size for g in groups])
    if (m < 2).any():
        notes.append(f"{int((m < 2).sum())} x with one seed: no resampling noise there")
    boot = _bootstrap(ux, groups, use_sat, grid, n_boot, level, seed)
    q = [50 * (1 - level), 50 * (1 + level)]  # percentiles of the interval at ``level``
    lo, hi = np.percentile(boot["curve"], q, axis=0).tolist() if n_boot > 0 else ([], [])
    fit.update({
        "n_points": int(ux.size), "n_runs": int(m.sum()), "seeds_per_point": m.tolist(), "note": "; ".join(notes),
        "ci": {k: np.percentile(boot[k], q).tolist() if n_boot > 0 else [math.nan, math.nan] for k in "abc"},
        "band": {"x": grid.tolist(), "mid": predict(fit, grid).tolist(), "lo": lo, "hi": hi},
        "n_boot": int(n_boot), "level": float(level)})
    if keep_curves:
        fit["curves"] = np.asarray(boot["curve"], dtype=float)
    return fit


def _choose_form(ux: np.ndarray, means: np.ndarray) -> tuple[dict, bool, list[str]]:
    """The law fitted to the seed means: saturating when c is identified - (1) at least 4 distinct x, (2) the
    bounded fit converges with c inside its bounds, (3) F = (RSS_pure - RSS_sat) / (RSS_sat / (K - 3)) (RSS on log
    L, K distinct x) exceeds F(1, K - 3)'s 1 - F_TEST_ALPHA quantile - else pure, the notes saying which condition
    failed. Returns (fit without its "note", saturating?, notes)."""
    notes = []
    sat = fit_power_law(ux, means, with_const=True) if ux.size >= SATURATING_MIN_POINTS else None
    pure = fit_power_law(ux, means)
    use_sat = False
    if sat is None:
        notes.append(f"pure power law: {ux.size} distinct x < {SATURATING_MIN_POINTS}, c cannot be identified")
    elif sat["form"] != "power_law_const" or sat["c"] <= 0.0:
        notes.append(f"pure power law: saturating fit not identified ({sat['note'] or 'c at its bound'})")
    else:
        from scipy.special import fdtri

        ly = np.log(means)
        rss_pure = float(((ly - np.log(predict(pure, ux))) ** 2).sum())
        rss_sat = float(((ly - np.log(predict(sat, ux))) ** 2).sum())
        dfr = ux.size - 3
        f_crit = float(fdtri(1, dfr, 1 - F_TEST_ALPHA))
        f_stat = (rss_pure - rss_sat) / (rss_sat / dfr) if rss_sat > 0 else math.inf
        use_sat = f_stat > f_crit
        if not use_sat:
            notes.append(f"pure power law: c not identified (F = {f_stat:.3g} <= F(1, {dfr}) quantile "
                         f"{f_crit:.3g})")
    return {k: v for k, v in (sat if use_sat else pure).items() if k != "note"}, use_sat, notes


def _bootstrap(ux: np.ndarray, groups: list[np.ndarray], use_sat: bool, grid: np.ndarray, n_boot: int,
               level: float, seed: int) -> dict[str, np.ndarray]:
    """Residual bootstrap over seeds, the form kept fixed: the residuals (y_{x,s} - mean_x) sqrt(m_x / (m_x - 1)) of
    every x are pooled; a sample sets y*_x = mean_x + (t_df / z) x the mean of m_x residuals drawn with replacement
    (df = sum (m_x - 1): s is estimated from few seeds). Refits as {"a", "b", "c"} (n_boot,) and "curve" (n_boot,
    len(grid)) (empty with n_boot = 0)."""
    if n_boot <= 0:
        return {"a": np.empty(0), "b": np.empty(0), "c": np.empty(0), "curve": np.empty((0, grid.size))}
    rng = np.random.default_rng(seed)
    pooled_df = int(sum(max(g.size - 1, 0) for g in groups))
    q = 0.5 + level / 2
    t_over_z = t_ppf(q, pooled_df) / t_ppf(q, math.inf) if pooled_df else 1.0
    pool = np.concatenate([(g - g.mean()) * math.sqrt(g.size / (g.size - 1)) for g in groups if g.size >= 2]
                          or [np.zeros(1)])
    ystar = np.empty((n_boot, ux.size))
    for i, g in enumerate(groups):
        draws = pool[rng.integers(0, pool.size, (n_boot, g.size))]  # (B, m)
        ystar[:, i] = g.mean() + t_over_z * draws.mean(axis=1)
    ystar = np.maximum(ystar, 1e-12)
    if use_sat:
        fits = [fit_power_law(ux, row, with_const=True) for row in ystar]
        return {**{k: np.array([f[k] for f in fits]) for k in "abc"},
                "curve": np.array([predict(f, grid) for f in fits])}
    lx, ly = np.log(ux), np.log(ystar)  # least squares log y = log a - b log x for every bootstrap row
    xc = lx - lx.mean()
    slope = (ly - ly.mean(axis=1, keepdims=True)) @ xc / float(xc @ xc)
    a, b = np.exp(ly.mean(axis=1) - slope * lx.mean()), -slope
    return {"a": a, "b": b, "c": np.zeros_like(a), "curve": a[:, None] * grid[None, :] ** (-b[:, None])}


def pooled_seed_variance(groups: Sequence[Sequence[float]]) -> tuple[float, int]:
    """(s_p^2, df): the seed variance pooled over cells (each a list of seed losses), df = sum (m_i - 1)."""
    ss, df = 0.0, 0
    for g in groups:
        g = np.asarray([v for v in g if math.isfinite(v)], dtype=float)
        if g.size >= 2:
            ss += float(((g - g.mean()) ** 2).sum())
            df += g.size - 1
    return (ss / df if df else math.nan), df
