"""The seed-blocked least squares of ptsweep.analysis.blocked_fit against independent computations: the closed forms
of the complete randomized-block design, the normal equations under another coding of the blocks, and a contrast the
design cannot identify."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ptsweep.analysis.blocked_fit import fit_blocked, seed_block_columns, t_ppf


def _indicators(codes: np.ndarray, k: int) -> np.ndarray:
    return (codes[:, None] == np.arange(k)).astype(float)


def test_complete_block_design_matches_two_way_anova_closed_forms():
    rng = np.random.default_rng(0)
    groups, seeds = 4, 5
    y = rng.normal(5.0, 0.1, (groups, seeds)) + rng.normal(0, 0.3, seeds)[None, :]  # (G, S): seed effects shared
    g_code, s_code = np.repeat(np.arange(groups), seeds), np.tile(np.arange(seeds), groups)
    fit = fit_blocked(_indicators(g_code, groups), y.ravel(), s_code + 10)  # seed labels need not start at 0
    interaction = y - y.mean(1, keepdims=True) - y.mean(0, keepdims=True) + y.mean()
    sigma = math.sqrt((interaction**2).sum() / ((groups - 1) * (seeds - 1)))
    assert fit.df == (groups - 1) * (seeds - 1)
    assert fit.sigma == pytest.approx(sigma, rel=1e-10)
    weights = np.array([[-1.0, 1.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 1.0]])
    est, se, ok = fit.contrasts(weights)
    assert ok.all()
    np.testing.assert_allclose(est, [y[1].mean() - y[0].mean(), y[3].mean() - y[0].mean()], rtol=1e-10)
    np.testing.assert_allclose(se, sigma * math.sqrt(2 / seeds), rtol=1e-10)
    seed_means = y.mean(0)
    np.testing.assert_allclose(fit.seed_effect.reshape(groups, seeds), np.tile(seed_means - seed_means[0], (groups, 1)),
                               atol=1e-10)


def test_incomplete_design_matches_normal_equations_with_the_last_seed_as_reference():
    rng = np.random.default_rng(1)
    n = 40
    t = rng.uniform(-2, 2, n)
    seeds = rng.integers(0, 4, n)
    y = 1.0 + 0.5 * t + 0.3 * t**2 + np.array([0.0, 0.2, -0.1, 0.4])[seeds] + rng.normal(0, 0.05, n)
    effects = np.column_stack([np.ones(n), t, t**2])
    fit = fit_blocked(effects, y, seeds)
    X = np.column_stack([effects, _indicators(seeds, 4)[:, :3]])  # blocks coded against the LAST seed
    xtx_inv = np.linalg.inv(X.T @ X)
    beta = xtx_inv @ X.T @ y
    resid = y - X @ beta
    sigma2 = resid @ resid / (n - X.shape[1])
    assert fit.df == n - 6 and fit.full_rank
    np.testing.assert_allclose(fit.effects[1:], beta[1:3], rtol=1e-9)  # slope and curvature: same in any coding
    np.testing.assert_allclose(fit.cov()[1:, 1:], sigma2 * xtx_inv[1:3, 1:3], rtol=1e-8)
    np.testing.assert_allclose(fit.resid, resid, atol=1e-10)


def test_unpaired_design_is_group_means_with_pooled_sd():
    runs = [np.array([5.0, 5.2, 5.1]), np.array([4.9, 5.3])]
    code = np.array([0, 0, 0, 1, 1])
    fit = fit_blocked(_indicators(code, 2), np.concatenate(runs), None)
    pooled = math.sqrt((np.var(runs[0], ddof=1) * 2 + np.var(runs[1], ddof=1)) / 3)
    est, se, _ = fit.contrasts(np.array([[-1.0, 1.0]]))
    assert fit.df == 3 and fit.sigma == pytest.approx(pooled, rel=1e-12)
    assert est[0] == pytest.approx(runs[1].mean() - runs[0].mean(), rel=1e-12)
    assert se[0] == pytest.approx(pooled * math.sqrt(1 / 3 + 1 / 2), rel=1e-12)


def test_a_contrast_the_seeds_confound_is_flagged_not_estimated():
    # point 1 ran only at seed 2, which nothing else used: its effect and seed 2's cannot be told apart
    code, seeds = np.array([0, 0, 1, 2, 2]), np.array([0, 1, 2, 0, 1])
    fit = fit_blocked(_indicators(code, 3), [5.0, 5.1, 4.0, 5.2, 5.4], seeds)
    est, se, ok = fit.contrasts(np.array([[-1.0, 1.0, 0.0], [-1.0, 0.0, 1.0]]))
    assert ok.tolist() == [False, True]
    assert math.isnan(est[0]) and se[0] == math.inf
    assert est[1] == pytest.approx(0.25, rel=1e-12)  # paired differences 0.2 and 0.3
    assert seed_block_columns(None, 3).shape == (3, 0) and seed_block_columns([7, 7, 7], 3).shape == (3, 0)


def test_t_quantile_table_values():
    assert t_ppf(0.975, 10) == pytest.approx(2.228138851986274, rel=1e-12)
    assert t_ppf(0.95, 1) == pytest.approx(6.313751514675043, rel=1e-12)
    assert t_ppf(0.975, math.inf) == pytest.approx(1.959963984540054, rel=1e-12)  # the normal quantile
