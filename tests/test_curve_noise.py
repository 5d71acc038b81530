"""The framings' interval (``analysis.curve_noise`` through ``framings.compare_at``) against independent
computations: scipy's Welch interval where the curves pass through the compared cells, finite differences of a
refit for the delta method's sensitivities, the classical lack-of-fit F test written out, and its error rates in
simulation (a noisy size is charged its own spread only; a true power law is flagged at about the test's level)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ptsweep.analysis import curve_noise, framings
from ptsweep.analysis.fits import fit_power_law, fit_scaling_law, predict


def law(x):
    return 5.0 * np.asarray(x, dtype=float) ** -0.1


def _runs(xs, seeds, sds, rng, shape=law):
    x = np.repeat(np.asarray(xs, dtype=float), seeds)
    return x, shape(x) + rng.normal(0, 1, x.size) * np.repeat(sds, seeds)


def test_two_cells_per_model_at_a_shared_x_is_welchs_interval_of_the_two_cells():
    """Both curves pass through their two cells, so at an x where both models have a cell D is the difference of
    those cells' seed means, and its interval is scipy's Welch interval of their seeds."""
    pt = {1e6: [4.61, 4.65, 4.60, 4.66], 4e6: [4.30, 4.31, 4.33]}  # decided at 1e6, not at 4e6
    bert = {1e6: [4.90, 4.80, 4.85], 4e6: [4.52, 4.20, 4.41, 4.60]}
    xa, ya = zip(*[(x, v) for x, vs in pt.items() for v in vs])
    xb, yb = zip(*[(x, v) for x, vs in bert.items() for v in vs])
    rows = framings.compare_at(xa, ya, xb, yb, [1e6, 4e6])
    for r, x in zip(rows, (1e6, 4e6)):
        ref = stats.ttest_ind(pt[x], bert[x], equal_var=False)
        ci = ref.confidence_interval(0.95)
        assert r["diff"] == pytest.approx(np.mean(pt[x]) - np.mean(bert[x]), rel=1e-9)
        assert (r["lo"], r["hi"], r["df"]) == (pytest.approx(ci.low), pytest.approx(ci.high), pytest.approx(ref.df))
        assert r["decided"] == ("a_lower" if ci.high < 0 else "undecided")


def test_the_pure_laws_sensitivities_are_the_refits_finite_differences():
    rng = np.random.default_rng(3)
    x, y = _runs([1e6, 2e6, 4e6, 8e6], 3, np.full(4, 0.02), rng)
    c = curve_noise.cells(x, y)
    fit = fit_scaling_law(x, y, n_boot=0)
    at = np.array([1.3e6, 3e6, 8e6])
    g = curve_noise.sensitivity(fit, c, at)

    def refit(means):  # log-log least squares through the cell means, written out with numpy
        slope, icpt = np.polyfit(np.log(c.x), np.log(means), 1)
        return np.exp(icpt) * at**slope

    h = 1e-6
    for k in range(c.x.size):
        up, down = c.mean.copy(), c.mean.copy()
        up[k] += h
        down[k] -= h
        assert g[k] == pytest.approx((refit(up) - refit(down)) / (2 * h), rel=1e-5)


def test_the_saturating_laws_sensitivities_are_the_refits_finite_differences():
    """The implicit-function derivative against central differences of scipy's refit, to 1e-5 of the largest
    (the Gauss-Newton approximation without the residuals' curvature term misses by ~1e-3 here)."""
    x = np.repeat(np.geomspace(1e4, 1e7, 6), 3)
    y = 2.0 + 50.0 * x**-0.25 + np.random.default_rng(0).normal(0, 0.02, x.size)
    fit = fit_scaling_law(x, y, n_boot=0)
    assert fit["form"] == "power_law_const"
    c, at = curve_noise.cells(x, y), np.array([2e4, 3e5, 5e6])
    g = curve_noise.sensitivity(fit, c, at)
    h, fd = 1e-3, np.empty_like(g)
    for k in range(c.x.size):
        up, down = c.mean.copy(), c.mean.copy()
        up[k] += h
        down[k] -= h
        fu, fdn = fit_power_law(c.x, up, with_const=True), fit_power_law(c.x, down, with_const=True)
        assert fu["form"] == fdn["form"] == "power_law_const"
        fd[k] = (predict(fu, at) - predict(fdn, at)) / (2 * h)
    assert np.abs(g - fd).max() < 1e-5 * np.abs(fd).max()


def test_a_one_seed_cell_leaves_the_x_it_moves_without_an_interval():
    """PT's smaller size has one seed: at its larger size the two-size curve does not depend on it (Welch's interval
    of the two cells there, scipy), between the sizes it does, and there is no interval."""
    pt = {1e6: [4.61], 4e6: [4.30, 4.31, 4.33]}
    bert = {1e6: [4.90, 4.80, 4.85], 4e6: [4.52, 4.40, 4.47]}
    xa, ya = zip(*[(x, v) for x, vs in pt.items() for v in vs])
    xb, yb = zip(*[(x, v) for x, vs in bert.items() for v in vs])
    at_cell, between = framings.compare_at(xa, ya, xb, yb, [4e6, 2e6])
    ci = stats.ttest_ind(pt[4e6], bert[4e6], equal_var=False).confidence_interval(0.95)
    assert (at_cell["lo"], at_cell["hi"]) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert np.isnan(between["lo"]) and between["reason"] == framings.NO_NOISE


def test_lack_of_fit_is_the_classical_weighted_f_test_on_log_loss():
    """Cells on no power law (5.2, 5.0, 4.3) with small seed noise and unequal seeds (2, 4, 3): F from the seed-count
    weighted least squares of ln ybar on ln x (normal equations written out) over the pure error of ln loss, p from
    scipy's F distribution; the comparison through that curve carries its variance as one term at K - p df."""
    rng = np.random.default_rng(0)
    x = np.repeat([1e6, 2e6, 4e6], [2, 4, 3])
    y = np.select([x < 1.5e6, x < 3e6], [5.2, 5.0], 4.3) + rng.normal(0, 0.01, x.size)
    c, fit = curve_noise.cells(x, y), fit_scaling_law(x, y, n_boot=0)
    m, lx = np.array([2, 4, 3]), np.log([1e6, 2e6, 4e6])
    ly = np.log([y[x == v].mean() for v in (1e6, 2e6, 4e6)])
    X = np.column_stack([np.ones(3), lx])
    beta = np.linalg.solve(X.T @ (m[:, None] * X), X.T @ (m * ly))
    pure = sum(((np.log(y[x == v]) - np.log(y[x == v]).mean()) ** 2).sum() for v in (1e6, 2e6, 4e6))
    f = (m * (ly - X @ beta) ** 2).sum() / 1 / (pure / (9 - 3))
    test = curve_noise.lack_of_fit(fit, c)
    assert test["F"] == pytest.approx(f, rel=1e-9) and (test["df1"], test["df2"]) == (1, 6)
    assert test["p"] == pytest.approx(stats.f.sf(f, 1, 6), rel=1e-6) and test["p"] < 0.05
    xb, yb = _runs([1e6, 2e6, 4e6], 3, np.full(3, 0.01), rng, shape=lambda v: law(v) + 0.4)
    (row,) = framings.compare_at(xb, yb, x, y, [2e6], names=("pt", "bert"))
    assert list(row["lack_of_fit"]) == ["bert"]
    ga = curve_noise.sensitivity(fit, c, [2e6])[:, 0]
    widened = test["F"] * sum(ga[k] ** 2 / m[k] * np.var(y[x == v], ddof=1) for k, v in enumerate((1e6, 2e6, 4e6)))
    (pt_terms,) = curve_noise.terms(fit_scaling_law(xb, yb, n_boot=0), curve_noise.cells(xb, yb), [2e6])
    u = [widened] + [t[0] for t in pt_terms]
    df = sum(u) ** 2 / (widened**2 / 1 + sum(t[0] ** 2 / t[1] for t in pt_terms))
    assert row["se"] == pytest.approx(np.sqrt(sum(u)), rel=1e-9) and row["df"] == pytest.approx(df, rel=1e-9)


@pytest.mark.parametrize("seeds", [(3, 3, 3, 3), (2, 8, 2, 4)])
def test_a_true_power_law_is_flagged_at_about_the_tests_level(seeds):
    rng = np.random.default_rng(7)
    flagged = 0
    for _ in range(400):
        x = np.repeat([1e6, 2e6, 4e6, 8e6], seeds)
        y = law(x) * np.exp(rng.normal(0, 0.01, x.size))
        t = curve_noise.lack_of_fit(fit_scaling_law(x, y, n_boot=0), curve_noise.cells(x, y))
        flagged += t["p"] < curve_noise.LACK_OF_FIT_ALPHA
    assert 0.02 <= flagged / 400 <= 0.09, flagged


def test_seeds_without_spread_give_no_interval_and_a_lossless_size_is_outside_the_range():
    """Identical seeds at every size (a seed that changes nothing) decide nothing, even where the curve misses its
    cells; a size whose every run failed does not count toward the baseline's measured range."""
    x = np.repeat([1e6, 2e6, 4e6], 2)
    flat = np.repeat([5.0, 5.2, 4.6], 2)  # no power law, no seed spread
    xb, yb = _runs([1e6, 2e6, 4e6], 2, np.full(3, 0.01), np.random.default_rng(0))
    rows = framings.compare_at(xb, yb, x, flat, [1e6, 2e6, 4e6])
    assert all(np.isnan(r["lo"]) and r["reason"] == framings.NO_NOISE for r in rows)
    failed = np.where(x == 1e6, np.nan, law(x) * (1 + np.array([1, -1] * 3) * 1e-3))
    (row,) = framings.compare_at(xb, yb, x, failed, [1e6])
    assert row["decided"] == "extrapolated" and not row["in_range_b"]


def test_a_noisy_size_of_equal_curves_is_not_decided_beyond_the_nominal_rate():
    """Equal laws, the baseline's seeds spread 20x wider at its smallest size than elsewhere (4 seeds): PT's x at
    the smallest sizes is decided no more often than the 5 % a 95 % interval allows (a variance pooled over the
    sizes decided it 17-33 % of the time)."""
    rng = np.random.default_rng(11)
    xs = np.array([1e6, 2e6, 4e6])
    decided = 0
    for _ in range(300):
        xa, ya = _runs(xs, 4, np.full(3, 0.01), rng)
        xb, yb = _runs(xs * 1.05, 4, np.array([0.2, 0.01, 0.01]), rng)
        rows = framings.compare_at(xa, ya, xb, yb, xs[:2])
        decided += sum(r["decided"] != "undecided" for r in rows)
    assert decided / 600 <= 0.06, decided
