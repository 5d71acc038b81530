"""Basin, window and cliff of a loss-vs-LR curve (ptsweep.analysis.basin) against closed forms.

The curves are parabolas in log2(LR), L(k) = L0 + a (k - c)^2 on the grid x = 2^k, k = 0..K-1, whose answers follow
from solving the inequalities by hand: within tol of the best <=> |k - c| <= sqrt(tol L0 / a) (c on the grid), and
worse than a reference R <=> |k - c| > sqrt((R - L0) / a)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ptsweep.analysis import basin


def _parabola(l0: float, a: float, c: int, k_max: int = 9):
    ks = np.arange(k_max)
    return 2.0 ** ks, l0 + a * (ks - c) ** 2


@pytest.mark.parametrize("a, c", [(0.04, 4), (0.01, 4), (0.01, 1), (0.2, 6)])
def test_basin_matches_the_closed_form(a, c):
    x, y = _parabola(5.0, a, c)
    half = math.floor(math.sqrt(0.02 * 5.0 / a) + 1e-12)   # largest |k - c| inside 2 %
    lo_k, hi_k = max(0, c - half), min(8, c + half)
    b = basin.basin(x[::-1], y[::-1], tol=0.02)            # input order must not matter
    assert b["x_opt"] == 2.0 ** c and b["loss_opt"] == pytest.approx(5.0)
    assert (b["lo"], b["hi"]) == (2.0 ** lo_k, 2.0 ** hi_k)
    assert b["width_log2"] == pytest.approx(hi_k - lo_k)
    assert b["lo_is_edge"] == (lo_k == 0) and b["hi_is_edge"] == (hi_k == 8)


def test_basin_stops_at_the_first_point_outside():
    """A second dip beyond a bump is not part of the optimum's basin (contiguous grid values only)."""
    x = [1, 2, 4, 8, 16]
    y = [5.0, 5.05, 6.0, 5.01, 7.0]
    b = basin.basin(x, y, tol=0.02)
    assert (b["lo"], b["hi"]) == (1.0, 2.0) and b["lo_is_edge"] and not b["hi_is_edge"]


def test_basin_ignores_failed_runs():
    b = basin.basin([1, 2, 4], [math.nan, 5.0, 5.05])
    assert (b["lo"], b["hi"], b["x_opt"]) == (2.0, 4.0, 2.0)
    assert basin.basin([1, 2], [math.nan, math.inf]) == {}


@pytest.mark.parametrize("a, passed", [(0.019, True), (0.021, False)])
def test_window_at_half_and_twice_the_optimum(a, passed):
    """L(c +- 1) = 5 (1 + a): the relative rise at x*/2 and 2 x* is a, inside 2 % exactly when a <= 0.02."""
    x, y = _parabola(5.0, a * 5.0, 4)
    w = basin.window(x, y, factor=2.0, tol=0.02)
    assert w["rise_lo"] == pytest.approx(a) and w["rise_hi"] == pytest.approx(a)
    assert w["passed"] is passed


def test_window_is_undecided_when_an_end_was_not_run():
    x, y = _parabola(5.0, 0.01, 0)                           # optimum on the grid's low end: x*/2 never ran
    w = basin.window(x, y)
    assert w["passed"] is None and math.isnan(w["loss_lo"]) and w["rise_hi"] == pytest.approx(0.002)


@pytest.mark.parametrize("reference", [5.3, 5.9, 100.0])
def test_cliff_matches_the_closed_form(reference):
    x, y = _parabola(5.0, 0.1, 4)
    d = math.floor(math.sqrt((reference - 5.0) / 0.1)) + 1   # first |k - c| with L > reference
    c = basin.cliff(x, y, reference)
    if 4 + d <= 8:
        assert c["above"] == 2.0 ** (4 + d) and c["above_log2"] == pytest.approx(d)
    else:
        assert c["above"] is None and math.isnan(c["above_log2"])
    if 4 - d >= 0:
        assert c["below"] == 2.0 ** (4 - d) and c["below_log2"] == pytest.approx(-d)
    else:
        assert c["below"] is None


def test_window_needs_both_ends_inside():
    """Flat below the optimum, a wall above: the window fails on the high side alone."""
    w = basin.window([1, 2, 4, 8], [5.01, 5.0, 5.5, 6.0], factor=2.0, tol=0.02)
    assert w["rise_lo"] == pytest.approx(0.002) and w["rise_hi"] == pytest.approx(0.1) and w["passed"] is False


def test_cliff_never_names_the_optimum_itself():
    """When even the best run is worse than the reference, the cliff is the next value out, not x*."""
    c = basin.cliff([1, 2, 4], [7.0, 6.5, 7.5], reference=6.0)
    assert (c["above"], c["below"]) == (4.0, 1.0)


def test_cliff_around_a_given_optimum():
    """y = -context gain, reference 0: the values next to the loss optimum x* = 4 where no context was learned."""
    x, gain = [1, 2, 4, 8, 16], [-0.1, 0.3, 0.8, 0.2, -0.2]
    c = basin.cliff(x, [-g for g in gain], 0.0, x_opt=4.0)
    assert (c["below"], c["above"], c["above_log2"]) == (1.0, 16.0, pytest.approx(2.0))
    dip = basin.cliff([1, 2, 4], [-0.5, 0.1, -0.8], 0.0, x_opt=1.0)  # x* = 1 given, not the argmin 4
    assert (dip["below"], dip["above"]) == (None, 2.0)
