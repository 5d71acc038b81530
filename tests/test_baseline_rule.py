"""The cheaper baseline LR rule of scaling-curves: its power-law extrapolation against closed forms, its local LR
points, which scales it searches and how many trials it plans (the sweep running it: test_baseline_rule_run.py)."""

import math

import numpy as np
import pytest

from ptsweep.analysis import fits
from ptsweep.config import compose, with_overrides
from ptsweep.sweeps import baseline_rule


def test_power_law_through_exact_points_is_recovered_and_extrapolated_exactly():
    a, b = 0.5, 0.3
    sizes = [1e6, 4e6, 1.6e7]
    fit = fits.fit_power_law(sizes, [a * p ** -b for p in sizes])
    assert fit["a"] == pytest.approx(a, rel=1e-9) and fit["b"] == pytest.approx(b, rel=1e-9)
    assert fits.predict(fit, 1e9) == pytest.approx(a * 1e9 ** -b, rel=1e-9)


def test_power_law_through_noisy_points_is_the_log_log_least_squares_line():
    """Against the normal equations of log eta = log a - b log P, written out by hand."""
    sizes = np.array([2e6, 5e6, 1.1e7, 3e7])
    lrs = np.array([1.9e-3, 1.1e-3, 9.0e-4, 5.2e-4])
    x, y = np.log(sizes), np.log(lrs)
    slope = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
    intercept = y.mean() - slope * x.mean()
    fit = fits.fit_power_law(sizes, lrs)
    assert fit["b"] == pytest.approx(-slope, rel=1e-9) and fit["a"] == pytest.approx(math.exp(intercept), rel=1e-9)
    assert fits.predict(fit, 1e8) == pytest.approx(math.exp(intercept + slope * math.log(1e8)))


def test_two_points_give_the_line_through_them_and_one_point_is_an_error():
    fit = fits.fit_power_law([1e6, 1e7], [2e-3, 1e-3])
    assert fit["b"] == pytest.approx(math.log(2) / math.log(10))
    with pytest.raises(ValueError, match="need >= 2 distinct"):
        fits.fit_power_law([1e6], [2e-3])


def test_local_lrs_are_centred_geometric_steps():
    assert baseline_rule.local_lrs(1e-3, 3, 2.0) == pytest.approx([5e-4, 1e-3, 2e-3])
    assert baseline_rule.local_lrs(1e-3, 2, 4.0) == pytest.approx([5e-4, 2e-3])  # centred between the two
    assert baseline_rule.local_lrs(1e-3, 1, 2.0) == pytest.approx([1e-3])
    with pytest.raises(ValueError, match="positive and finite"):
        baseline_rule.local_lrs(math.nan, 3, 2.0)


def test_local_search_extrapolates_the_searched_best_lrs_and_keeps_the_largest_searched_warmup():
    cfg = compose(["preset=paper", "sweep.baseline.rule=extrapolate", "sweep.baseline.local_factor=3"])
    searched = {1e6: {"optim.lr": 3e-3, "optim.warmup_frac": 0.05},
                4e6: {"optim.lr": 1.5e-3, "optim.warmup_frac": 0.08},
                1.6e7: {"optim.lr": 7.5e-4, "optim.warmup_frac": 0.11}}
    out = baseline_rule.local_search(cfg, searched, 6.4e7)  # a halving per 4x: the next is 3.75e-4
    assert out["lr_hat"] == pytest.approx(3.75e-4, rel=1e-9)
    assert out["lrs"] == pytest.approx([1.25e-4, 3.75e-4, 1.125e-3], rel=1e-9)
    assert out["warmup_frac"] == 0.11


def test_searched_scales_and_trials_per_rule():
    paper = compose(["preset=paper"])  # scales 256 .. 3072, 64 TPE trials each
    assert baseline_rule.searched_scales(paper) == [256, 512, 768, 1024, 1536, 2048, 3072]
    assert [baseline_rule.search_runs(paper, s) for s in paper.sweep.scales] == [64] * 7
    cheap = with_overrides(paper, {"sweep.baseline.rule": "extrapolate", "sweep.baseline.search_scales": 2,
                                   "sweep.baseline.local_points": 4})
    assert baseline_rule.searched_scales(cheap) == [256, 512]
    assert [baseline_rule.search_runs(cheap, s) for s in cheap.sweep.scales] == [64, 64, 4, 4, 4, 4, 4]
    cheap.sweep.baseline.grid = [1e-4, 3e-4, 1e-3]  # the grid mode's field (a fixed LR list): one trial per LR
    assert [baseline_rule.search_runs(cheap, s) for s in cheap.sweep.scales] == [3, 3, 4, 4, 4, 4, 4]
    assert "3 grid LRs at scales 256, 512" in baseline_rule.describe(cheap)


def test_the_planned_search_trials_train_the_search_budget_at_the_search_seed():
    cfg = compose(["preset=demo", "sweep.baseline.rule=extrapolate", "sweep.baseline.search_scales=2"])
    trials = baseline_rule.planned_search(cfg, "scaling-curves", "bert", 128, cfg.model)
    assert len(trials) == cfg.sweep.baseline.local_points
    assert {t.stage for t in trials} == {"search"}
    assert {t.tokens for t in trials} == {cfg.sweep.baseline.search_frac * cfg.train.tokens}
    assert {t.seed for t in trials} == {cfg.seed + cfg.sweep.seeds}  # no reported run trains at it
    assert trials[0].label == "local-bert-w128-0"


def test_scaling_curves_plans_the_rules_trials_and_pt_runs_only_with_pt():
    """The plan written out by hand: per baseline, 2 searched scales x the grid's 3 LRs, 2 larger scales x 3 local
    LRs and a final per scale and seed; PT's finals only when sweep.models has pt."""
    from ptsweep.sweeps import scaling_curves

    over = ["preset=smoke", "sweep.scales=[64,128,192,256]", "sweep.baseline.rule=extrapolate",
            "sweep.baseline.search_scales=2", "sweep.baseline.local_points=3", "sweep.baseline.grid=[1e-3,3e-3,1e-2]"]
    baselines = scaling_curves.planned_trials(compose([*over, "sweep.models=[bert,ut]"]))
    assert len(baselines) == 2 * (2 * 3 + 2 * 3 + 4 * 1)
    assert [t.label for t in baselines if t.model.name == "bert" and t.scale == 192] == [
        "local-bert-w192-0", "local-bert-w192-1", "local-bert-w192-2", "final-bert-w192-s0"]
    with_pt = scaling_curves.planned_trials(compose([*over, "sweep.models=[pt,bert,ut]"]))
    assert len(with_pt) == len(baselines) + 4 and {t.model.name for t in with_pt[len(baselines):]} == {"pt"}
