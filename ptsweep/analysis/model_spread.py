"""Differences between two models at one scale with each cell's own seed spread, and the seeds that would decide one.

A cell (model, scale) is charged its own seed variance ``s^2`` with ``df`` = seeds - 1 (:func:`cell_spreads`). The
difference of two cells' seed means is compared by Welch's interval with those two variances:

    se^2 = s_a^2 / m_a + s_b^2 / m_b,   df = se^4 / ((s_a^2 / m_a)^2 / df_a + (s_b^2 / m_b)^2 / df_b)

(Welch-Satterthwaite): a cell whose seeds agree is not charged another cell's spread - neither another model's, as
a variance pooled over every cell would be, nor its own model's at another scale (a baseline whose seeds leave a
plateau far apart at one width only). A cell with one seed, or with identical seeds on both sides, has no seed noise
of its own and gets no interval (NO_SPREAD): another scale's spread is no measure of it, since the spread is what
changes between scales.
"""

from __future__ import annotations

import bisect
import math
from typing import Sequence

import numpy as np

from ptsweep.analysis.blocked_fit import t_ppf, welch_interval
from ptsweep.analysis.fits import pooled_seed_variance

NO_SPREAD = ("undecided: a side has one seed at this scale (or both sides identical seeds), so there is no seed noise "
             "to put an interval on")
MAX_SEEDS = 10_000
"""Seed counts beyond this are reported as "more than" (a difference too small for its spreads)."""
NONE = (math.nan, 0)
"""The spread of a cell without runs: no variance, no degrees of freedom."""


def cell_spreads(runs) -> dict[tuple[str, str], tuple[float, int]]:
    """{(series, scale): (seed variance, df)} of a runs table (one row per run: series, scale, loss), from the cell's
    finite seeds ((NaN, 0) with fewer than two)."""
    return {(str(series), str(int(scale))): pooled_seed_variance([c["loss"].tolist()])
            for (series, scale), c in runs.groupby(["series", "scale"])}


def seed_losses(runs, series: str, scale) -> list[float]:
    """One loss per seed of ``series`` at ``scale`` (rows of the runs table)."""
    return runs[(runs["series"] == series) & (runs["scale"] == scale)]["loss"].tolist()


def per_scale(runs, spreads: dict[tuple[str, str], tuple[float, int]], a: str, b: str, scales) -> dict[str, dict]:
    """{scale: :func:`spread_ci` of series ``a``'s seed losses against ``b``'s} over ``scales``, each cell charged its
    own spread (``spreads``: :func:`cell_spreads` of ``runs``)."""
    return {str(s): spread_ci(seed_losses(runs, a, s), seed_losses(runs, b, s), spreads.get((a, str(s)), NONE),
                              spreads.get((b, str(s)), NONE)) for s in scales}


def _finite(v: Sequence[float]) -> np.ndarray:
    return np.asarray([x for x in v if math.isfinite(x)], dtype=float)


def spread_ci(a: Sequence[float], b: Sequence[float], spread_a: tuple[float, int], spread_b: tuple[float, int],
              level: float = 0.95) -> dict:
    """mean(a) - mean(b) with the Welch-Satterthwaite interval of the module docstring; ``spread_*`` = (variance,
    df) of each cell (:func:`cell_spreads`). Returns {"diff", "se", "df", "lo", "hi", "n_a", "n_b", "sd_a", "sd_b",
    "decided": "a_lower" | "b_lower" | "undecided", "seeds_to_decide", "seeds_80"} (nan where a side has no finite
    loss or no spread, the latter with ``no_noise`` and ``reason`` NO_SPREAD; the seed counts of
    :func:`seeds_to_decide` at power 0.5 and 0.8, None when decided)."""
    a, b = _finite(a), _finite(b)
    (va, dfa), (vb, dfb) = spread_a, spread_b
    out = {"diff": math.nan, "se": math.nan, "df": math.nan, "lo": math.nan, "hi": math.nan, "n_a": int(a.size),
           "n_b": int(b.size), "sd_a": math.sqrt(va) if va >= 0 else math.nan,
           "sd_b": math.sqrt(vb) if vb >= 0 else math.nan, "decided": "undecided", "seeds_to_decide": None,
           "seeds_80": None}
    if not a.size or not b.size:
        return out
    out["diff"] = diff = float(a.mean() - b.mean())
    if not (dfa and dfb and math.isfinite(va) and math.isfinite(vb)) or va + vb == 0:  # no seed noise to judge by
        return {**out, "no_noise": True, "reason": NO_SPREAD}
    se, df, lo, hi = welch_interval(diff, va / a.size, dfa, vb / b.size, dfb, level)
    decided = "a_lower" if hi < 0 else ("b_lower" if lo > 0 else "undecided")
    out.update(se=se, df=df, lo=lo, hi=hi, decided=decided,
               seeds_to_decide=None if decided != "undecided" else seeds_to_decide(diff, va, vb, level),
               seeds_80=None if decided != "undecided" else seeds_to_decide(diff, va, vb, level, power=0.8))
    if decided == "undecided":
        out["one_side"] = one_side_seeds(diff, (va, a.size), (vb, b.size), level)
    return out


def one_side_seeds(diff: float, side_a: tuple[float, int], side_b: tuple[float, int],
                   level: float = 0.95) -> dict | None:
    """The cheaper way to decide ``diff`` by seeds of one side only, the other kept at its seeds: {"side": "a" | "b",
    "seeds": m, "seeds_80": m80} with m the smallest total seed count of that side whose Welch interval (``side_*`` =
    (variance, seeds)) at the measured difference excludes 0 (m80: at 80 % power, as :func:`seeds_to_decide`); the
    side with the smaller m, None when neither side alone decides within :data:`MAX_SEEDS`."""
    best = None
    for side, (v_more, n_more), (v_kept, n_kept) in (("a", side_a, side_b), ("b", side_b, side_a)):
        counts = [_one_side_count(diff, v_more, n_more, v_kept, n_kept, level, p) for p in (0.5, 0.8)]
        if counts[0] is not None and (best is None or counts[0] < best["seeds"]):
            best = {"side": side, "seeds": counts[0], "seeds_80": counts[1]}
    return best


def _one_side_count(diff: float, v_more: float, n_more: int, v_kept: float, n_kept: int, level: float,
                    power: float) -> int | None:
    """Smallest m >= n_more with (t_df + t_power) se(m) < |diff|, se(m)^2 = v_kept / n_kept + v_more / m and df
    Welch-Satterthwaite's; None when none up to :data:`MAX_SEEDS` (v_kept / n_kept alone too wide)."""
    if not (math.isfinite(diff) and diff != 0 and n_kept >= 2 and n_more >= 1):
        return None

    def decides(m: int) -> bool:
        se, df, _, _ = welch_interval(diff, v_more / m, m - 1, v_kept / n_kept, n_kept - 1, level)
        return _excludes_zero(diff, se, df, level, power)

    return _first_count(decides, max(n_more, 2))


def _excludes_zero(diff: float, se: float, df: float, level: float, power: float) -> bool:
    """(t_df((1 + level) / 2) + t_df(power)) se < |diff|, the t_power term only above power 0.5: an interval at
    ``level`` around ``diff`` clears 0 (with the margin that makes a true ``diff`` clear it at ``power``)."""
    extra = t_ppf(power, df) if power > 0.5 else 0.0
    return (t_ppf(0.5 + level / 2, df) + extra) * se < abs(diff)


def _first_count(decides, lo: int) -> int | None:
    """The smallest n in [lo, MAX_SEEDS] with ``decides(n)`` (which turns True once and stays), None when none."""
    if not decides(MAX_SEEDS):
        return None
    return lo + bisect.bisect_left(range(lo, MAX_SEEDS + 1), True, key=decides)


def seeds_to_decide(diff: float, var_a: float, var_b: float, level: float = 0.95, power: float = 0.5) -> int | None:
    """Smallest n (seeds per model) with (t_{df(n)} + t_power) sqrt((var_a + var_b) / n) < |diff|, df(n) = (n - 1)
    (var_a + var_b)^2 / (var_a^2 + var_b^2) (Welch with n seeds each at these variances); None when no n up to
    :data:`MAX_SEEDS` does (e.g. diff = 0). At ``power`` 0.5 (t_power = 0) the interval at the measured difference
    just excludes 0, which a true difference of that size reaches about half the time; at 0.8, about 80 % of the
    time (the usual approximation, without the t distribution's noncentrality)."""
    total = var_a + var_b
    if not (math.isfinite(diff) and math.isfinite(total)) or diff == 0:
        return None
    if total == 0:
        return 2

    def decides(n: int) -> bool:
        df = (n - 1) * total**2 / (var_a**2 + var_b**2)
        return _excludes_zero(diff, math.sqrt(total / n), df, level, power)

    return _first_count(decides, 1)
