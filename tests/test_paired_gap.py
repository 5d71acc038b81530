"""ptsweep/analysis/paired_gap.py: the seed-paired difference against scipy's paired t-test, the optimum
rule (most seeds first, then the lowest seed-mean loss), and the filter that keeps levers and controls out."""

import json

import pytest
from scipy import stats

from ptsweep.analysis import paired_gap


def _runs(losses):
    return {seed: {"val_loss": x} for seed, x in enumerate(losses)}


def test_paired_difference_matches_scipys_paired_t_test():
    a, b = [5.31, 5.40, 5.28, 5.35], [5.02, 5.05, 4.97, 5.10]
    mean, se, half, n = paired_gap.paired(_runs(a), _runs(b), "val_loss")
    t = stats.ttest_rel(a, b)
    assert n == 4 and mean == pytest.approx(sum(a) / 4 - sum(b) / 4)
    assert mean / se == pytest.approx(t.statistic, rel=1e-12)
    lo, hi = t.confidence_interval(0.95)
    assert (mean - half, mean + half) == pytest.approx((lo, hi), rel=1e-12)


def test_optimum_prefers_the_most_seeded_eta_then_the_lowest_mean():
    rows = [{"lr": 0.01, "seed": s, "val_loss": x} for s, x in enumerate([5.0, 5.1, 5.2])]
    rows += [{"lr": 0.02, "seed": 0, "val_loss": 4.9}]            # lower, but one seed only
    rows += [{"lr": 0.005, "seed": s, "val_loss": x} for s, x in enumerate([5.05, 5.1, 5.3])]
    lr, by_seed = paired_gap.optimum(rows)
    assert lr == 0.01 and sorted(by_seed) == [0, 1, 2]


def _final(tmp_path, name, **overrides):
    d = tmp_path / "trials" / name
    d.mkdir(parents=True)
    ov = {"model.parametrization": "sp", "model.width": 32, "optim.lr": 0.01, "train.tokens": 1228800.0, "seed": 0,
          **overrides}
    (d / "final.json").write_text(json.dumps({"status": "ok", "overrides": ov, "val_loss": 5.0,
                                              "context_gain": 1.0, "unigram_loss": 6.3, "no_context_loss": 5.7}))


def test_load_runs_keeps_the_default_model_only(tmp_path):
    _final(tmp_path, "a")
    _final(tmp_path, "ctrl", **{"model.n_iters": 0, "model.parametrization": "mup"})
    _final(tmp_path, "lever", **{"model.w_attn": 4.0, "seed": 1})
    _final(tmp_path, "warmup", **{"optim.warmup_frac": 0.05, "seed": 2})  # an optimizer lever is not the default
    probe = {"config": {"model": {"parametrization": "sp", "width": 32}, "optim": {"lr": 0.02, "warmup_frac": 0.25},
                        "train": {"tokens": 1228800.0}, "seed": 3},
             "trace": [], "final": {"val_loss": 5.0}}
    (tmp_path / "probe.json").write_text(json.dumps(probe))
    (tmp_path / "iwd.json").write_text(json.dumps({**probe, "independent_wd": 5e-4,
                                                   "config": {**probe["config"], "seed": 4}}))
    rows = paired_gap.load_runs([tmp_path])
    assert sorted((r["par"], r["seed"]) for r in rows) == [("sp", 0), ("sp", 3)]
