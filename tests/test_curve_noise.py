"""The framings' interval (``analysis.curve_noise`` through ``framings.compare_at``) against independent
computations: scipy's Welch interval where the curves pass through the compared cells, finite differences of a
refit for the delta method's sensitivities, the classical lack-of-fit F test written out, and its error rates in
simulation (a noisy size is charged its own spread only; a true power law is flagged at about the test's level)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ptsweep.analysis import curve_noise, framings
from ptsweep.analysis.fits import fit_scaling_law


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


def test_lack_of_fit_is_the_classical_f_test_on_log_loss():
    """Cells on no power law (5.2, 5.0, 4.3) with small seed noise: F = (sum m_k r_k^2 / (K - 2)) / (SS_pure /
    (n - K)) on ln loss, p from scipy's F distribution; the comparison through that curve is widened."""
    rng = np.random.default_rng(0)
    x, y = _runs([1e6, 2e6, 4e6], 3, np.full(3, 0.01), rng, shape=lambda v: np.select(
        [v < 1.5e6, v < 3e6], [5.2, 5.0], 4.3))
    c, fit = curve_noise.cells(x, y), fit_scaling_law(x, y, n_boot=0)
    logs = [np.log(y[x == v]) for v in c.x]
    resid = np.log([np.mean(y[x == v]) for v in c.x]) - np.log(fit["a"] * c.x ** -fit["b"])
    f = (3 * resid**2).sum() / 1 / (sum(((g - g.mean()) ** 2).sum() for g in logs) / (9 - 3))
    test = curve_noise.lack_of_fit(fit, c)
    assert test["F"] == pytest.approx(f, rel=1e-9) and (test["df1"], test["df2"]) == (1, 6)
    assert test["p"] == pytest.approx(stats.f.sf(f, 1, 6), rel=1e-6) and test["p"] < 0.05
    xb, yb = _runs([1e6, 2e6, 4e6], 3, np.full(3, 0.01), rng, shape=lambda v: law(v) + 0.4)
    (row,) = framings.compare_at(xb, yb, x, y, [2e6], names=("pt", "bert"))
    plain = curve_noise.difference_interval(fit_scaling_law(xb, yb, n_boot=0), curve_noise.cells(xb, yb), fit, c,
                                            [2e6], 0.95)
    assert list(row["lack_of_fit"]) == ["bert"] and row["hi"] - row["lo"] == pytest.approx(plain[0][3] - plain[0][2])
    assert row["se"] ** 2 > 100 * (np.var(y[x == 2e6], ddof=1) / 3)  # scaled by F >> 1, not the cell's own SE


def test_a_true_power_law_is_flagged_at_about_the_tests_level():
    rng = np.random.default_rng(7)
    flagged = 0
    for _ in range(400):
        x, y = _runs([1e6, 2e6, 4e6, 8e6], 3, np.full(4, 0.01), rng)
        t = curve_noise.lack_of_fit(fit_scaling_law(x, y, n_boot=0), curve_noise.cells(x, y))
        flagged += t["p"] < curve_noise.LACK_OF_FIT_ALPHA
    assert 0.02 <= flagged / 400 <= 0.09, flagged


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
