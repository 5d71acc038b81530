"""How wide is an LR optimum, and where does training break? Pure functions of one loss-vs-LR curve.

On a grid ``x`` (ascending, e.g. factors of 2 apart) with loss ``y`` (seed means), for the optimum x* = argmin y:

- **basin** (``tol`` = 2 %): the contiguous grid values around x* with y <= (1 + tol) y(x*), its width in factors
  of 2, and whether it touches the grid's ends (then the true basin may be wider: a bound);
- **window** [x*/f, f x*] (``f`` = 2): passes when both ends are on the grid and inside the basin's tolerance;
- **cliff** (``reference`` = the unigram loss): the nearest grid values above and below x* where the run ends worse
  than the reference (the model lost even the token statistics); with y = -context gain and reference 0: where it
  learned no context.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def _curve(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) as float arrays sorted by x, with the non-finite losses dropped."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    order = np.argsort(xs)
    xs, ys = xs[order], ys[order]
    keep = np.isfinite(ys)
    return xs[keep], ys[keep]


def basin(x: Sequence[float], y: Sequence[float], tol: float = 0.02) -> dict:
    """The grid values around the optimum within ``tol`` (relative) of the best loss (module docstring):
    {"x_opt", "loss_opt", "lo", "hi", "width_log2", "lo_is_edge", "hi_is_edge"}; {} without a finite loss."""
    xs, ys = _curve(x, y)
    if not len(xs):
        return {}
    i = int(np.argmin(ys))
    limit = ys[i] * (1.0 + tol)
    lo = i
    while lo > 0 and ys[lo - 1] <= limit:
        lo -= 1
    hi = i
    while hi < len(xs) - 1 and ys[hi + 1] <= limit:
        hi += 1
    return {"x_opt": float(xs[i]), "loss_opt": float(ys[i]), "lo": float(xs[lo]), "hi": float(xs[hi]),
            "width_log2": math.log2(xs[hi] / xs[lo]), "lo_is_edge": lo == 0, "hi_is_edge": hi == len(xs) - 1}


def window(x: Sequence[float], y: Sequence[float], factor: float = 2.0, tol: float = 0.02) -> dict:
    """Is the loss within ``tol`` of the best at both x*/factor and factor x*? {"x_opt", "loss_lo", "loss_hi",
    "rise_lo", "rise_hi" (relative to the best), "passed" (None when an end was not run)}."""
    xs, ys = _curve(x, y)
    if not len(xs):
        return {"passed": None}
    i = int(np.argmin(ys))
    out: dict = {"x_opt": float(xs[i])}
    for side, target in (("lo", xs[i] / factor), ("hi", xs[i] * factor)):
        at = np.isclose(xs, target, rtol=1e-3)
        out[f"loss_{side}"] = float(ys[at][0]) if at.any() else math.nan
        out[f"rise_{side}"] = out[f"loss_{side}"] / ys[i] - 1.0
    rises = (out["rise_lo"], out["rise_hi"])
    out["passed"] = None if any(math.isnan(r) for r in rises) else bool(max(rises) <= tol)
    return out


def cliff(x: Sequence[float], y: Sequence[float], reference: float, x_opt: float | None = None) -> dict:
    """The nearest grid values above and below the optimum whose ``y`` exceeds ``reference`` (module docstring):
    {"above", "below" (None when no such value was run), "above_log2", "below_log2" (distance from x* in factors
    of 2)}. x* is argmin y, or ``x_opt`` when given (e.g. the loss optimum when ``y`` is minus the context gain)."""
    xs, ys = _curve(x, y)
    if not len(xs) or not math.isfinite(reference):
        return {"above": None, "below": None, "above_log2": math.nan, "below_log2": math.nan}
    i = int(np.argmin(ys)) if x_opt is None else int(np.argmin(np.abs(np.log(xs / x_opt))))
    broken = ys > reference
    above = next((float(xs[j]) for j in range(i + 1, len(xs)) if broken[j]), None)
    below = next((float(xs[j]) for j in range(i - 1, -1, -1) if broken[j]), None)
    return {"above": above, "below": below,
            "above_log2": math.log2(above / xs[i]) if above else math.nan,
            "below_log2": math.log2(below / xs[i]) if below else math.nan}
