"""The lr-horizon study's prediction (``sweep.lr_horizon.predict``): PT's predicted LRs planned at the longest budget
only, labelled apart from the grid, and their regret against the grid's optimum there, paired by seed, checked
against numpy and scipy; the rule's own LR from the shorter budgets against the closed form."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ptsweep import cli
from ptsweep.config import with_overrides
from ptsweep.reports import lr_horizon_report as rep
from ptsweep.sweeps import lr_horizon
from ptsweep.trials import results

LRS = [2.5e-3, 5e-3, 1e-2, 2e-2, 4e-2]
OPT = {1200: 0.02, 4800: 5e-3, 19200: 4e-3}  # each budget's true optimum (a loss quadratic in ln lr)


def _loss(steps: int, lr: float, seed: int) -> float:
    return 4.0 + 0.2 * (math.log(lr) - math.log(OPT[steps])) ** 2 + 0.03 * seed + 0.011 * seed * math.log(lr)


def test_the_plan_runs_predicted_lrs_at_the_longest_budget_once_and_labels_them_apart():
    cfg = cli.compose(["preset=smoke", "sweep.lr_horizon.seeds=2", "sweep.lr_horizon.predict=[0.003,0.1]"])
    lrs = {("pt", 1): [0.01, 0.1], ("pt", 16): [0.01, 0.1], ("bert", 16): [0.001, 0.003]}
    trials, labels = lr_horizon.plan(cfg, {"pt": {"model.width": 8}, "bert": {}}, lrs)
    extra = [(t, lab) for t, lab in zip(trials, labels) if lab.endswith(lr_horizon.PREDICTED)]
    tokens = 16 * cfg.train.batch_size * cfg.data.seq_len
    # 0.1 is on PT's longest grid (read there); 0.003 is not, so it trains at both seeds, PT's shape, 16 steps only
    assert [(t["optim.lr"], t["seed"], t["train.tokens"], t["model.width"]) for t, _ in extra] == \
        [(0.003, cfg.seed, tokens, 8), (0.003, cfg.seed + 1, tokens, 8)]
    assert {lab for _, lab in extra} == {"pt-T16-predicted"} and len(trials) == 2 * 6 + 2
    assert labels.index("pt-T16-predicted") == 8 and labels[-1] == "bert-T16"  # after PT's grid, before the baseline
    baseline_first = {("bert", 16): lrs[("bert", 16)], ("pt", 1): lrs[("pt", 1)], ("pt", 16): lrs[("pt", 16)]}
    assert lr_horizon.plan(cfg, {"pt": {"model.width": 8}, "bert": {}}, baseline_first)[1] == labels
    parts = lr_horizon.with_label_parts(pd.DataFrame({"label": ["pt-T16-predicted", "bert-T16", "pt-T1"]}))
    assert parts[["model", "steps", "predicted"]].values.tolist() == [["pt", 16, True], ["bert", 16, False],
                                                                       ["pt", 1, False]]


def _study(predict: list[float], missing_seed: int | None = None) -> pd.DataFrame:
    rows = [{"label": lr_horizon.label("pt", t), "optim.lr": x, "seed": s, "val_loss": _loss(t, x, s),
             "status": "ok", "context_gain": 1.4, "context_gain_se": 0.03} for t in OPT for x in LRS for s in (0, 1)]
    for x in predict:
        if not any(math.isclose(x, g) for g in LRS):
            rows += [{"label": lr_horizon.label("pt", 19200, True), "optim.lr": x, "seed": s,
                      "val_loss": math.inf if s == missing_seed else _loss(19200, x, s),
                      "status": "missing" if s == missing_seed else "ok", "context_gain": 1.3,
                      "context_gain_se": 0.03} for s in (0, 1)]
    return lr_horizon.with_label_parts(pd.DataFrame(rows))


def test_the_regret_is_the_paired_difference_to_the_grid_optimum_with_a_t_interval():
    predict = [4.5e-3, 1e-2]  # one between grid points (trained apart), one on the grid (read there)
    cfg = cli.compose(["preset=smoke", f"sweep.lr_horizon.predict={predict}"])
    df = _study(predict)
    out = rep.analyse(df, cfg, {"pt": {}})
    pr = out["prediction"]
    assert out["models"]["pt"]["budgets"][19200]["points"][0]["seeds"] == 2  # predicted runs stay off the grid
    assert [p["lr"] for p in out["models"]["pt"]["budgets"][19200]["points"]] == LRS
    eta = pr["eta_opt"]
    assert eta == 5e-3 and pr["steps"] == 19200
    for p, x in zip(pr["points"], predict):
        d = np.array([_loss(19200, x, s) - _loss(19200, eta, s) for s in (0, 1)])
        ref = stats.ttest_rel([_loss(19200, x, s) for s in (0, 1)], [_loss(19200, eta, s) for s in (0, 1)])
        half = stats.t.ppf(0.975, 1) * d.std(ddof=1) / math.sqrt(2)
        assert p["regret"] == pytest.approx(d.mean()) and p["regret_half"] == pytest.approx(half)
        assert p["regret"] / p["regret_se"] == pytest.approx(ref.statistic) and p["n_paired"] == 2
        assert p["regret_rel"] == pytest.approx(d.mean() / np.mean([_loss(19200, eta, s) for s in (0, 1)]))
    # fitted on 1,200 and 4,800 steps only (all three would give 0.5): the grid optima 0.02 and 0.005 give beta 1
    assert pr["fit"]["beta"] == pytest.approx(1.0) and pr["lr_rule"] == pytest.approx(0.02 / 16)
    assert pr["lr_rule_seeds"] == pytest.approx(0.02 * 16 ** -pr["fit"]["beta_seeds"])
    text = rep.markdown({"study": "s", "unigram_loss": 6.0, "no_context_loss": 5.5,
                         "settings": {"width": 32, "seeds": 2, "data": "d"}, **out})
    assert "## The horizon rule's prediction at 19,200 steps (pt)" in text
    assert "carries eta* 0.02 of 1,200 steps there with beta +1 (grid optima) to 0.00125" in text
    assert "The grid's eta* there: 0.005." in text
    p = pr["points"][0]
    assert (f"| 0.0045 | 2 | {p['loss']:.4f} | +1.300 | {p['regret']:+.4f} ± {p['regret_se']:.4f} "
            f"[{p['regret'] - p['regret_half']:+.3f}, {p['regret'] + p['regret_half']:+.3f}] (2 seeds), ") in text


def test_a_prediction_waits_for_its_runs_and_for_the_grids_optimum():
    cfg = cli.compose(["preset=smoke", "sweep.lr_horizon.predict=[0.0045]"])
    pr = rep.analyse(_study([4.5e-3], missing_seed=1), cfg, {"pt": {}})["prediction"]
    assert pr["points"][0]["seeds_in"] == 1 and pr["points"][0]["n_paired"] == 1  # the missing seed is not a loss
    assert rep._regret(pr["points"][0], pr["eta_opt"]).endswith("(1 seed)")
    df = _study([4.5e-3])
    df.loc[(df["steps"] == 19200) & (df["optim.lr"] == 0.04), "status"] = "missing"  # the long grid incomplete
    pr = rep.analyse(df, cfg, {"pt": {}})["prediction"]
    assert pr["eta_opt"] is None and rep._regret(pr["points"][0], None) == "no eta* at this budget yet"
    assert "The grid's eta* there: none until every run of its grid is in." in "\n".join(rep.prediction_lines(pr))


def test_a_folder_takes_its_prediction_once_after_it_was_written(tmp_path):
    cfg = cli.compose(["preset=smoke"])
    results.write_study(tmp_path, cfg, "s", "lr-horizon", 100)
    later = with_overrides(cfg, {"sweep.lr_horizon.predict": [0.005]})
    results.check_study(tmp_path, "s", "lr-horizon", later)  # written down once the shorter budgets ran
    results.write_study(tmp_path, later, "s", "lr-horizon", 100)
    with pytest.raises(results.ResultsError, match=r"written with sweep.lr_horizon.predict=\[0.005\], this command "
                                                   r"has \[0.01\]: another plan"):
        results.check_study(tmp_path, "s", "lr-horizon", with_overrides(cfg, {"sweep.lr_horizon.predict": [0.01]}))
    with pytest.raises(results.ResultsError, match=r"predict=\[0.005\], this command has \[\]"):
        results.check_study(tmp_path, "s", "lr-horizon", cfg)


def test_a_folder_grows_by_budgets_and_lrs_in_place_but_never_loses_one(tmp_path):
    cfg = cli.compose(["preset=smoke"])
    lh = cfg.sweep.lr_horizon
    results.write_study(tmp_path, cfg, "s", "lr-horizon", 100)
    grown = with_overrides(cfg, {"sweep.lr_horizon.steps": [*lh.steps, 16 * max(lh.steps)],
                                 "sweep.lr_horizon.grid": sorted([*lh.grid, lh.grid[0] * 2 ** 0.5])})
    results.check_study(tmp_path, "s", "lr-horizon", grown)  # every record of the smaller plan is one of this
    results.write_study(tmp_path, grown, "s", "lr-horizon", 100)
    with pytest.raises(results.ResultsError, match=r"written with sweep.lr_horizon.grid=\[.*\], this command has"):
        results.check_study(tmp_path, "s", "lr-horizon",  # back to the smaller grid: the folder has more
                            with_overrides(grown, {"sweep.lr_horizon.grid": list(lh.grid)}))
    fewer = with_overrides(grown, {"sweep.lr_horizon.steps": list(lh.steps)[1:] + [16 * max(lh.steps)]})
    with pytest.raises(results.ResultsError, match=r"written with sweep.lr_horizon.steps=\[.*another plan"):
        results.check_study(tmp_path, "s", "lr-horizon", fewer)
    width = with_overrides(grown, {"sweep.lr_horizon.width": 2 * cfg.model.width})
    with pytest.raises(results.ResultsError, match=r"sweep.lr_horizon.width=.*another plan"):
        results.check_study(tmp_path, "s", "lr-horizon", width)  # only the lists in GROWS grow
