"""Simulated verification studies: outcome rates of the contrast verdict (:func:`simulate_verdicts`) and, around a
misplaced optimum (:func:`simulate_bowl`), error rates of both verdicts and interval coverage (measured tables:
docs/verdicts.md).

Truth (relative loss bowl in the log-coordinates u_i = ln(S'_i / S_i) of :mod:`ptsweep.analysis.regret`):

    mu(u) = loss * (1 + sum_i c_i (u_i - ln k_i)^2),   runs L_{j,s} = mu(u_j) + b_s + e_{j,s}                    (B1)

k_i = the optimum's factor on axis i, b_s ~ N(0, (seed_sd loss)^2), e ~ N(0, (noise loss)^2); the design of
verify-transfer: the base at m seeds, point j at k seeds (j + r) mod m. Curvatures c_i (relative, per (ln factor)^2):
:data:`CURVATURE`, the project's measured values (docs/verdicts.md says where they come from).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ptsweep.analysis import regret
from ptsweep.analysis.design import perturb
from ptsweep.analysis.verification import OUTCOMES, verdict

CURVATURE = (0.073, 0.039, 0.039, 0.039, 0.039, 0.039, 0.039)
"""Relative curvature per (ln factor)^2: optim.lr first, then the six information weights (module docstring)."""


def truth(shift: Sequence[float], curvature: Sequence[float], rel: float = 0.2, n_mc: int = 20000) -> dict:
    """True relative regret (R2 / mu(0)) and better fraction (R4) of the bowl (B1)."""
    c, us = np.asarray(curvature, float), np.log(np.asarray(shift, float))
    f0 = 1.0 + float(np.sum(c * us**2))
    g, H = -2.0 * c * us, np.diag(2.0 * c)  # mu(u) / loss - f0 = g'u + 1/2 u'Hu
    umin = regret.box_minimum(g[None], H[None], math.log(1 - rel), math.log(1 + rel))[0]
    R = -(g @ umin + 0.5 * umin @ H @ umin) / f0
    u = np.log1p(np.random.default_rng(12345).uniform(-rel, rel, (n_mc, len(c))))
    frac = float(((u @ g + 0.5 * np.einsum("ki,i,ki->k", u, np.diag(H), u)) < 0).mean())
    return {"regret_rel": float(R), "better_fraction": frac}


def simulate_bowl(noise: float, shift: Sequence[float] | None = None, curvature: Sequence[float] = CURVATURE,
                  n_sims: int = 200, n: int = 8, m: int = 2, k: int = 0, seed_sd: float | None = None,
                  loss: float = 6.0, rel: float = 0.2, tolerance: float = regret.REGRET_TOLERANCE,
                  n_draws: int = 500, rng_seed: int = 0, **kw) -> dict[str, float]:
    """Rates over ``n_sims`` simulated studies of (B1): the contrast verdict (keys of OUTCOMES), the regret verdict
    (``regret_pass`` / ``regret_fail`` / ``regret_inconclusive``), the strict test (``strict_pass``), coverage of the
    regret bounds (``regret_hi_covers``: truth <= upper bound; ``regret_lo_covers``; ``regret_covers``: both) and of
    the better-fraction interval (``fraction_covers``; NaN for a linear surface, which gives none), the mean
    estimates and the truth (``true_regret_rel``, ``true_better_fraction``). ``kw`` goes to
    :func:`verification.verdict` (alpha, p, test_alpha, margin)."""
    d = len(curvature)
    shift = np.ones(d) if shift is None else np.asarray(shift, float)
    if shift.shape != (d,) or np.any(shift <= 0):
        raise ValueError(f"shift must hold {d} positive factors, got {shift.tolist()}")
    rng = np.random.default_rng(rng_seed)
    seed_sd = noise if seed_sd is None else seed_sd
    k = k or m
    c, us = np.asarray(curvature, float), np.log(shift)
    mu = lambda u: loss * (1.0 + np.sum(c * (u - us) ** 2, axis=-1))  # noqa: E731
    true = truth(shift, curvature, rel)
    keys = [f"x{i}" for i in range(d)]
    base = dict.fromkeys(keys, 1.0)
    pseeds = [[(j + r) % m for r in range(k)] for j in range(n)]
    acc: dict[str, float] = dict.fromkeys([*OUTCOMES, "regret_pass", "regret_fail", "regret_inconclusive",
                                           "strict_pass", "regret_hi_covers", "regret_lo_covers", "regret_covers",
                                           "fraction_covers", "mean_regret_rel", "mean_regret_hi",
                                           "mean_better_fraction"], 0.0)
    n_frac = 0
    for _ in range(n_sims):
        pts = perturb(base, n, rel, seed=int(rng.integers(2**31)))
        u = np.log(np.array([[p[key] for key in keys] for p in pts]))  # (n, d)
        b = rng.normal(0.0, seed_sd * loss, m)
        base_l = mu(np.zeros(d)) + b + rng.normal(0.0, noise * loss, m)
        runs = mu(u)[:, None] + b[np.asarray(pseeds)] + rng.normal(0.0, noise * loss, (n, k))  # (n, k)
        v = verdict(base_l, runs.tolist(), base_seeds=list(range(m)), perturbed_seeds=pseeds, **kw)
        acc[v["verdict"]] += 1
        acc["strict_pass"] += v["strict"]["verdict"] == "pass"
        res = regret.regret_analysis(base, pts, runs.tolist(), base_l, point_seeds=pseeds, base_seeds=list(range(m)),
                                     rel=rel, tolerance=tolerance, test_alpha=kw.get("test_alpha", 0.05),
                                     n_draws=n_draws, seed=int(rng.integers(2**31)))
        acc["regret_" + regret.regret_verdict(res)["verdict"]] += 1
        lo, hi = res["regret_rel_ci"]
        acc["regret_hi_covers"] += true["regret_rel"] <= hi
        acc["regret_lo_covers"] += lo <= true["regret_rel"]
        acc["regret_covers"] += lo <= true["regret_rel"] <= hi
        if res["better_fraction_ci"] is not None:  # a linear surface gives none
            flo, fhi = res["better_fraction_ci"]
            acc["fraction_covers"] += flo <= true["better_fraction"] <= fhi
            acc["mean_better_fraction"] += res["better_fraction"]
            n_frac += 1
        acc["mean_regret_rel"] += res["regret_rel"]
        acc["mean_regret_hi"] += hi
    out = {key: val / n_sims for key, val in acc.items()}
    for key in ("fraction_covers", "mean_better_fraction"):  # over the studies that gave a better fraction
        out[key] = acc[key] / n_frac if n_frac else math.nan
    out.update(true_regret_rel=true["regret_rel"], true_better_fraction=true["better_fraction"])
    return out


SCENARIOS = ("equal", "base_best", "base_worse", "bowl")


def simulate_verdicts(scenario: str, noise: float, n_sims: int = 400, n: int = 8, m: int = 2, k: int = 0,
                      seed_sd: float | None = None, effect: tuple[float, float] = (0.01, 0.05), loss: float = 6.0,
                      paired: bool = True, rng_seed: int = 0, **kw) -> dict[str, float]:
    """Outcome rates of :func:`verdict` on simulated neighbourhoods in the paired design of verify-transfer: the
    base at m seeds, point j at k seeds (j + r) mod m, r < k (k = 0: all m, the complete design). Runs: L_{j,s} =
    mu_j + u_s + e_{j,s}, e ~ N(0, (noise * loss)^2), u_s ~ N(0, (seed_sd * loss)^2) (default seed_sd = noise).
    mu_0 = loss; "equal": mu_j = loss; "base_best": mu_j = loss (1 + U(effect)); "base_worse": mu_j = loss (1 -
    U(effect)). ``paired=False`` analyses the same runs without seeds (unpaired).
    Returns {outcome: rate} over the four outcomes. ``kw`` goes to :func:`verdict` (alpha, p, test_alpha, margin).

    ``"bowl"``: a quadratic loss bowl in the log-coordinates whose optimum sits at ``shift`` (factors per axis, in
    ``kw``) with the project's measured ``curvature``; rates of this verdict, of the regret verdict and the coverage
    of the regret and better-fraction intervals (:func:`simulate_bowl`)."""
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {SCENARIOS}")
    if scenario == "bowl":
        if not paired:
            raise ValueError("the bowl scenario simulates the paired design only")
        return simulate_bowl(noise, n_sims=n_sims, n=n, m=m, k=k, seed_sd=seed_sd, loss=loss, rng_seed=rng_seed,
                             **kw)
    rng = np.random.default_rng(rng_seed)
    seed_sd = noise if seed_sd is None else seed_sd
    counts = dict.fromkeys(OUTCOMES, 0)
    k = k or m
    pseeds = [[(j + r) % m for r in range(k)] for j in range(n)]
    seeds = {"base_seeds": list(range(m)), "perturbed_seeds": pseeds} if paired else {}  # unpaired: no seeds
    for _ in range(n_sims):
        u = rng.normal(0.0, seed_sd * loss, m)  # (m,)
        shift = rng.uniform(*effect, n) * loss
        mu = {"equal": np.full(n, loss), "base_best": loss + shift, "base_worse": loss - shift}[scenario]
        base = loss + u + rng.normal(0.0, noise * loss, m)
        pts = mu[:, None] + u[np.asarray(pseeds)] + rng.normal(0.0, noise * loss, (n, k))  # (n, k)
        counts[verdict(base, pts.tolist(), **seeds, **kw)["verdict"]] += 1
    return {k: c / n_sims for k, c in counts.items()}
