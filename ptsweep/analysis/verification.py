"""The verdict of the random-search verification of hyperparameter transfer ([S] §3.1, spec §10) and its tables.

:func:`rank_table` is the table of [S] Figure 1; :func:`verdict` reports the paper's strict test next to a noise-aware
decision rule on seed-blocked contrasts (:func:`paired_contrasts`).

**Strict test** ([S] §3.1, ``result["strict"]``): the base (at its mean) beats every one of n >= n_required usable
points -> "pass"; some point's mean is below the base mean -> "fail"; otherwise "insufficient".

**Decision rule** (``result["verdict"]``), with delta_j = contrast point j - base, se_j its standard error, df the
residual degrees of freedom, t_{df} Student quantiles, n = usable points, A = test_alpha:

1. "inconclusive" if there is no usable point or no noise estimate (df = 0).
2. "fail" if some point beats the base beyond noise, delta_j / se_j < -t_{df}(1 - A / (2n)) (Bonferroni), or the
   neighbourhood is better on average, mean_j delta_j / se < -t_{df}(1 - A/2).
3. "pass" if n >= n_required, at most half of the points beat the base (by their contrast and by their mean),
   and the neighbourhood is worse on average: mean_j delta_j / se > t_{df}(1 - A).
4. "flat" if |delta_j| + t_{df}(1 - A / (2n)) se_j <= margin * base mean for all j (simultaneous TOST).
5. "inconclusive" otherwise.

``p_count`` = P(count of points beating the base >= c) = (n + 1 - c) / (n + 1) under equivalence (docs/verdicts.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from .blocked_fit import fit_blocked, t_ppf
from .design import distance, n_required

NOISE_LEVEL = 0.95
"""Coverage of the unpaired per-point noise band of plots and tables (see :func:`noise_band`)."""
TEST_ALPHA = 0.05
"""Level of the noise-aware tests of :func:`verdict` (family-wise over the perturbed points)."""
MARGIN = 0.01
"""Equivalence margin of the "flat" outcome, relative to the base loss (1 %: [S] called <= 0.4 % noise)."""
OUTCOMES = ("pass", "fail", "flat", "inconclusive")


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
    """Half-width of the unpaired seed-noise band around the base mean, in loss units (for plots and tables):
    t_{m-1, (1 + level)/2} s sqrt(1 + 1/m), s the sample std of the m base-seed losses (0 for one seed). A single
    run with the base's true loss falls outside it with probability 1 - level (normal seed noise)."""
    arr, _, std = _base_summary(base_losses)
    return float(t_ppf(0.5 + level / 2, arr.size - 1) * std * math.sqrt(1.0 + 1.0 / arr.size)) if arr.size > 1 else 0.0


def rank_table(perturbed: pd.DataFrame, base: Mapping[str, float], base_losses: Sequence[float],
               keys: Sequence[str] | None = None, loss_col: str = "loss") -> pd.DataFrame:
    """Table behind Figure 1 of [S]: one row per perturbed point (columns ``keys``, default those of ``base``, and
    its seed-mean ``loss_col``, non-finite = failed; other columns carried through) plus one ``is_base`` row (the mean
    of ``base_losses``), sorted by loss, with ``loss``, ``distance`` D(S', S), ``rel_increase`` (relative to the
    base; +inf for failed rows), ``failed`` and ``rank`` (1 = lowest; an equal loss does not *beat* S, so ties go to
    the base; failed rows last). ``attrs``: base_mean, base_std, n_seeds and :func:`noise_band`."""
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

    base_row = {c: np.nan for c in df.columns} | base_sub | {loss_col: base_mean}
    base_row.update(loss=base_mean, distance=0.0, failed=False, is_base=True)
    df = pd.concat([df, pd.DataFrame([base_row])], ignore_index=True).astype({"failed": bool, "is_base": bool})

    df["rel_increase"] = np.where(df["failed"], np.inf, (df["loss"] - base_mean) / base_mean)
    # sort: finite losses ascending, base before equal losses, failed last
    sort_loss = np.where(df["failed"], np.inf, df["loss"])
    order = np.lexsort((~df["is_base"].to_numpy(), sort_loss, df["failed"].to_numpy()))
    df = df.iloc[order].reset_index(drop=True)
    df["rank"] = np.arange(1, len(df) + 1)

    df.attrs.update(base_mean=base_mean, base_std=base_std, n_seeds=int(arr.size), noise_band=noise_band(arr))
    return df


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
    """Least-squares contrasts "point j minus base" in model (B1) of :mod:`~ptsweep.analysis.blocked_fit` with one
    mean per point, L_{j,s} = mu_j + u_s + e_{j,s} (no u_s without ``point_seeds``: the unpaired design); se_j = inf
    where the design does not identify contrast j. Returns {"delta": (n,), "se": (n,), "df", "sigma", "mean_delta"
    (the neighbourhood minus the base), "mean_se", "design": "paired" | "unpaired"}."""
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


def verdict(base_losses: Sequence[float], perturbed_losses: Sequence[float | Sequence[float]], alpha: float = 0.05,
            p: float = 0.05, count_failed_as_samples: bool = False, *, base_seeds: Sequence | None = None,
            perturbed_seeds: Sequence | None = None, test_alpha: float = TEST_ALPHA, margin: float = MARGIN) -> dict:
    """The paper's strict test, reported as such, and the noise-aware decision rule (module docstring), as a
    JSON-ready dict.

    Inputs: the base point's losses over m seeds; one entry per perturbed point (a float = one run, or a sequence =
    its runs over seeds). With ``perturbed_seeds`` (same shape) and ``base_seeds`` (default 0..m-1) the contrasts are
    seed-blocked (:func:`paired_contrasts`). Points with a non-finite loss are failed: they rank last and are not
    samples unless ``count_failed_as_samples``. ``noise_band`` in the result is t_quantile x median se_j (the
    per-point "beyond noise" threshold); ``n_better`` counts point means below the base mean, ``n_better_paired``
    contrasts delta_j < 0; delta, se and t are per point in input order (None for failed points).
    """
    A = float(test_alpha)
    ev = _evidence(base_losses, perturbed_losses, base_seeds, perturbed_seeds, count_failed_as_samples, A)
    n_req = n_required(alpha, p)
    strict_verdict, strict_statement = _strict_test(ev, alpha, p, n_req)
    v, reasons = _decide(ev, n_req, margin)
    statement = f"{v.upper()}: {'; '.join(reasons)}. ({_numbers(ev)}.) {strict_statement}"
    c = ev.contrasts
    return {
        "verdict": v, "statement": statement, "reasons": reasons,
        "strict": {"verdict": strict_verdict, "statement": strict_statement},
        "alpha": float(alpha), "p": float(p), "test_alpha": A, "margin": float(margin), "n_required": n_req,
        "n_run": ev.n_run, "n_failed": ev.n_run - ev.n_valid, "n_valid": ev.n_valid, "n_seeds": ev.n_seeds,
        "design": c["design"], "df": c["df"], "sigma": c["sigma"], "t_quantile": ev.q,
        "noise_band": float(ev.q * np.median(c["se"])) if (c["df"] > 0 and ev.n_valid) else 0.0,
        "base_loss_mean": ev.base_mean, "base_loss_std": ev.base_std, "base_rank": 1 + ev.n_better,
        "n_better": ev.n_better, "n_better_paired": ev.n_better_paired, "best_improvement": ev.best_improvement,
        "n_better_beyond_noise": ev.n_beyond, "n_worse_beyond_noise": ev.n_worse,
        "count_expected_if_equivalent": ev.n_valid / 2.0, "p_count": ev.p_count,
        "neighbourhood_delta": c["mean_delta"], "neighbourhood_se": c["mean_se"], "neighbourhood_t": ev.t_mean,
        "delta": ev.per_point(c["delta"]), "se": ev.per_point(c["se"]), "t": ev.per_point(ev.t),
    }


@dataclass
class _Evidence:
    """The statistics :func:`verdict` decides on (its docstring defines each)."""

    base_mean: float
    base_std: float
    n_seeds: int
    finite: np.ndarray       # (n_run,) bool: point has only finite losses
    n_run: int
    n_valid: int             # finite points
    n_samples: int           # usable points (failed ones too with count_failed_as_samples)
    n_better: int            # points whose mean is below the base mean
    n_better_paired: int     # points whose contrast delta_j < 0
    best_improvement: float | None
    contrasts: dict          # paired_contrasts of the finite points
    t: np.ndarray            # delta_j / se_j
    q: float                 # Bonferroni band t_df(1 - A / (2n))
    q_mean_fail: float       # t_df(1 - A / 2)
    q_mean_pass: float       # t_df(1 - A)
    t_mean: float            # neighbourhood contrast / its se

    @property
    def n_beyond(self) -> int:
        return int((self.t < -self.q).sum()) if self.contrasts["df"] > 0 else 0

    @property
    def n_worse(self) -> int:
        return int((self.t > self.q).sum()) if self.contrasts["df"] > 0 else 0

    @property
    def p_count(self) -> float:
        n = self.n_valid
        return (n + 1 - self.n_better_paired) / (n + 1) if n else math.nan

    @property
    def majority(self) -> bool:
        return max(self.n_better, self.n_better_paired) > self.n_valid / 2.0

    def widest(self) -> float:
        """max_j |delta_j| + q se_j: the equivalence band of the "flat" outcome."""
        c = self.contrasts
        return float(np.max(np.abs(c["delta"]) + self.q * c["se"])) if (self.n_valid and c["df"] > 0) else math.inf

    def per_point(self, values) -> list:
        """Values of the finite points in input order, None for failed points."""
        it = iter(np.asarray(values, dtype=float).tolist())
        return [next(it) if f else None for f in self.finite]


def _evidence(base_losses, perturbed_losses, base_seeds, perturbed_seeds, count_failed_as_samples: bool,
              A: float) -> _Evidence:
    base_arr, base_mean, base_std = _base_summary(base_losses)
    runs, run_seeds = _as_points(perturbed_losses, perturbed_seeds)
    finite = np.array([bool(np.all(np.isfinite(x))) and x.size > 0 for x in runs], dtype=bool)
    good = [x for x, f in zip(runs, finite) if f]
    good_seeds = [s for s, f in zip(run_seeds, finite) if f] if run_seeds is not None else None
    means = np.array([x.mean() for x in good], dtype=float)
    contrasts = paired_contrasts(base_arr, good, base_seeds, good_seeds)
    df, n_valid = contrasts["df"], len(good)

    def quantile(level: float) -> float:
        return t_ppf(level, df) if df > 0 else math.inf

    t_mean = (float(_tstat(np.array([contrasts["mean_delta"]]), np.array([contrasts["mean_se"]]))[0]) if n_valid
              else math.nan)
    return _Evidence(base_mean=base_mean, base_std=base_std, n_seeds=int(base_arr.size), finite=finite,
                     n_run=len(runs), n_valid=n_valid, n_samples=len(runs) if count_failed_as_samples else n_valid,
                     n_better=int((means < base_mean).sum()), n_better_paired=int((contrasts["delta"] < 0).sum()),
                     best_improvement=float(((base_mean - means) / base_mean).max()) if means.size else None,
                     contrasts=contrasts, t=_tstat(contrasts["delta"], contrasts["se"]),
                     q=quantile(1.0 - A / (2.0 * max(n_valid, 1))), q_mean_fail=quantile(1.0 - A / 2.0),
                     q_mean_pass=quantile(1.0 - A), t_mean=t_mean)


def _strict_test(ev: _Evidence, alpha: float, p: float, n_req: int) -> tuple[str, str]:
    """[S] §3.1: the base (at its mean) must beat every one of n >= n_required usable points."""
    conf, top = f"{1 - alpha:.0%}", f"{p:.0%}"
    if ev.n_better > 0:
        return "fail", (f"strict test FAILS: {ev.n_better} of {ev.n_valid} finite perturbed points have a lower mean "
                        f"loss than the base (best by {ev.best_improvement:.2%}); the base is rank {1 + ev.n_better} "
                        f"of {ev.n_run + 1}.")
    if ev.n_samples < n_req:
        return "insufficient", (f"strict test INSUFFICIENT: {ev.n_samples} usable samples < {n_req} required for "
                                f"top-{top} at {conf}.")
    return "pass", (f"strict test PASSES: the base beats all {ev.n_samples} usable points (n_required = {n_req}): "
                    f"top {top} with {conf} confidence if the losses carried no seed noise.")


def _decide(ev: _Evidence, n_req: int, margin: float) -> tuple[str, list[str]]:
    """The decision rule (steps 1-5 of :func:`verdict`'s docstring): the outcome and the reasons that state it."""
    if ev.n_valid == 0:
        return "inconclusive", ["no finite perturbed point"]
    if ev.contrasts["df"] <= 0:
        return "inconclusive", ["no replicate-based noise estimate (df = 0): run the base with >= 2 seeds and each "
                                "perturbed point with >= 2 seeds (paired) or the base with >= 2 seeds (unpaired)"]
    fails = [(ev.n_beyond > 0, f"{ev.n_beyond} point(s) beat the base beyond the Bonferroni t band"),
             (ev.t_mean < -ev.q_mean_fail, f"the neighbourhood is better than the base on average (t = "
                                           f"{ev.t_mean:.2f})")]
    if any(applies for applies, _ in fails):
        return "fail", [why for applies, why in fails if applies]
    if ev.t_mean > ev.q_mean_pass and not ev.majority and ev.n_samples >= n_req:
        return "pass", [f"no point beats the base beyond noise, {ev.n_better_paired} of {ev.n_valid} beat it at all, "
                        f"and the neighbourhood is worse on average (t = {ev.t_mean:.2f} > {ev.q_mean_pass:.2f}); "
                        f"n = {ev.n_samples} >= {n_req}"]
    widest, margin_abs = ev.widest(), float(margin) * abs(ev.base_mean)
    if widest <= margin_abs:
        return "flat", [f"every point is within +-{margin:.1%} of the base (widest |delta| + band = {widest:.3g} <= "
                        f"{margin_abs:.3g})"]
    checks = [(ev.majority, f"{max(ev.n_better, ev.n_better_paired)} of {ev.n_valid} points beat the base (more than "
                            f"half: never a pass)"),
              (ev.n_samples < n_req, f"{ev.n_samples} usable samples < {n_req} required"),
              (ev.t_mean <= ev.q_mean_pass, f"the neighbourhood is not detectably worse on average (t = "
                                            f"{ev.t_mean:.2f} <= {ev.q_mean_pass:.2f})"),
              (True, f"not flat within +-{margin:.1%}: widest |delta| + band = {widest:.3g} > {margin_abs:.3g}")]
    return "inconclusive", [why for applies, why in checks if applies]


def _numbers(ev: _Evidence) -> str:
    """The statistics behind the outcome, in one parenthesis of the statement."""
    c = ev.contrasts
    return (f"design {c['design']}, {ev.n_seeds} base seed(s), df = {c['df']}, run-noise sd {c['sigma']:.3g}; "
            f"neighbourhood - base = {c['mean_delta']:+.4g} +- {c['mean_se']:.2g} (t = {ev.t_mean:+.2f}); "
            f"{ev.n_better_paired} of {ev.n_valid} points beat the base (equivalence gives {ev.n_valid / 2:g} on "
            f"average, P(>= {ev.n_better_paired}) = {ev.p_count:.2f}); {ev.n_beyond} beat it beyond the family-wise "
            f"band t = {ev.q:.3g} x se, {ev.n_worse} are worse beyond it")
