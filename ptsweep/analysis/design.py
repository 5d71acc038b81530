"""Design of the random-search verification of hyperparameter transfer ([S] §3.1, spec §10): how many perturbed
points (if S beats all n, it lies in the top-p fraction of its neighbourhood with confidence 1 - alpha when
1 - (1 - p)^n >= 1 - alpha: alpha = p = 0.05 gives 59, the paper ran 62), where they lie (+-20 % per coordinate)
and how far they are from the base point. numpy only: the planner imports this module.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Mapping

import numpy as np


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
    a, q = Fraction(repr(float(alpha))), 1 - Fraction(repr(float(p)))  # the decimals typed: 0.05 -> 1/20
    n = max(1, math.ceil(math.log(alpha) / math.log1p(-p)))
    while q**n > a:  # float estimate too small
        n += 1
    while n > 1 and q ** (n - 1) <= a:  # float estimate too large (e.g. ratio exactly an integer)
        n -= 1
    return n


def perturb(base: Mapping[str, float], n: int, rel: float = 0.2, seed: int = 0) -> list[dict[str, float]]:
    """n perturbed points around ``base``: S'_i = S_i (1 + u_i), u_i ~ Uniform[-rel, +rel] independently ([S] §3.1),
    a pure function of ``seed``; keys in the order of ``base``. A perturbed ``optim.lr`` is the base LR, before any
    per-group muP rule (spec §10)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not (0.0 <= rel < 1.0):
        raise ValueError(f"rel must be in [0, 1), got {rel}")
    keys = list(base)
    values = np.array([float(base[k]) for k in keys], dtype=float)  # (K,)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"base values must be finite, got {dict(base)}")
    pts = values * (1.0 + np.random.default_rng(seed).uniform(-rel, rel, size=(n, len(keys))))  # (n, K)
    return [{k: float(v) for k, v in zip(keys, row)} for row in pts]


def distance(point: Mapping[str, float], base: Mapping[str, float]) -> float:
    """D(S', S) = sqrt(sum_i ((S'_i - S_i) / S_i)^2) over the keys of ``base`` ([S] §3.1, eq. for D); S_i = 0 raises
    ValueError."""
    total = 0.0
    for k, s in base.items():
        s = float(s)
        if s == 0.0:
            raise ValueError(f"distance is undefined for a zero base coordinate ({k})")
        total += ((float(point[k]) - s) / s) ** 2
    return math.sqrt(total)
