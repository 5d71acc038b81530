"""The verdict of the random-search verification of hyperparameter transfer ([S] §3.1, spec §10) and its tables.

- Figure 1(a) of [S]: D(S', S) vs relative loss increase (L(S') - L(S)) / L(S); Figure 1(b): rank vs relative loss
  increase (:func:`rank_table`, with the seed-noise band :func:`noise_band`).
- Seed-blocked contrasts of every perturbed point against the base (:func:`paired_contrasts`) and the verdict
  (:func:`verdict`): the paper's strict test next to a noise-aware decision rule.

Honesty note (spec §10): in [S] a few samples beat S by at most 0.4 % and were called noise. The strict test then does
not apply as stated. :func:`verdict` therefore separates "pass" (nothing beats the base) from "pass_within_noise"
(something beats it, but only within the seed-noise band estimated from re-running S with several seeds).

Sample size, sampling and distance: :mod:`ptsweep.analysis.design`; simulated error rates of the verdict:
:func:`ptsweep.analysis.regret_sim.simulate_verdicts`. Everything here is a pure function of numpy / pandas inputs:
no model, Ray or W&B imports.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from .blocked_fit import fit_blocked, t_ppf
from .design import distance, n_required

__all__ = [
    "NOISE_LEVEL",
    "TEST_ALPHA",
    "MARGIN",
    "OUTCOMES",
    "noise_band",
    "rank_table",
    "verdict",
    "paired_contrasts",
]

NOISE_LEVEL = 0.95
"""Coverage of the unpaired per-point noise band of plots and tables (see :func:`noise_band`)."""
TEST_ALPHA = 0.05
"""Level of the noise-aware tests of :func:`verdict` (family-wise over the perturbed points)."""
MARGIN = 0.01
"""Equivalence margin of the "flat" outcome, relative to the base loss (1 %: [S] called <= 0.4 % noise)."""
OUTCOMES = ("pass", "fail", "flat", "inconclusive")


# --------------------------------------------------------------------------------------------------------------
# Noise band and tables
# --------------------------------------------------------------------------------------------------------------
def _base_summary(base_losses: Iterable[float]) -> tuple[np.ndarray, float, float]:
    arr = np.asarray(list(base_losses), dtype=float)
    if arr.size == 0:
        raise ValueError("base_losses is empty: run the base point at least once")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"base_losses must be finite, got {arr.tolist()}")
    mean = float(arr.mean())
    std = float(arr.std(ddof=1)) if arr.size > 1 else 0.0
    return arr, mean, std


def noise_band(base_losses: Sequence[float], level: float = NOISE_LEVEL) -> float:
    """Half-width of the unpaired seed-noise band around the base mean, in loss units (for plots and tables).

        band = t_{m-1, (1 + level)/2} * s * sqrt(1 + 1/m)

    s is the sample std (ddof=1) of the m base-seed losses. (new run - base mean) / (s sqrt(1 + 1/m)) follows a
    Student t with m - 1 degrees of freedom when both have the same true loss (normal seed noise), so a truly
    equivalent single-seed point falls outside the band with probability exactly 1 - level. (The old band,
    2 s sqrt(1 + 1/m), treated s as known: its false-positive rate is 9.2 % at m = 3 and 14.8 % at m = 2, not 2.3 %.)
    With one base seed s is unknown: the band is 0 and verdicts say that noise was not estimated.
    """
    arr, _, std = _base_summary(base_losses)
    if arr.size < 2:
        return 0.0
    return float(t_ppf(0.5 + level / 2.0, arr.size - 1) * std * math.sqrt(1.0 + 1.0 / arr.size))


def rank_table(
    perturbed: pd.DataFrame,
    base: Mapping[str, float],
    base_losses: Sequence[float],
    keys: Sequence[str] | None = None,
    loss_col: str = "loss",
    noise_level: float = NOISE_LEVEL,
) -> pd.DataFrame:
    """Table behind Figure 1 of [S]: one row per perturbed point plus one ``is_base`` row, sorted by loss.

    Args:
        perturbed: one row per perturbed point; columns ``keys`` (the hyperparameters) and ``loss_col`` (the point's
            mean loss over its seeds); other columns (trial id, status, ...) are carried through. Non-finite losses
            (diverged / crashed) are kept as failed.
        base: the base point S (key -> value).
        base_losses: final losses of S over several seeds; S is represented by their mean.
        keys: hyperparameters for the distance; default: the keys of ``base``.
        loss_col: name of the loss column in ``perturbed`` (copied to ``loss`` in the output).

    Returns a new DataFrame with columns ``keys``, ``loss``, ``distance`` (D(S', S), 0 for the base),
    ``rel_increase`` ((loss - base_mean) / base_mean, a fraction; +inf for failed rows), ``failed``, ``is_base`` and
    ``rank`` (1 = lowest loss, among all n + 1 points; ties are broken in favour of the base, because an equal loss
    does not *beat* S; failed rows come last). ``attrs`` holds base_mean, base_std, n_seeds and noise_band
    (see :func:`noise_band`).
    """
    keys = list(base) if keys is None else list(keys)
    base_sub = {k: float(base[k]) for k in keys}
    arr, base_mean, base_std = _base_summary(base_losses)
    missing = [c for c in [*keys, loss_col] if c not in perturbed.columns]
    if missing:
        raise KeyError(f"perturbed table lacks columns {missing}")

    df = perturbed.copy().reset_index(drop=True)
    df["loss"] = df[loss_col].astype(float)
    df["distance"] = [distance({k: row[k] for k in keys}, base_sub) for _, row in df[keys].iterrows()]
    df["failed"] = ~np.isfinite(df["loss"].to_numpy())
    df["is_base"] = False

    base_row = {c: np.nan for c in df.columns}
    base_row.update(base_sub)
    base_row.update(loss=base_mean, distance=0.0, failed=False, is_base=True)
    if loss_col != "loss":
        base_row[loss_col] = base_mean
    df = pd.concat([df, pd.DataFrame([base_row])], ignore_index=True)
    df["failed"] = df["failed"].astype(bool)
    df["is_base"] = df["is_base"].astype(bool)

    rel = (df["loss"] - base_mean) / base_mean
    df["rel_increase"] = np.where(df["failed"], np.inf, rel)
    # sort: finite losses ascending, base before equal losses, failed last
    sort_loss = np.where(df["failed"], np.inf, df["loss"])
    order = np.lexsort((~df["is_base"].to_numpy(), sort_loss, df["failed"].to_numpy()))
    df = df.iloc[order].reset_index(drop=True)
    df["rank"] = np.arange(1, len(df) + 1)

    df.attrs.update(base_mean=base_mean, base_std=base_std, n_seeds=int(arr.size),
                    noise_band=noise_band(arr, noise_level))
    return df


# --------------------------------------------------------------------------------------------------------------
# Paired (seed-blocked) contrasts
# --------------------------------------------------------------------------------------------------------------
def _as_points(losses, seeds) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Each perturbed point as an array of its losses (a float = one run) and, if given, its seeds."""
    pts = [np.atleast_1d(np.asarray(x, dtype=float)).ravel() for x in losses]
    if seeds is None:
        return pts, None
    sds = [np.atleast_1d(np.asarray(s)).ravel() for s in seeds]
    if len(sds) != len(pts) or any(a.size != b.size for a, b in zip(pts, sds)):
        raise ValueError("perturbed_seeds must have the shape of perturbed_losses (one seed per loss)")
    return pts, sds


def paired_contrasts(base_losses: Sequence[float], point_losses: Sequence[np.ndarray],
                     base_seeds: Sequence | None = None, point_seeds: Sequence[np.ndarray] | None = None) -> dict:
    """Least-squares contrasts "point j minus base" in the seed-blocked linear model, with their standard errors.

    Model (one row per run; seeds are blocks, the randomized-block design):

        L_{j,s} = mu_j + u_s + e_{j,s},   e ~ N(0, sigma^2) independent,   j = 0 (base), 1..n;  s = seed

    u_s is whatever a seed does to every run that uses it (initialisation, data order, masks): it cancels in the
    paired contrast mu_j - mu_0. Without seeds (``point_seeds`` None) the model has no u_s (unpaired design).
    It is fitted by :func:`ptsweep.analysis.blocked_fit.fit_blocked` (one indicator column per point):
    sigma^2 = RSS / df, df = runs - rank(X); contrast j has se_j = sigma sqrt(c_j' (X'X)^+ c_j), and
    (estimate - true) / se_j follows a Student t with df degrees of freedom (normal e); se_j = inf where the design
    does not identify the contrast. Complete design (every
    point at the same m seeds as the base): delta_j = mean of the m paired differences, se_j = sigma sqrt(2/m),
    df = n (m - 1). One seed per point: df = 0 in the paired model (no estimate of sigma).

    Returns {"delta": (n,), "se": (n,), "df": int, "sigma": float, "mean_delta": float (average of the n contrasts:
    the neighbourhood minus the base), "mean_se": float, "design": "paired" | "unpaired"}.
    """
    base = np.asarray(base_losses, dtype=float)
    n = len(point_losses)
    paired = point_seeds is not None
    if paired and base_seeds is None:
        base_seeds = list(range(base.size))
    runs = [base] + list(point_losses)
    group = np.concatenate([np.full(r.size, g) for g, r in enumerate(runs)])
    seeds = np.concatenate([np.asarray(base_seeds)] + [np.asarray(s) for s in point_seeds]) if paired else None
    fit = fit_blocked(group[:, None] == np.arange(n + 1), np.concatenate(runs), seeds)  # one column per point
    weights = np.zeros((n + 1, n + 1))  # rows: contrasts point j - base (j = 1..n), then their average
    weights[np.arange(n), np.arange(1, n + 1)] = 1.0
    weights[n, 1:] = 1.0 / max(n, 1)
    weights[:, 0] = -1.0
    est, se, _ = fit.contrasts(weights)
    return {"delta": est[:n], "se": se[:n], "df": fit.df, "sigma": fit.sigma,
            "mean_delta": float(est[n]) if n else math.nan, "mean_se": float(se[n]) if n else math.nan,
            "design": "paired" if paired else "unpaired"}


def _tstat(delta: np.ndarray, se: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        t = delta / se
    return np.where((se == 0) & (delta == 0), 0.0, t)


# --------------------------------------------------------------------------------------------------------------
# Verdict
# --------------------------------------------------------------------------------------------------------------
def verdict(
    base_losses: Sequence[float],
    perturbed_losses: Sequence[float | Sequence[float]],
    alpha: float = 0.05,
    p: float = 0.05,
    count_failed_as_samples: bool = False,
    *,
    base_seeds: Sequence | None = None,
    perturbed_seeds: Sequence | None = None,
    test_alpha: float = TEST_ALPHA,
    margin: float = MARGIN,
) -> dict:
    """The verification verdict: the paper's strict test, reported as such, and the noise-aware decision rule.

    Inputs: the base point's losses over m seeds; one entry per perturbed point (a float = one run, or a sequence =
    its runs over several seeds). With ``perturbed_seeds`` (same shape) and ``base_seeds`` (default 0..m-1) the
    design is paired: runs with the same seed share init, data order and masks, and contrasts are seed-blocked
    (:func:`paired_contrasts`). Points with any non-finite loss are failed (diverged / crashed): they rank last and
    are not samples unless ``count_failed_as_samples``.

    **Strict test** ([S] §3.1, ``result["strict"]``): the base (at its mean) beats every one of n >= n_required
    usable points -> "pass" (top p with confidence 1 - alpha, if losses had no noise); some point's mean is below the
    base mean -> "fail"; otherwise "insufficient".

    **Decision rule** (``result["verdict"]``), with delta_j = contrast point j - base, se_j its standard error, df the
    residual degrees of freedom, t_{df} Student quantiles, n = usable points, A = test_alpha:

    1. "inconclusive" if there is no usable point or no noise estimate (df = 0: one base seed and one run per point,
       or a paired design with one seed per point).
    2. "fail" if some point beats the base beyond noise, delta_j / se_j < -t_{df}(1 - A / (2n)) (Bonferroni, so the
       chance that an equivalent neighbourhood produces one is <= A/2), or the neighbourhood is better on average,
       mean_j delta_j / se < -t_{df}(1 - A/2).
    3. "pass" if n >= n_required, at most half of the points beat the base (by their contrast and by their mean),
       and the neighbourhood is worse on average: mean_j delta_j / se > t_{df}(1 - A). A base beaten by more than
       half of its finite neighbourhood is never a pass.
    4. "flat" if every point is equivalent to the base within ``margin`` (relative to the base mean):
       |delta_j| + t_{df}(1 - A / (2n)) se_j <= margin * base mean for all j (simultaneous two one-sided tests).
    5. "inconclusive" otherwise (too few samples, or noise too large to tell pass / flat / fail apart).

    Count of points beating the base: under equivalence with equal replication the base's rank among the n + 1 means
    is uniform, so P(count >= c) = (n + 1 - c) / (n + 1) (``p_count``). It is NOT binomial(n, 1/2): every
    comparison shares the base's own noise (with n = 8 a binomial would call 8 of 8 "p = 0.004"; the truth is 1/9).

    Returns a dict (JSON-ready): verdict, statement, reasons, strict {verdict, statement}, alpha, p, test_alpha,
    margin (relative), n_required, n_run, n_failed, n_valid, n_seeds, design, df, sigma, t_quantile, noise_band
    (t_quantile x median se_j: the per-point "beyond noise" threshold), base_loss_mean, base_loss_std, base_rank,
    n_better (points whose mean is below the base mean), n_better_paired (delta_j < 0), n_better_beyond_noise,
    n_worse_beyond_noise, count_expected_if_equivalent (n/2), p_count, best_improvement ((base - best point mean)
    / base), neighbourhood_delta, neighbourhood_se, neighbourhood_t, delta, se, t (per point, in input order; None
    for failed points).
    """
    base_arr, base_mean, base_std = _base_summary(base_losses)
    m = int(base_arr.size)
    runs, run_seeds = _as_points(perturbed_losses, perturbed_seeds)
    finite = np.array([bool(np.all(np.isfinite(x))) and x.size > 0 for x in runs], dtype=bool)
    n_run, n_failed = len(runs), int((~finite).sum())
    n_valid = n_run - n_failed
    n_samples = n_run if count_failed_as_samples else n_valid
    n_req = n_required(alpha, p)
    good = [x for x, f in zip(runs, finite) if f]
    good_seeds = [s for s, f in zip(run_seeds, finite) if f] if run_seeds is not None else None
    means = np.array([x.mean() for x in good], dtype=float)

    n_better = int((means < base_mean).sum())
    best_impr = float(((base_mean - means) / base_mean).max()) if means.size else None
    contrasts = paired_contrasts(base_arr, good, base_seeds, good_seeds)
    delta, se, df = contrasts["delta"], contrasts["se"], contrasts["df"]
    tj = _tstat(delta, se)
    n_better_paired = int((delta < 0).sum())
    A = float(test_alpha)
    q = t_ppf(1.0 - A / (2.0 * max(n_valid, 1)), df) if df > 0 else math.inf
    q_mean_fail = t_ppf(1.0 - A / 2.0, df) if df > 0 else math.inf
    q_mean_pass = t_ppf(1.0 - A, df) if df > 0 else math.inf
    t_mean = (float(_tstat(np.array([contrasts["mean_delta"]]), np.array([contrasts["mean_se"]]))[0]) if n_valid
              else math.nan)
    n_beyond = int((tj < -q).sum()) if df > 0 else 0
    n_worse = int((tj > q).sum()) if df > 0 else 0
    margin_abs = float(margin) * abs(base_mean)
    widest = float(np.max(np.abs(delta) + q * se)) if (n_valid and df > 0) else math.inf
    p_count = (n_valid + 1 - n_better_paired) / (n_valid + 1) if n_valid else math.nan
    majority = max(n_better, n_better_paired) > n_valid / 2.0

    # ---- strict test ([S] §3.1) ---------------------------------------------------------------------------------
    conf, top = f"{1 - alpha:.0%}", f"{p:.0%}"
    if n_better > 0:
        strict_verdict = "fail"
        strict_statement = (f"strict test FAILS: {n_better} of {n_valid} finite perturbed points have a lower mean "
                            f"loss than the base (best by {best_impr:.2%}); the base is rank {1 + n_better} of "
                            f"{n_run + 1}.")
    elif n_samples < n_req:
        strict_verdict = "insufficient"
        strict_statement = (f"strict test INSUFFICIENT: {n_samples} usable samples < {n_req} required for top-{top} "
                            f"at {conf}.")
    else:
        strict_verdict = "pass"
        strict_statement = (f"strict test PASSES: the base beats all {n_samples} usable points (n_required = "
                            f"{n_req}): top {top} with {conf} confidence if the losses carried no seed noise.")

    # ---- decision rule -------------------------------------------------------------------------------------------
    numbers = (f"design {contrasts['design']}, {m} base seed(s), df = {df}, run-noise sd {contrasts['sigma']:.3g}; "
               f"neighbourhood - base = {contrasts['mean_delta']:+.4g} +- {contrasts['mean_se']:.2g} "
               f"(t = {t_mean:+.2f}); {n_better_paired} of {n_valid} points beat the base (equivalence gives "
               f"{n_valid / 2:g} on average, P(>= {n_better_paired}) = {p_count:.2f}); {n_beyond} beat it beyond the "
               f"family-wise band t = {q:.3g} x se, {n_worse} are worse beyond it")
    reasons: list[str] = []
    if n_valid == 0:
        v, reasons = "inconclusive", ["no finite perturbed point"]
    elif df <= 0:
        v = "inconclusive"
        reasons = ["no replicate-based noise estimate (df = 0): run the base with >= 2 seeds and each perturbed "
                   "point with >= 2 seeds (paired) or the base with >= 2 seeds (unpaired)"]
    elif n_beyond > 0 or t_mean < -q_mean_fail:
        v = "fail"
        if n_beyond:
            reasons.append(f"{n_beyond} point(s) beat the base beyond the Bonferroni t band")
        if t_mean < -q_mean_fail:
            reasons.append(f"the neighbourhood is better than the base on average (t = {t_mean:.2f})")
    elif t_mean > q_mean_pass and not majority and n_samples >= n_req:
        v = "pass"
        reasons = [f"no point beats the base beyond noise, {n_better_paired} of {n_valid} beat it at all, and the "
                   f"neighbourhood is worse on average (t = {t_mean:.2f} > {q_mean_pass:.2f}); n = {n_samples} >= "
                   f"{n_req}"]
    elif widest <= margin_abs:
        v = "flat"
        reasons = [f"every point is within +-{margin:.1%} of the base (widest |delta| + band = {widest:.3g} <= "
                   f"{margin_abs:.3g})"]
    else:
        v = "inconclusive"
        if majority:
            reasons.append(f"{max(n_better, n_better_paired)} of {n_valid} points beat the base (more than half: "
                           f"never a pass)")
        if n_samples < n_req:
            reasons.append(f"{n_samples} usable samples < {n_req} required")
        if t_mean <= q_mean_pass:
            reasons.append(f"the neighbourhood is not detectably worse on average (t = {t_mean:.2f} <= "
                           f"{q_mean_pass:.2f})")
        if widest > margin_abs:
            reasons.append(f"not flat within +-{margin:.1%}: widest |delta| + band = {widest:.3g} > {margin_abs:.3g}")
    statement = f"{v.upper()}: {'; '.join(reasons)}. ({numbers}.) {strict_statement}"

    def per_point(a):
        out, it = [], iter(np.asarray(a, dtype=float).tolist())
        for f in finite:
            out.append(next(it) if f else None)
        return out

    return {
        "verdict": v,
        "statement": statement,
        "reasons": reasons,
        "strict": {"verdict": strict_verdict, "statement": strict_statement},
        "alpha": float(alpha),
        "p": float(p),
        "test_alpha": A,
        "margin": float(margin),
        "n_required": n_req,
        "n_run": n_run,
        "n_failed": n_failed,
        "n_valid": n_valid,
        "n_seeds": m,
        "design": contrasts["design"],
        "df": df,
        "sigma": contrasts["sigma"],
        "t_quantile": q,
        "noise_band": float(q * np.median(se)) if (df > 0 and n_valid) else 0.0,
        "base_loss_mean": base_mean,
        "base_loss_std": base_std,
        "base_rank": 1 + n_better,
        "n_better": n_better,
        "n_better_paired": n_better_paired,
        "best_improvement": best_impr,
        "n_better_beyond_noise": n_beyond,
        "n_worse_beyond_noise": n_worse,
        "count_expected_if_equivalent": n_valid / 2.0,
        "p_count": p_count,
        "neighbourhood_delta": contrasts["mean_delta"],
        "neighbourhood_se": contrasts["mean_se"],
        "neighbourhood_t": t_mean,
        "delta": per_point(delta),
        "se": per_point(se),
        "t": per_point(tj),
    }
