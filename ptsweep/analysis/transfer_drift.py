"""Optimum of a hyperparameter per width, with its seed noise, and its drift across widths (method and measured
coverage: experiments/lr-transfer/README.md, "Drift intervals from a fitted curve").

Input: one row per run (``x_col``, e.g. ``optim.lr``, width, parametrization, seed, final validation loss); a
non-finite loss (diverged run) counts as +inf: a value where one seed of three diverged is not an optimum.

Per (parametrization, width): the optimum ``x_opt``, the argmin of the seed-mean loss over the *candidates* (the x
values with the most seeds), its *plausible set* (candidates within ``k_se`` seed-paired SEs of the best) and a paired
bootstrap over seeds. Drift: ``drift_log2`` = log2(x_opt(largest width) / x_opt(smallest)) in factors of 2.

Fitted optimum (``fit``): a quadratic in t = log2 x with seed blocks (``blocked_fit.fit_blocked``), fitted to every
run at the ``FIT_WINDOW`` = 2 finite grid values either side of the grid optimum:

    L_{x,s} = a + b t + c t^2 + u_s + e,   e ~ N(0, sigma^2),   optimum t* = -b / (2c)                        (D1)

with Fieller's interval at ``LEVEL`` = 90 %, {t : (b + 2ct)^2 <= q^2 Var(b + 2ct)}, q = t_{df}(0.95) (None when the
curvature is not significant); ``drift_fit_ci``: a Welch-t interval of t*(largest) - t*(smallest) from delta-method
vertex variances, Var t* = grad' Cov(a, b, c) grad, grad = (0, -1/(2c), b/(2c^2)).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ptsweep.analysis.blocked_fit import fit_blocked, t_ppf, welch_interval
from ptsweep.metric_keys import seed_mean

K_SE = 2.0
N_BOOT = 2000
QUANTILES = (0.05, 0.5, 0.95)
FIT_WINDOW = 2
LEVEL = 0.9


def as_floats(s: pd.Series) -> np.ndarray:
    """A column as floats, non-numbers as NaN."""
    return pd.to_numeric(s, errors="coerce").astype(float).to_numpy()


def _finite_loss(s: pd.Series) -> np.ndarray:
    a = as_floats(s)
    return np.where(np.isfinite(a), a, np.inf)


def curve(g: pd.DataFrame, x_col: str, loss_col: str = "val_loss") -> pd.DataFrame:
    """Seed statistics per x value: columns x, n, mean, se (seed SE; NaN for n = 1), sorted by x."""
    d = g.assign(_loss=_finite_loss(g[loss_col]))
    rows = []
    for x, gx in d.groupby(x_col, sort=True):
        v = gx["_loss"].to_numpy()
        mean = float(v.mean()) if np.all(np.isfinite(v)) else math.inf
        se = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 and np.isfinite(mean) else math.nan
        rows.append({"x": float(x), "n": len(v), "mean": mean, "se": se})
    return pd.DataFrame(rows, columns=["x", "n", "mean", "se"])


def _vertex_log2(c: pd.DataFrame, i: int) -> float | None:
    """Vertex (log2 x) of the parabola through points i-1, i, i+1 of the curve, or None. Point i is the optimum of
    the candidates (the most seeds), not the curve's lowest mean as in ``horizon.vertex_lr``."""
    if i <= 0 or i >= len(c) - 1:
        return None
    xs = np.log2(c["x"].to_numpy()[i - 1:i + 2])
    ys = c["mean"].to_numpy()[i - 1:i + 2]
    if not np.all(np.isfinite(ys)):
        return None
    a, b, _ = np.polyfit(xs, ys, 2)
    if a <= 0:
        return None
    v = -b / (2 * a)
    return float(v) if xs[0] <= v <= xs[2] else None


def optimum(g: pd.DataFrame, x_col: str, loss_col: str = "val_loss", seed_col: str = "seed", k_se: float = K_SE,
            n_boot: int = N_BOOT, rng: np.random.Generator | None = None) -> dict:
    """Optimum of one (parametrization, width) group with its uncertainty (module docstring)."""
    rng = rng if rng is not None else np.random.default_rng(0)
    c = curve(g, x_col, loss_col)
    out: dict = {"curve": c.to_dict("list")}
    finite = c[np.isfinite(c["mean"])]
    if finite.empty:
        return {**out, "x_opt": None}
    n_max = int(c["n"].max())
    cand = c[(c["n"] == n_max) & np.isfinite(c["mean"])]
    if cand.empty:  # every multi-seed value has a diverged seed: fall back to every finite value
        cand = finite
    best = cand.iloc[int(cand["mean"].to_numpy().argmin())]
    x_opt = float(best["x"])
    i_curve = int(np.flatnonzero(np.isclose(c["x"].to_numpy(), x_opt))[0])
    out.update(x_opt=x_opt, loss_opt=float(best["mean"]), loss_opt_se=float(best["se"]), n_seeds=n_max,
               candidates=[float(x) for x in cand["x"]],
               at_edge=bool(i_curve == 0 or i_curve == len(c) - 1),
               vertex_log2=_vertex_log2(c, i_curve))

    # seeds x candidates matrix (paired: rows = seeds present at every candidate)
    d = g.assign(_loss=_finite_loss(g[loss_col]))
    d = d[d[x_col].astype(float).isin(cand["x"].to_numpy())]
    piv = d.pivot_table(index=seed_col, columns=x_col, values="_loss", aggfunc="mean").dropna(axis=0)
    xs, m = piv.columns.to_numpy(dtype=float), piv.to_numpy()
    plausible = [x_opt]
    if m.shape[0] >= 2:
        with np.errstate(invalid="ignore"):  # a diverged seed: its column is not plausible
            diff = m - m[:, np.isclose(xs, x_opt)][:, :1]  # (seeds, candidates): paired by seed
            se = diff.std(axis=0, ddof=1) / math.sqrt(len(diff))
            plausible = xs[np.isfinite(diff).all(axis=0) & (diff.mean(axis=0) <= k_se * se)].tolist()
        idx = rng.integers(0, m.shape[0], size=(n_boot, m.shape[0]))
        boot_means = m[idx].mean(axis=1)  # (n_boot, n_candidates)
        wins = xs[np.argmin(boot_means, axis=1)]
        out.update(boot_log2=np.log2(wins).tolist(),
                   boot_freq={float(x): float(np.mean(np.isclose(wins, x))) for x in xs})
    else:
        out.update(boot_log2=[math.log2(x_opt)], boot_freq={x_opt: 1.0})
    plausible = sorted(plausible)
    return {**out, "plausible": plausible, "plausible_log2_range": [math.log2(plausible[0]), math.log2(plausible[-1])]}


def fit_optimum(g: pd.DataFrame, x_col: str, x_opt: float, loss_col: str = "val_loss", seed_col: str = "seed",
                window: int | None = FIT_WINDOW, level: float = LEVEL) -> dict:
    """(D1) for one (parametrization, width): {"t_opt" (log2 of the fitted optimum), "x_opt", "ci_log2" [lo, hi] or
    None (Fieller, unbounded), "window" (x values fitted), "df", "sigma", "beta" [a, b, c], "cov" (3 x 3), "note"}.
    ``window`` = finite grid values either side of ``x_opt`` (None = all). Raises ValueError (one line) with
    fewer than 3 distinct values or no residual df."""
    d = g.assign(_loss=_finite_loss(g[loss_col]), _x=g[x_col].astype(float))
    d = d[d.groupby("_x")["_loss"].transform(lambda v: bool(np.all(np.isfinite(v)))).astype(bool)]
    xs = np.array(sorted(d["_x"].unique()))
    if window is not None and len(xs):
        i = int(np.argmin(np.abs(np.log2(xs) - math.log2(x_opt))))
        xs = xs[max(0, i - window):i + window + 1]
        d = d[d["_x"].isin(xs)]
    if len(xs) < 3:
        raise ValueError(f"fit_optimum: {len(xs)} finite grid values near the optimum, a quadratic needs 3")
    t = np.log2(d["_x"].to_numpy())
    fit = fit_blocked(np.column_stack([np.ones_like(t), t, t**2]), d["_loss"].to_numpy(), d[seed_col].to_numpy())
    if fit.df < 1 or not fit.full_rank:
        raise ValueError(f"fit_optimum: {len(t)} runs at {len(xs)} values leave no residual df for the quadratic")
    beta, cov, dfree = fit.effects, fit.cov(), fit.df
    b, c = float(beta[1]), float(beta[2])
    q = t_ppf(0.5 + level / 2, dfree)
    # Fieller: A t^2 + B t + C <= 0 with D(t) = b + 2ct, Var D(t) = v_bb + 4 t v_bc + 4 t^2 v_cc
    A = 4 * c**2 - 4 * q**2 * cov[2, 2]
    B = 4 * b * c - 4 * q**2 * cov[1, 2]
    C = b**2 - q**2 * cov[1, 1]
    disc = max(B**2 - 4 * A * C, 0.0)  # >= 0 when A > 0 (t* itself is in the set); clamp round-off
    ci = sorted([(-B - math.sqrt(disc)) / (2 * A), (-B + math.sqrt(disc)) / (2 * A)]) if A > 0 else None
    t_opt = -b / (2 * c) if c > 0 else None
    tmin, tmax = float(np.log2(xs[0])), float(np.log2(xs[-1]))
    note = ("curvature not significant: no bounded interval" if ci is None else
            "fitted optimum outside the fitted values: an extrapolation" if t_opt is None or not tmin <= t_opt <= tmax
            else "")
    return {"t_opt": t_opt, "x_opt": 2**t_opt if t_opt is not None else None, "ci_log2": ci,
            "window": [float(x) for x in xs], "df": int(dfree), "sigma": fit.sigma,
            "beta": [float(beta[0]), b, c], "cov": cov.tolist(), "level": level, "note": note}


def _vertex_var(fit: dict) -> float:
    """Delta-method variance of t* = -b / (2c): gradient (0, -1 / (2c), b / (2c^2)) through Cov(a, b, c)."""
    b, c = fit["beta"][1], fit["beta"][2]
    grad = np.array([0.0, -1.0 / (2 * c), b / (2 * c**2)])
    return float(grad @ np.asarray(fit["cov"]) @ grad)


def drift_interval(fit_lo: dict, fit_hi: dict, level: float = LEVEL) -> list[float] | None:
    """Welch-t interval of t*(hi) - t*(lo) (module docstring); None when either width's Fieller interval is
    unbounded (its curvature is not significant, so its optimum and the delta method are not defined)."""
    if fit_lo.get("ci_log2") is None or fit_hi.get("ci_log2") is None:
        return None
    v1, v2 = _vertex_var(fit_lo), _vertex_var(fit_hi)
    _, _, lo, hi = welch_interval(fit_hi["t_opt"] - fit_lo["t_opt"], v1, fit_lo["df"], v2, fit_hi["df"], level)
    return [lo, hi]


def drift(df: pd.DataFrame, x_col: str, width_col: str = "model.width", param_col: str = "model.parametrization",
          loss_col: str = "val_loss", seed_col: str = "seed", k_se: float = K_SE, n_boot: int = N_BOOT,
          seed: int = 0) -> dict[str, dict]:
    """Per parametrization: ``{"per_width": {width: optimum(...) + "fit": fit_optimum(...)}, "smallest_width",
    "largest_width", "drift_log2", "drift_boot_q": [q05, q50, q95], "drift_plausible_range": [lo, hi],
    "drift_is_bound" (an end width's optimum on its grid's edge: the drift is a bound), "drift_fit_log2",
    "drift_fit_ci": [lo, hi]}`` (module docstring; the fit keys are None where a quadratic has no minimum)."""
    rng = np.random.default_rng(seed)
    out: dict[str, dict] = {}
    for par, gp in df.groupby(param_col, sort=True):
        per_width = {}
        for w, gw in gp.groupby(width_col, sort=True):
            o = optimum(gw, x_col, loss_col, seed_col, k_se, n_boot, rng)
            if o.get("x_opt") is not None:
                try:
                    o["fit"] = fit_optimum(gw, x_col, o["x_opt"], loss_col, seed_col)
                except ValueError as e:
                    o["fit"] = {"t_opt": None, "ci_log2": None, "note": str(e)}
            per_width[w.item() if isinstance(w, np.generic) else w] = o
        widths = [w for w in sorted(per_width) if per_width[w].get("x_opt") is not None]
        if not widths:
            continue
        res: dict = {"per_width": per_width, "smallest_width": widths[0], "largest_width": widths[-1]}
        lo, hi = per_width[widths[0]], per_width[widths[-1]]
        res["drift_log2"] = float(math.log2(hi["x_opt"] / lo["x_opt"]))
        b_lo, b_hi = np.asarray(lo["boot_log2"]), np.asarray(hi["boot_log2"])
        nb = max(len(b_lo), len(b_hi))
        db = rng.choice(b_hi, nb) - rng.choice(b_lo, nb)
        res["drift_boot_q"] = [float(np.quantile(db, q)) for q in QUANTILES]
        res["drift_plausible_range"] = [hi["plausible_log2_range"][0] - lo["plausible_log2_range"][1],
                                        hi["plausible_log2_range"][1] - lo["plausible_log2_range"][0]]
        res["drift_is_bound"] = bool(lo["at_edge"] or hi["at_edge"])
        f_lo, f_hi = lo.get("fit", {}), hi.get("fit", {})
        both = f_lo.get("t_opt") is not None and f_hi.get("t_opt") is not None
        res["drift_fit_log2"] = f_hi["t_opt"] - f_lo["t_opt"] if both else None
        res["drift_fit_ci"] = drift_interval(f_lo, f_hi) if both else None
        out[str(par)] = res
    return out


def baselines(df: pd.DataFrame) -> dict:
    """The unigram and no-context baselines of a study's runs, each the mean of its finite values: "unigram_loss",
    "unigram_loss_spread" (max - min: 0 when every run scored the same tokens), "unigram_loss_se" (the mean finite
    token SE, NaN when none) and "no_context_loss"; a baseline without a finite value is left out."""
    out = {}
    empty = pd.Series(dtype=float)
    uni = df["unigram_loss"].astype(float) if "unigram_loss" in df else empty
    if np.isfinite(uni).any():
        u = uni[np.isfinite(uni)]
        use = df["unigram_loss_se"].astype(float) if "unigram_loss_se" in df else empty
        out.update(unigram_loss=float(u.mean()), unigram_loss_spread=float(u.max() - u.min()),
                   unigram_loss_se=float(use[np.isfinite(use)].mean()) if np.isfinite(use).any() else math.nan)
    nc = df["no_context_loss"].astype(float) if "no_context_loss" in df else empty
    if np.isfinite(nc).any():
        out["no_context_loss"] = float(nc[np.isfinite(nc)].mean())
    return out


def gains(df: pd.DataFrame, x_col: str, x_value: float) -> dict:
    """Loss, the gains over the unigram and no-context baselines and the [MASK]-target ``context_gain`` of the runs of
    one group at ``x_value`` (seeds averaged; ``ptsweep.metrics``). Each ``<col>_se`` = sqrt(se_val^2 + sd^2 / n):
    the seed spread and the validation-set SE every seed shares (``metric_keys.seed_mean``)."""
    d = df[np.isclose(df[x_col].astype(float), float(x_value))]
    out = {"n": int(len(d))}
    for col in ("val_loss", "unigram_loss", "gain_over_unigram", "context_gain", "no_context_loss",
                "gain_over_no_context"):
        if col not in d:
            continue
        v = as_floats(d[col])
        ses = as_floats(d[f"{col}_se"]) if f"{col}_se" in d else np.full(len(v), math.nan)
        _, se = seed_mean(v, ses)              # sqrt(se_val^2 + sd^2 / n), one formula for every report
        out[col] = float(np.mean(v)) if len(v) else math.nan   # a diverged seed makes the mean inf (not dropped)
        out[f"{col}_seed_sd"] = float(np.std(v, ddof=1)) if len(v) > 1 else math.nan
        out[f"{col}_val_se"] = float(np.sqrt(np.nanmean(ses ** 2))) if np.isfinite(ses).any() else math.nan
        out[f"{col}_se"] = se if np.isfinite(v).all() else math.nan
    return out
