"""Regret of the transferred point S: a response surface fitted to the +-20 % verification study (rules and measured
error rates: docs/verdicts.md).

Coordinates: u_i = ln(S'_i / S_i) for the d = 7 hyperparameters, so S is u = 0 and the sampling box
[(1 - rel) S_i, (1 + rel) S_i] of [S] §3.1 / spec §10 is B = prod_i [ln(1 - rel), ln(1 + rel)].

Model (one row per run, seeds as blocks: :func:`ptsweep.analysis.blocked_fit.fit_blocked`):

    L_{j,s} = f(u_j) + b_s + e_{j,s},   e ~ N(0, sigma^2),   f(u) = c + g'u + 1/2 u'Hu              (R1)

H is 0 ("linear", 1 + d coefficients), diagonal ("diagonal", 1 + 2d) or symmetric ("full", 1 + d + d(d+1)/2 = 36):
the richest whose coefficients number at most (distinct points - 1) with a full-rank design.

    regret      R = f(0) - min_{u in B} f(u)  >= 0                                                    (R2)
    relative    r = R / Lbar(S)   (Lbar(S) = mean of the base runs)
    axis effect Delta_i^+- = f(ln(1 +- rel) e_i) - f(0) = g_i ln(1 +- rel) + 1/2 H_ii ln(1 +- rel)^2          (R3)
    better frac F = P_{S' ~ U[(1-rel)S, (1+rel)S]}( f(u(S')) < f(0) )   (the sampling measure of [S] §3.1)   (R4)

(R3) gets a Student-t interval, (R2) and (R4) basic parametric-bootstrap intervals (:func:`basic_interval`) at level
1 - 2 test_alpha; the box minimum is exact (:func:`box_minimum`: coordinate descent for linear and diagonal surfaces,
every face's stationary point for a full one up to EXACT_MAX_DIM hyperparameters).

Verdict (tolerance tau, relative): pass if r_hi < tau, fail if r_lo > tau, inconclusive otherwise. A plane over-states
a convex loss's regret (f(u) >= f(0) + g'u): its r_lo is set to 0 (it never fails) and it gives no better fraction.
"""

from __future__ import annotations

import itertools
import math
from typing import Mapping, Sequence

import numpy as np

from .blocked_fit import fit_blocked, t_ppf

MODELS = ("linear", "diagonal", "full")
REGRET_TOLERANCE = 0.004
"""Default relative regret tolerance: [S] §3.1 called points beating S by at most 0.4 % noise (spec §10)."""
PLANE_CAVEAT = ("extrapolated to the box's best corner (no run there; without curvature it over-states a convex "
                "loss's regret)")
"""How a linear surface's regret is described wherever it is printed: its box minimum is a corner no run measured."""
N_DRAWS = 2000
N_MC = 4000
EXACT_MAX_DIM = 8
"""Up to this many hyperparameters a full surface's box minimum enumerates the 3^d faces of the box (d = 7: 2,187)."""
CD_SWEEPS = 60


def n_coefficients(model: str, d: int) -> int:
    """Surface coefficients of (R1): 1 + d (linear), 1 + 2d (diagonal), 1 + d + d(d+1)/2 (full)."""
    return {"linear": 1 + d, "diagonal": 1 + 2 * d, "full": 1 + d + d * (d + 1) // 2}[model]


def features(u: np.ndarray, model: str) -> np.ndarray:
    """Design columns of f for log-coordinates u (N, d): [1, u, u_i^2 / 2 (diagonal, full), u_i u_j (i < j, full)]."""
    u = np.atleast_2d(np.asarray(u, dtype=float))
    cols = [np.ones((u.shape[0], 1)), u]
    if model in ("diagonal", "full"):
        cols.append(0.5 * u**2)
    if model == "full":
        i, j = np.triu_indices(u.shape[1], k=1)
        cols.append(u[:, i] * u[:, j])
    return np.concatenate(cols, axis=1)  # (N, p)


def unpack(beta: np.ndarray, model: str, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(c, g, H) from coefficient vectors beta (..., p): c (...), g (..., d), H (..., d, d)."""
    beta = np.asarray(beta, dtype=float)
    c, g = beta[..., 0], beta[..., 1:1 + d]
    H = np.zeros(beta.shape[:-1] + (d, d))
    if model in ("diagonal", "full"):
        idx = np.arange(d)
        H[..., idx, idx] = beta[..., 1 + d:1 + 2 * d]
    if model == "full":
        i, j = np.triu_indices(d, k=1)
        H[..., i, j] = beta[..., 1 + 2 * d:]
        H[..., j, i] = beta[..., 1 + 2 * d:]
    return c, g, H


def box_minimum(g: np.ndarray, H: np.ndarray, lo: float, hi: float, sweeps: int = CD_SWEEPS,
                exact: bool = True) -> np.ndarray:
    """argmin over the box [lo, hi]^d of g'u + 1/2 u'Hu for a batch (g (B, d), H (B, d, d)) -> u (B, d): the better
    end of exact coordinate descent from u = 0 and from the linear vertex (lo where g_i > 0, else hi), which is the
    minimum for a linear or diagonal H; with off-diagonal H (and ``exact``, d <= EXACT_MAX_DIM) the lower of that and
    :func:`face_minimum`, since descent can stop short of it. f never increases, so f(u) <= f(0) = 0 (regret >= 0)."""
    g, H = np.atleast_2d(g), np.asarray(H).reshape(-1, g.shape[-1], g.shape[-1])
    B, d = g.shape
    diag = H[:, np.arange(d), np.arange(d)]  # (B, d)
    ends = []  # (u, f) from each start
    for u in (np.zeros((B, d)), np.where(g > 0, lo, hi)):
        for _ in range(sweeps if np.any(H) else 1):
            for i in range(d):
                b = g[:, i] + np.einsum("bj,bj->b", H[:, i, :], u) - diag[:, i] * u[:, i]  # linear coefficient in u_i
                h = diag[:, i]
                f_lo, f_hi = b * lo + 0.5 * h * lo**2, b * hi + 0.5 * h * hi**2
                edge = np.where(f_lo <= f_hi, lo, hi)
                with np.errstate(divide="ignore", invalid="ignore"):
                    inner = np.clip(-b / h, lo, hi)
                u[:, i] = np.where(h > 0, inner, edge)
        ends.append((u, _quadratic(g, H, u)))
    (u0, f0), (u1, f1) = ends
    u_cd, f_cd = np.where((f1 < f0)[:, None], u1, u0), np.minimum(f0, f1)
    if not (exact and d <= EXACT_MAX_DIM and np.any(H - diag[:, :, None] * np.eye(d))):
        return u_cd
    u_ex = face_minimum(g, H, lo, hi)
    return np.where((_quadratic(g, H, u_ex) < f_cd)[:, None], u_ex, u_cd)


def _quadratic(g: np.ndarray, H: np.ndarray, u: np.ndarray) -> np.ndarray:
    """g'u + 1/2 u'Hu per row of a batch (g, u (B, d); H (B, d, d))."""
    return np.einsum("bi,bi->b", g, u) + 0.5 * np.einsum("bi,bij,bj->b", u, H, u)


def face_minimum(g: np.ndarray, H: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """argmin over the box of g'u + 1/2 u'Hu for a batch, H of any sign: on each of the 3^d faces (every coordinate
    at lo, at hi or free) the stationary point of the free coordinates, H_FF u_F = -(g_F + H_FB u_B), kept where it
    lies in the box; the lowest f over them (and u = 0). A minimum over a box is stationary on the face it lies in,
    so this is exact wherever that face's H_FF is nonsingular."""
    B, d = g.shape
    best_u, best_f = np.zeros((B, d)), np.zeros(B)
    for face in itertools.product((0, 1, 2), repeat=d):  # 0: at lo, 1: at hi, 2: free
        face = np.asarray(face)
        free, fixed = np.flatnonzero(face == 2), np.flatnonzero(face != 2)
        u = np.zeros((B, d))
        u[:, fixed] = np.where(face[fixed] == 0, lo, hi)
        ok = np.ones(B, dtype=bool)
        if free.size:
            A = H[:, free][:, :, free]
            rhs = -(g[:, free] + np.einsum("bij,bj->bi", H[:, free][:, :, fixed], u[:, fixed]))
            ok = np.abs(np.linalg.det(A)) > 1e-12
            sol = np.linalg.solve(np.where(ok[:, None, None], A, np.eye(free.size)), rhs[..., None])[..., 0]
            ok &= np.all((sol >= lo - 1e-12) & (sol <= hi + 1e-12), axis=1)
            u[:, free] = np.clip(sol, lo, hi)
        f = _quadratic(g, H, u)
        better = ok & (f < best_f)
        best_u[better], best_f[better] = u[better], f[better]
    return best_u


def choose_model(u_points: np.ndarray) -> tuple[str, str]:
    """(model, reason) by the rule of the module docstring; ValueError (one line) if none is identifiable."""
    d = u_points.shape[1]
    n_loc = len(np.unique(np.round(u_points, 12), axis=0))
    skipped = []
    for m in reversed(MODELS):
        p = n_coefficients(m, d)
        if n_loc >= p + 1 and np.linalg.matrix_rank(features(u_points, m)) == p:
            why = f"; {', '.join(skipped)}" if skipped else ""
            return m, f"{m}: richest surface with <= {n_loc} - 1 coefficients ({p}) and a full-rank design{why}"
        skipped.append(f"{m} needs {p} coefficients + 1 (have {n_loc} distinct points)")
    raise ValueError(f"regret: {n_loc} distinct points (base included) cannot identify even the linear surface "
                     f"({n_coefficients('linear', d)} coefficients + 1): run more perturbed points")


def fit_surface(u_runs: np.ndarray, y: np.ndarray, seeds: Sequence) -> dict:
    """Least-squares fit of (R1) to runs at log-coordinates ``u_runs`` (N, d) with finite losses y (N,) and seeds
    (blocks). Returns {"model", "model_reason", "beta" (p,), "cov" (p, p) (surface block of sigma^2 (X'X)^-1, seed
    effects profiled out), "sigma", "df", "n_runs", "n_points", "lack_of_fit", "adjusted" (N,) (each run's loss minus
    its fitted seed effect)}."""
    model, reason = choose_model(u_runs)
    fit = fit_blocked(features(u_runs, model), y, seeds)
    if not fit.full_rank:
        raise ValueError(f"regret: the {model} surface with seed blocks is not identifiable (rank {fit.rank} < "
                         f"{fit.design.shape[1]} columns)")
    if fit.df < 1:
        raise ValueError(f"regret: no residual degrees of freedom ({len(y)} runs, {fit.rank} coefficients): run "
                         f"each perturbed point at >= 2 seeds or more points")
    return {"model": model, "model_reason": reason, "beta": fit.effects.copy(), "cov": fit.cov(), "sigma": fit.sigma,
            "adjusted": y - fit.seed_effect,  # runs with their seed effect removed
            "df": fit.df, "n_runs": int(len(y)), "n_points": int(len(np.unique(u_runs, axis=0))),
            "lack_of_fit": _lack_of_fit(u_runs, y, seeds, fit.rss, fit.df)}


def _lack_of_fit(u_runs, y, seeds, rss, df) -> dict:
    """F test of the surface against one mean per distinct point (with the same seed blocks): pure error from
    replicates. p < 0.05 says the surface misses structure the points show."""
    from scipy.special import fdtrc

    _, point = np.unique(np.round(u_runs, 12), axis=0, return_inverse=True)
    point = point.ravel()
    saturated = fit_blocked(point[:, None] == np.arange(point.max() + 1), y, seeds)  # one mean per point
    df_pe, rss_pe = saturated.df, saturated.rss
    df_lof = df - df_pe
    if df_pe < 1 or df_lof < 1:
        return {"F": None, "p": None, "df": [df_lof, df_pe]}
    F = ((rss - rss_pe) / df_lof) / (rss_pe / df_pe) if rss_pe > 0 else math.inf
    return {"F": float(F), "p": float(fdtrc(df_lof, df_pe, F)), "df": [int(df_lof), int(df_pe)]}


def draws(fit: dict, n_draws: int, rng: np.random.Generator) -> np.ndarray:
    """Parametric-bootstrap coefficient draws (n_draws, p): beta_hat + sqrt(df / chi2_df) L z (multivariate t)."""
    w, V = np.linalg.eigh(fit["cov"])
    L = V * np.sqrt(np.clip(w, 0.0, None))  # (p, p), L L' = cov (robust to round-off)
    z = rng.standard_normal((n_draws, len(fit["beta"])))
    scale = np.sqrt(fit["df"] / rng.chisquare(fit["df"], n_draws))
    return fit["beta"] + (z @ L.T) * scale[:, None]


def basic_interval(x: np.ndarray, alpha: float, lo: float, hi: float) -> tuple[float, list[float]]:
    """Basic bootstrap from x = [plug-in, draws...]: bias-corrected estimate 2 x0 - mean(draws) and interval
    [2 x0 - q_{1-alpha}, 2 x0 - q_alpha], clipped to the parameter's range [lo, hi]. Not percentile bounds: the box
    minimum of a noisy surface is biased low (the regret high), and the draws repeat that bias."""
    x0, qa, qb = float(x[0]), float(np.quantile(x[1:], alpha)), float(np.quantile(x[1:], 1 - alpha))
    clip = lambda v: float(min(max(v, lo), hi))  # noqa: E731
    return clip(2 * x0 - float(np.mean(x[1:]))), [clip(2 * x0 - qb), clip(2 * x0 - qa)]


def regret_analysis(base: Mapping[str, float], points: Sequence[Mapping[str, float]],
                    point_losses: Sequence[Sequence[float]], base_losses: Sequence[float], *,
                    point_seeds: Sequence[Sequence], base_seeds: Sequence, rel: float = 0.2,
                    tolerance: float = REGRET_TOLERANCE, test_alpha: float = 0.05, n_draws: int = N_DRAWS,
                    seed: int = 0) -> dict:
    """Regret of the base point from the verification runs (module docstring) as a JSON-ready dict. ``points``: the
    perturbed points (keys of ``base``), ``point_losses[j]`` the runs of point j at seeds ``point_seeds[j]`` (seed
    blocks), ``base_losses`` at ``base_seeds``; points with a non-finite run are left out (``n_failed_points``).
    ValueError (one line) when no surface can be fitted."""
    if not (0.0 < rel < 1.0):
        raise ValueError(f"regret: rel must be in (0, 1), got {rel}")
    if tolerance <= 0:
        raise ValueError(f"regret: tolerance must be > 0, got {tolerance}")
    keys = list(base)
    u_all, y, seeds, n_failed, lbar = _runs_in_log_box(base, points, point_losses, base_losses, point_seeds,
                                                       base_seeds, rel)
    fit = fit_surface(u_all, y, seeds)
    d, lo, hi = len(keys), math.log(1 - rel), math.log(1 + rel)
    rng = np.random.default_rng(seed)
    betas = np.vstack([fit["beta"][None, :], draws(fit, n_draws, rng)])  # plug-in, then (n_draws, p) draws
    _, g, H = unpack(betas, fit["model"], d)
    u_min = box_minimum(g, H, lo, hi)  # (1 + n_draws, d)
    R = -_quadratic(g, H, u_min) / lbar
    # better fraction (R4): Monte-Carlo points from the sampling measure, fixed per call
    u_sampled = np.log1p(rng.uniform(-rel, rel, (N_MC, d)))
    f_change = features(u_sampled, fit["model"])[:, 1:] @ betas[:, 1:].T  # (N_MC, 1 + n_draws): f(u) - f(0)
    frac = (f_change < 0).mean(axis=0)
    A = float(test_alpha)
    r_bc, (r_lo, r_hi) = basic_interval(R, A, 0.0, math.inf)
    linear = fit["model"] == "linear"  # a plane: lower bound 0, no better fraction (module docstring)
    r_lo = 0.0 if linear else r_lo
    f_bc, f_ci = basic_interval(frac, A, 0.0, 1.0)
    t_quantile = t_ppf(1 - A / 2, fit["df"])
    axes = {k: _axis_row(fit, i, d, lo, hi, lbar, t_quantile, g[0, i], u_min[:, i], A) for i, k in enumerate(keys)}
    curves, pts = _axis_curves(fit, u_all, keys, lo, hi, lbar, t_quantile)
    return {
        "axis_curves": curves, "axis_points": pts,
        "model": fit["model"], "model_reason": fit["model_reason"], "n_runs": fit["n_runs"],
        "n_points": fit["n_points"], "n_failed_points": n_failed, "df": fit["df"], "sigma": fit["sigma"],
        "sigma_rel": fit["sigma"] / lbar, "lack_of_fit": fit["lack_of_fit"], "base_loss_mean": lbar,
        "fitted_base_loss": float(betas[0, 0]), "box_min_loss": float(betas[0, 0] - R[0] * lbar),
        "box_min_location": {k: axes[k]["min_factor"] for k in keys},
        "regret": float(r_bc * lbar), "regret_rel": r_bc, "regret_rel_ci": [r_lo, r_hi],
        "regret_rel_plugin": float(R[0]), "axes": axes,
        "better_fraction": None if linear else f_bc, "better_fraction_ci": None if linear else f_ci,
        "better_fraction_plugin": float(frac[0]),
        "interval": f"parametric bootstrap ({n_draws} multivariate-t draws of the surface), basic (bias-corrected) "
                    f"{1 - 2 * A:.0%} interval (each bound one-sided {1 - A:.0%})",
        "axis_interval": f"Student t, {1 - A:.0%} two-sided, df = {fit['df']}",
        "tolerance": float(tolerance), "test_alpha": A, "rel": float(rel), "keys": keys,
        "beta": fit["beta"].tolist(),
    }


def _runs_in_log_box(base, points, point_losses, base_losses, point_seeds, base_seeds, rel: float):
    """Every finite run as a row: log-coordinates u = log(point / base) (N, d), losses (N,), seed blocks (N,), the
    number of points left out for a non-finite run, and the base's mean loss. One-line ValueErrors
    for non-positive base values, a base without finite runs and points outside the +-rel box."""
    keys = list(base)
    s = np.array([float(base[k]) for k in keys])
    if np.any(s <= 0):
        raise ValueError(f"regret: log-coordinates need positive base values, got {dict(base)}")
    base_l = np.asarray(base_losses, dtype=float)
    if base_l.size == 0 or not np.all(np.isfinite(base_l)):
        raise ValueError("regret: the base needs >= 1 finite run")
    u_rows, y, seeds, n_failed = [np.zeros((base_l.size, len(keys)))], [base_l], [list(base_seeds)], 0
    for j, (pt, ls) in enumerate(zip(points, point_losses)):
        ls = np.atleast_1d(np.asarray(ls, dtype=float))
        if ls.size == 0 or not np.all(np.isfinite(ls)):
            n_failed += 1
            continue
        u = np.log(np.array([float(pt[k]) for k in keys]) / s)
        if np.any(u < math.log(1 - rel) - 1e-9) or np.any(u > math.log(1 + rel) + 1e-9):
            raise ValueError(f"regret: point {j} lies outside the +-{rel:.0%} box around the base")
        u_rows.append(np.tile(u, (ls.size, 1)))
        y.append(ls)
        seeds.append(list(point_seeds[j]))
    block = np.concatenate([np.asarray(x) for x in seeds])
    return np.concatenate(u_rows), np.concatenate(y), block, n_failed, float(base_l.mean())


def _axis_row(fit: dict, i: int, d: int, lo: float, hi: float, lbar: float, t_quantile: float, slope: float,
              u_min_i: np.ndarray, A: float) -> dict:
    """Axis i of the surface: the fitted relative change at the box's up / down faces with t intervals, the slope
    in log-coordinates, and where the box minimum lies on this axis (plug-in and draw interval)."""
    row = {}
    for name, step in (("up", hi), ("down", lo)):
        cvec = (features(step * np.eye(d)[i], fit["model"]) - features(np.zeros(d), fit["model"]))[0]  # (R3)
        est, se = float(cvec @ fit["beta"]) / lbar, math.sqrt(float(cvec @ fit["cov"] @ cvec)) / lbar
        row[name] = {"rel_change": est, "se": se, "ci": [est - t_quantile * se, est + t_quantile * se]}
    return {**row, "slope_log": float(slope), "slope_log_se": math.sqrt(float(fit["cov"][1 + i, 1 + i])),
            "min_factor": float(math.exp(u_min_i[0])),
            "min_factor_ci": [float(math.exp(np.quantile(u_min_i[1:], q))) for q in (A, 1 - A)]}


def _axis_curves(fit: dict, u_all: np.ndarray, keys: list[str], lo: float, hi: float, lbar: float, tq: float,
                 n_grid: int = 21) -> tuple[dict, dict]:
    """Figure data: along each axis i, the fitted relative change (f(t e_i) - f(0)) / Lbar(S) with its pointwise
    Student-t band over a grid of factors, and the points' partial residuals (seed-adjusted point mean - f(u_j) +
    f(u_ji e_i) - f(0)) / Lbar(S) at their factor on axis i (the base at factor 1)."""
    d, model, beta = len(keys), fit["model"], fit["beta"]
    _, first, inv = np.unique(np.round(u_all, 12), axis=0, return_index=True, return_inverse=True)
    u_pts = u_all[first]  # (P, d)
    means = np.array([fit["adjusted"][inv == j].mean() for j in range(len(first))])
    resid = means - features(u_pts, model) @ beta  # (P,)
    t = np.log(np.linspace(math.exp(lo), math.exp(hi), n_grid))
    curves, pts, f0 = {}, {}, features(np.zeros((1, d)), model)
    for i, k in enumerate(keys):
        ug = np.zeros((n_grid, d))
        ug[:, i] = t
        C = features(ug, model) - f0  # (n_grid, p): contrasts f(t e_i) - f(0)
        est = C @ beta
        se = np.sqrt(np.einsum("gp,pq,gq->g", C, fit["cov"], C))
        curves[k] = {"factor": np.exp(t).tolist(), "rel_change": (est / lbar).tolist(),
                     "lo": ((est - tq * se) / lbar).tolist(), "hi": ((est + tq * se) / lbar).tolist()}
        ui = np.zeros_like(u_pts)
        ui[:, i] = u_pts[:, i]
        part = resid + (features(ui, model) - f0) @ beta
        pts[k] = {"factor": np.exp(u_pts[:, i]).tolist(), "rel_change": (part / lbar).tolist()}
    return curves, pts


def regret_verdict(res: dict | None, reason: str | None = None) -> dict:
    """{"verdict": pass | fail | inconclusive, "statement"} from :func:`regret_analysis`'s result against its
    ``tolerance`` (None + ``reason`` when the surface could not be fitted)."""
    if res is None:
        return {"verdict": "inconclusive", "statement": f"regret INCONCLUSIVE: no response surface ({reason})"}
    lo, hi = res["regret_rel_ci"]
    tolerance = res["tolerance"]
    v = "pass" if hi < tolerance else "fail" if lo > tolerance else "inconclusive"
    word = {"pass": "upper bound below", "fail": "lower bound above", "inconclusive": "interval contains"}[v]
    if v == "fail" and res["model"] == "linear":  # module docstring: a plane never fails
        v = "inconclusive"
        word = "linear surface (never a fail: it over-states a convex loss's regret), lower bound above"
    k, a = min(res["axes"].items(), key=lambda kv: min(kv[1]["up"]["rel_change"], kv[1]["down"]["rel_change"]))
    step = "up" if a["up"]["rel_change"] < a["down"]["rel_change"] else "down"
    rel = res["rel"]
    lead = (f"S leaves {res['regret_rel']:.3%} of the loss on the table" if res["model"] != "linear" else
            f"a plane through the points, {PLANE_CAVEAT}, lies {res['regret_rel']:.3%} below S")
    st = (f"regret {v.upper()}: {lead} "
          f"[{lo:.3%}, {hi:.3%}] ({res['interval']}; the fitted surface's own box minimum, biased high by the noise, "
          f"gives {res['regret_rel_plugin']:.3%}), {word} the tolerance {tolerance:.2%}; {res['model']} surface "
          f"({res['model_reason']}), df = {res['df']}; estimated box minimum at "
          + ", ".join(f"{key.split('.')[-1]} x{f:.3g}" for key, f in res["box_min_location"].items())
          + (f"; fraction of the box better than S {res['better_fraction']:.1%} [{res['better_fraction_ci'][0]:.1%}, "
             f"{res['better_fraction_ci'][1]:.1%}]" if res["better_fraction"] is not None else
             "; no better fraction from a linear surface")
          + f"; steepest axis: {'raising' if step == 'up' else 'lowering'} {k} "
            f"{rel:.0%} changes the loss by {a[step]['rel_change']:+.3%} +- "
            f"{(a[step]['ci'][1] - a[step]['ci'][0]) / 2:.3%}")
    return {"verdict": v, "statement": st}


def missing_bound(summary: dict, d: int) -> str | None:
    """Why the n perturbed points bound no regret, or None when a curved surface bounds it (the diagonal surface has
    1 + 2d coefficients for d transferred values; a plane's box minimum is a corner no run measured)."""
    reg = summary.get("regret") or {}
    if reg.get("model") not in (None, "linear") and "regret_rel" in reg:
        return None
    p = n_coefficients("diagonal", d)
    why = ("a plane's corner would be an extrapolation, no run there" if reg.get("model") == "linear"
           else f"no surface: {reg.get('reason', 'not fitted')}")
    return (f"n = {summary.get('n_perturbed_run', '?')} perturbed points cannot bound a regret (the curved surface "
            f"over the {d} transferred values has {p} coefficients: n >= {p} perturbed points; "
            f"{why})")
