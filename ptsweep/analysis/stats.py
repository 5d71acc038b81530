"""Statistics of the random-search verification of hyperparameter transfer ([S] §3.1, spec §10).

The paper ([S] = "Scaling Probabilistic Transformer via Efficient Cross-Scale Hyperparameter Transfer", §3.1):

- Confidence inequality: if the base point S beats all n independent perturbed samples, then S lies in the top-p
  fraction of its neighbourhood with confidence 1 - alpha when      1 - (1 - p)^n >= 1 - alpha,
  i.e. the minimum sample size is                                      n >= log(alpha) / log(1 - p)
  (alpha = p = 0.05 gives n >= 58.4, so 59; the paper ran 62).
- Sampling: each coordinate independently S'_i ~ Uniform[0.8 S_i, 1.2 S_i]          (spec §10, "+-20 %").
- Distance:  D(S', S) = sqrt( sum_i ((S'_i - S_i) / S_i)^2 ),  the norm of the relative perturbation.
- Figure 1(a): D vs relative loss increase (L(S') - L(S)) / L(S); Figure 1(b): rank vs relative loss increase.

Honesty note (spec §10): in [S] a few samples beat S by at most 0.4 % and were called noise. The strict test then does
not apply as stated. :func:`verdict` therefore separates "pass" (nothing beats the base) from "pass_within_noise"
(something beats it, but only within the seed-noise band estimated from re-running S with several seeds).

Everything here is a pure function of numpy / pandas inputs: no model, Ray or W&B imports.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = [
    "NOISE_K",
    "n_required",
    "perturb",
    "distance",
    "noise_band",
    "rank_table",
    "verdict",
    "lr_optimum_drift",
    "pick_column",
]

NOISE_K = 2.0
"""Default multiplier of the noise band (see :func:`noise_band`)."""


# --------------------------------------------------------------------------------------------------------------
# Sample size ([S] §3.1)
# --------------------------------------------------------------------------------------------------------------
def _exact(x: float) -> Fraction:
    """The decimal number the user typed (0.05 -> 1/20), not the binary float nearest to it."""
    return Fraction(repr(float(x)))


def n_required(alpha: float, p: float) -> int:
    """Smallest n with (1 - p)^n <= alpha, i.e. n = ceil(log(alpha) / log(1 - p))   ([S] §3.1).

    From the paper's inequality 1 - (1 - p)^n >= 1 - alpha. The float estimate is corrected with exact rational
    arithmetic on the decimal values of alpha and p, so integer ratios are not pushed up by rounding
    (alpha = 0.01, p = 0.9 gives 2, not 3) and (1 - p)^n <= alpha < (1 - p)^(n - 1) holds exactly.

    >>> n_required(0.05, 0.05), n_required(0.2, 0.2)
    (59, 8)
    """
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if not (0.0 < p < 1.0):
        raise ValueError(f"p must be in (0, 1), got {p}")
    a, q = _exact(alpha), 1 - _exact(p)
    n = max(1, math.ceil(math.log(alpha) / math.log1p(-p)))
    while q**n > a:  # float estimate too small
        n += 1
    while n > 1 and q ** (n - 1) <= a:  # float estimate too large (e.g. ratio exactly an integer)
        n -= 1
    return n


# --------------------------------------------------------------------------------------------------------------
# Sampling and distance ([S] §3.1, spec §10)
# --------------------------------------------------------------------------------------------------------------
def perturb(base: Mapping[str, float], n: int, rel: float = 0.2, seed: int = 0) -> list[dict[str, float]]:
    """n perturbed points around ``base``: S'_i = S_i (1 + u_i), u_i ~ Uniform[-rel, +rel] independently ([S] §3.1).

    Each coordinate therefore lies in [(1 - rel) S_i, (1 + rel) S_i]. The draw is a pure function of ``seed``
    (numpy ``default_rng``): same seed -> same points. Keys keep the order of ``base``; values are Python floats.
    A perturbation of ``optim.lr`` is applied to the base LR, before any per-group muP rule (spec §10).
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not (0.0 <= rel < 1.0):
        raise ValueError(f"rel must be in [0, 1), got {rel}")
    keys = list(base)
    values = np.array([float(base[k]) for k in keys], dtype=float)  # (K,)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"base values must be finite, got {dict(base)}")
    rng = np.random.default_rng(seed)
    u = rng.uniform(-rel, rel, size=(n, len(keys)))  # (n, K)
    pts = values[None, :] * (1.0 + u)  # (n, K)
    return [{k: float(v) for k, v in zip(keys, row)} for row in pts]


def distance(point: Mapping[str, float], base: Mapping[str, float]) -> float:
    """D(S', S) = sqrt(sum_i ((S'_i - S_i) / S_i)^2) over the keys of ``base`` ([S] §3.1, eq. for D).

    Keys of ``point`` not in ``base`` are ignored; a missing key raises KeyError; S_i = 0 raises ValueError.
    """
    total = 0.0
    for k, s in base.items():
        s = float(s)
        if s == 0.0:
            raise ValueError(f"distance is undefined for a zero base coordinate ({k})")
        total += ((float(point[k]) - s) / s) ** 2
    return math.sqrt(total)


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


def noise_band(base_losses: Sequence[float], k: float = NOISE_K) -> float:
    """Half-width of the seed-noise band around the base mean, in loss units.

    Definition (the one used everywhere in ptsweep):  band = k * s * sqrt(1 + 1/m),  k = 2 by default,
    where s is the sample std (ddof=1) of the m base-seed losses. s * sqrt(1 + 1/m) is the standard deviation of
    (one new single-seed run) - (mean of the m base seeds) when both have the same true loss, so a perturbed point
    that is truly equivalent to S falls below ``base_mean - band`` with probability ~ Phi(-k) (2.3 % for k = 2).
    With one base seed s is unknown: the band is 0 and the verdict says that noise was not estimated.
    """
    arr, _, std = _base_summary(base_losses)
    return float(k * std * math.sqrt(1.0 + 1.0 / arr.size)) if arr.size > 1 else 0.0


def pick_column(df: pd.DataFrame, *candidates: str) -> str:
    """The first of ``candidates`` that is a column of ``df`` (results tables use dotted names, e.g. ``optim.lr``)."""
    for c in candidates:
        if c in df.columns:
            return c
    raise KeyError(f"none of the columns {list(candidates)} in table with columns {list(df.columns)}")


def rank_table(
    perturbed: pd.DataFrame,
    base: Mapping[str, float],
    base_losses: Sequence[float],
    keys: Sequence[str] | None = None,
    loss_col: str = "loss",
    noise_k: float = NOISE_K,
) -> pd.DataFrame:
    """Table behind Figure 1 of [S]: one row per perturbed point plus one ``is_base`` row, sorted by loss.

    Args:
        perturbed: one row per perturbed run; columns ``keys`` (the hyperparameters) and ``loss_col``; other columns
            (trial id, status, ...) are carried through. Non-finite losses (diverged / crashed) are kept as failed.
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

    df.attrs.update(
        base_mean=base_mean,
        base_std=base_std,
        n_seeds=int(arr.size),
        noise_band=noise_band(arr, noise_k),
    )
    return df


# --------------------------------------------------------------------------------------------------------------
# Verdict
# --------------------------------------------------------------------------------------------------------------
def verdict(
    base_losses: Sequence[float],
    perturbed_losses: Sequence[float],
    alpha: float = 0.05,
    p: float = 0.05,
    noise_k: float = NOISE_K,
    count_failed_as_samples: bool = False,
) -> dict:
    """Apply the random-search test of [S] §3.1 (n >= log(alpha)/log(1-p)) honestly, with seed noise.

    Returns a dict with
      n_required, n_run (all perturbed runs), n_failed (NaN/inf losses: diverged or crashed), n_valid (finite),
      base_loss_mean, base_loss_std (ddof=1 when > 1 seed, else 0), n_seeds, noise_band (:func:`noise_band`:
      k * s * sqrt(1 + 1/m)), base_rank (1-based among n_run + 1 points, S at its mean loss, failed points last),
      n_better (finite perturbed losses < base mean), best_improvement (max over finite points of
      (base_mean - L) / base_mean, a fraction; negative when every point is worse, None when there is none),
      n_better_beyond_noise (losses < base_mean - noise_band), expected_beyond_noise_by_chance
      (n_valid * Phi(-noise_k): how many truly-equivalent points would land beyond the band by seed noise alone),
      verdict and a one-sentence ``statement``.

    Verdicts, checked in this order:
      "fail"              some perturbed point beats S by more than the noise band. More samples cannot undo this,
                          so it takes precedence over "insufficient".
      "insufficient"      fewer usable samples than n_required. Failed runs count as worse than S in the rank, but by
                          default they are not samples of the test (a crash or divergence says nothing about whether
                          S is in the top p of *trainable* points); set count_failed_as_samples=True to count them.
      "pass"              enough samples and none beats S: the strict test of [S] §3.1 holds, S is in the top-p
                          fraction of the neighbourhood with confidence 1 - alpha.
      "pass_within_noise" enough samples, some beat S but none beyond the noise band. The strict test does NOT
                          apply as stated; treating them as statistically equivalent is what [S] did (beaten by at
                          most 0.4 %).
    """
    base_losses = [float(x) for x in base_losses]
    _, base_mean, base_std = _base_summary(base_losses)
    m = len(base_losses)
    band = noise_band(base_losses, noise_k)
    losses = np.asarray(list(perturbed_losses), dtype=float)
    finite = np.isfinite(losses)
    n_run, n_failed = int(losses.size), int((~finite).sum())
    n_valid = n_run - n_failed
    n_samples = n_run if count_failed_as_samples else n_valid
    n_req = n_required(alpha, p)
    good = losses[finite]

    n_better = int((good < base_mean).sum())
    n_beyond = int((good < base_mean - band).sum())
    best_impr = float(((base_mean - good) / base_mean).max()) if good.size else None
    expected_chance = float(n_valid * 0.5 * math.erfc(noise_k / math.sqrt(2.0))) if m > 1 else None

    conf, top = f"{1 - alpha:.0%}", f"{p:.0%}"
    counts = f"{n_run} perturbed runs ({n_failed} failed), {n_required(alpha, p)} required"
    noise_txt = (
        f"noise band {band:.4g} = {noise_k:g} x std x sqrt(1+1/{m}) from {m} base seeds"
        if m > 1
        else "seed noise NOT estimated (1 base seed, band = 0)"
    )
    if n_beyond > 0:
        v = "fail"
        statement = (
            f"FAIL: {n_beyond} of {n_valid} finite perturbed points beat the base by more than the noise band "
            f"(best by {best_impr:.2%}; {noise_txt}); the base is not shown to be in the top {top}."
        )
        if expected_chance is not None:
            statement += f" (About {expected_chance:.1f} such points are expected by seed noise alone.)"
    elif n_samples < n_req:
        v = "insufficient"
        statement = (
            f"INSUFFICIENT: {n_samples} usable samples < {n_req} required for top-{top} at {conf} confidence "
            f"({counts}); no conclusion."
        )
    elif n_better == 0:
        v = "pass"
        statement = (
            f"PASS: the base beats all {n_samples} usable perturbed points ({counts}); by [S] §3.1 it lies in the "
            f"top {top} of its neighbourhood with {conf} confidence."
        )
    else:
        v = "pass_within_noise"
        statement = (
            f"PASS WITHIN NOISE: {n_better} of {n_valid} perturbed points beat the base, by at most {best_impr:.2%}, "
            f"all within the noise band ({noise_txt}). The strict test of [S] §3.1 does not apply as stated; "
            f"the base is statistically equivalent to the best points, as the paper concluded ({counts})."
        )

    return {
        "verdict": v,
        "statement": statement,
        "alpha": float(alpha),
        "p": float(p),
        "n_required": n_req,
        "n_run": n_run,
        "n_failed": n_failed,
        "n_valid": n_valid,
        "n_seeds": m,
        "base_loss_mean": base_mean,
        "base_loss_std": base_std,
        "noise_band": band,
        "base_rank": 1 + n_better,
        "n_better": n_better,
        "best_improvement": best_impr,
        "n_better_beyond_noise": n_beyond,
        "expected_beyond_noise_by_chance": expected_chance,
    }


# --------------------------------------------------------------------------------------------------------------
# LR transfer: optimum drift across widths
# --------------------------------------------------------------------------------------------------------------
LR_COLS = ("optim.lr", "lr")
WIDTH_COLS = ("model.width", "width")
PARAM_COLS = ("model.parametrization", "parametrization")
LOSS_COLS = ("val_loss", "loss")


def lr_optimum_drift(
    df: pd.DataFrame,
    lr_col: str | None = None,
    width_col: str | None = None,
    loss_col: str | None = None,
    param_col: str | None = None,
) -> dict[str, dict]:
    """Per parametrization: the best LR at each width and how far it moves from smallest to largest width.

    Columns default to the first present of: lr ``optim.lr``/``lr``, width ``model.width``/``width``, loss
    ``val_loss``/``loss``, parametrization ``model.parametrization``/``parametrization`` (absent -> one group "all").
    Several rows (seeds) at the same (width, lr) are averaged; non-finite (diverged) losses are dropped.

    Returns {parametrization: {"optimum_lr": {width: lr}, "optimum_loss": {width: loss}, "smallest_width",
    "largest_width", "drift_log2": log2(lr*(largest) / lr*(smallest)), "abs_drift_log2"}}. drift_log2 is the drift in
    factors of 2: muP should give ~0, SP typically a negative drift (optimum LR shrinks with width).
    """
    lr_col = lr_col or pick_column(df, *LR_COLS)
    width_col = width_col or pick_column(df, *WIDTH_COLS)
    loss_col = loss_col or pick_column(df, *LOSS_COLS)
    if param_col is None:
        param_col = next((c for c in PARAM_COLS if c in df.columns), None)
    d = df.copy()
    if param_col is None:
        param_col = "_parametrization"
        d[param_col] = "all"
    d = d[np.isfinite(d[loss_col].astype(float))]
    out: dict[str, dict] = {}
    for par, g in d.groupby(param_col, sort=True):
        mean = g.groupby([width_col, lr_col])[loss_col].mean().reset_index()
        opt_lr, opt_loss = {}, {}
        for w, gw in mean.groupby(width_col, sort=True):
            w = w.item() if isinstance(w, np.generic) else w  # plain Python keys (JSON-serialisable)
            i = gw[loss_col].to_numpy().argmin()
            opt_lr[w] = float(gw[lr_col].to_numpy()[i])
            opt_loss[w] = float(gw[loss_col].to_numpy()[i])
        widths = sorted(opt_lr)
        if not widths:
            continue
        drift = float(np.log2(opt_lr[widths[-1]] / opt_lr[widths[0]]))
        out[str(par)] = {
            "optimum_lr": opt_lr,
            "optimum_loss": opt_loss,
            "smallest_width": widths[0],
            "largest_width": widths[-1],
            "drift_log2": drift,
            "abs_drift_log2": abs(drift),
        }
    return out
