"""lr-transfer study (ptsweep.sweeps.lr_transfer, ptsweep.analysis.transfer_drift): the two-stage trial lists, the
optimum / uncertainty / drift analysis on synthetic tables with known optima, and one smoke-size two-stage study
through Ray Tune that resumes without re-running finished trials."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from ptsweep.analysis import transfer_drift as td
from ptsweep.config import compose, with_overrides
from ptsweep.errors import ConfigError
from ptsweep.sweeps import lr_transfer as lt
from ptsweep.sweeps import lr_transfer_plan as plan
from ptsweep.reports import lr_transfer_report


@pytest.fixture(scope="module")
def smoke_cfg(tmp_path_factory):
    out = tmp_path_factory.mktemp("lrt")
    return compose(["preset=smoke", f"out_dir={out}", "tracker=disabled"])


def _study_cfg(smoke_cfg, **kw):
    """The plan's mechanics on 'mup' (the grid of grid_range) beside SP (sp_grid_range); ``kw``: other
    ``sweep.lr_transfer`` settings."""
    base = dict(parametrizations=["mup", "sp"], grid_range=[1e-3, 1e-1], grid_points=5, widths=[32, 64, 128],
                weight_grid=[0.25, 1.0, 4.0], seeds=3, refine_top=2)
    return with_overrides(smoke_cfg, {f"sweep.lr_transfer.{k}": v for k, v in {**base, **kw}.items()})


# ---------------------------------------------------------------------------------------------------------------
# Trial lists
# ---------------------------------------------------------------------------------------------------------------
def test_grid_is_log_spaced_and_stage1_covers_every_point(smoke_cfg):
    cfg = _study_cfg(smoke_cfg)
    grid = plan.lr_grid(cfg, "mup")
    assert grid[0] == 1e-3 and grid[-1] == 1e-1 and np.allclose(np.diff(np.log10(grid)), 0.5, atol=1e-3)
    trials, labels = plan.stage1_trials(cfg)
    lr_trials = [t for t, lab in zip(trials, labels) if lab.startswith("lr-")]
    w_trials = [t for t, lab in zip(trials, labels) if lab.startswith("wattn-")]
    assert len(lr_trials) == 2 * 3 * 5  # parametrizations x widths x LRs, one seed
    assert cfg.optim.lr in grid  # the weight study's run at the default weight 1 is the LR study's run at optim.lr
    assert len(w_trials) == 2 * 3 and all(t["model.parametrization"] == "mup" for t in w_trials)
    assert {t["seed"] for t in trials} == {cfg.seed}
    assert all(t["model.scaling"] == cfg.sweep.lr_transfer.scaling for t in trials)
    assert all(t["train.tokens"] == cfg.sweep.lr_transfer.tokens for t in trials)
    assert all(t["optim.lr"] == cfg.optim.lr for t in w_trials)  # lr_transfer.weight_lr = 0 -> optim.lr
    assert [t["model.width"] for t in trials] == sorted(t["model.width"] for t in trials)  # narrowest first
    cfg2 = _study_cfg(smoke_cfg, weight_key="model.w_topic_g", weight_lr=0.05)
    t2, l2 = plan.stage1_trials(cfg2)
    wt = [t for t, lab in zip(t2, l2) if lab.startswith("wtopicg-")]
    assert len(wt) == 9 and all("model.w_topic_g" in t and t["optim.lr"] == 0.05 for t in wt)
    cfg4 = _study_cfg(smoke_cfg, sp_grid_range=[1e-4, 1e-2])
    t4, l4 = plan.stage1_trials(cfg4)
    assert sorted({t["optim.lr"] for t, lab in zip(t4, l4) if lab.startswith("lr-sp")}) == plan.lr_grid(cfg4, "sp")
    assert plan.lr_grid(cfg4, "sp")[0] == 1e-4 and plan.lr_grid(cfg4, "mup")[0] == 1e-3
    # the control (no inference) runs beside the study's first muP variant, over that variant's grid
    cfg5 = _study_cfg(smoke_cfg, parametrizations=["sp", "mup_sp"], weight_grid=[], sp_grid_range=[1e-4, 1e-2],
                      control={"model.n_iters": 0})
    t5, l5 = plan.stage1_trials(cfg5)
    ctrl = [t for t, lab in zip(t5, l5) if lab.startswith("ctrl-")]
    assert {lab for lab in l5 if lab.startswith("ctrl-")} == {"ctrl-mup_sp-w32", "ctrl-mup_sp-w64", "ctrl-mup_sp-w128"}
    assert all(t["model.n_iters"] == 0 and t["model.parametrization"] == "mup_sp" for t in ctrl)
    assert sorted({t["optim.lr"] for t in ctrl}) == plan.lr_grid(cfg5, "mup_sp")
    assert not any(lab.startswith("ctrl-") for lab in plan.stage1_trials(
        with_overrides(cfg5, {"sweep.lr_transfer.parametrizations": ["sp"]}))[1])
    cfg3 = _study_cfg(smoke_cfg, weight_widths=[32, 128])
    t3, l3 = plan.stage1_trials(cfg3)
    assert sorted({t["model.width"] for t, lab in zip(t3, l3) if lab.startswith("wattn-")}) == [32, 128]


def _stage1_table(cfg, loss_fn):
    trials, labels = plan.stage1_trials(cfg)
    rows = []
    for t, lab in zip(trials, labels):
        x = t.get(cfg.sweep.lr_transfer.weight_key, t["optim.lr"]) if not lab.startswith("lr-") else t["optim.lr"]
        rows.append({"trial_key": f"k{len(rows)}", "label": lab, **t,
                     "val_loss": loss_fn(lab, t["model.width"], x), "status": "ok"})
    return plan.fill_base(pd.DataFrame(rows), cfg)


def test_stage2_refines_the_best_values_with_the_other_seeds(smoke_cfg):
    cfg = _study_cfg(smoke_cfg)
    best = {32: 1e-2, 64: 3.162e-2, 128: 1e-1}

    def loss(lab, w, x):
        if lab.startswith("lr-"):
            return 5 + (math.log10(x) - math.log10(best[w])) ** 2 + (math.inf if x == 1e-3 and w == 32 else 0)
        return 5 + abs(math.log(x / 4.0))

    df1 = _stage1_table(cfg, loss)
    vals = plan.refine_values(cfg, df1)
    assert vals[("lr", "mup", 32)] == [3.162e-3, 1e-2] or vals[("lr", "mup", 32)] == [1e-2, 3.162e-2]
    assert vals[("lr", "sp", 128)] == [3.162e-2, 1e-1]  # the 2 lowest losses, not the 2 highest
    assert vals[("weight", "mup", 64)] == [1.0, 4.0]
    t2, l2 = plan.stage2_trials(cfg, df1)
    # groups x refine_top x extra seeds, less w_attn 1 at widths 32 and 64: there the LR study refines optim.lr (its
    # seeds at the default weight are the weight study's)
    assert len(t2) == (2 * 3 + 3) * 2 * 2 - 2 * 2
    assert sorted(t["model.width"] for t, lab in zip(t2, l2) if lab.startswith("wattn-") and t["model.w_attn"] == 1) \
        == [128, 128]
    assert {t["seed"] for t in t2} == {cfg.seed + 1, cfg.seed + 2}
    lr128 = {t["optim.lr"] for t, lab in zip(t2, l2) if lab == "lr-sp-w128"}
    assert lr128 == {3.162e-2, 1e-1}
    # refine_top = 0: every grid value gets every seed
    cfg0 = _study_cfg(smoke_cfg, refine_top=0)
    t0, _ = plan.stage2_trials(cfg0, df1)
    assert len(t0) == (2 * 3 * 5 + 3 * 2) * 2  # w_attn 1's seeds are the LR study's


def test_weight_study_follows_the_muP_variant_and_shares_the_default_weights_run(smoke_cfg):
    """With only 'mup_sp' the weight study runs on it; when its LR is on the LR grid, the default weight's run is the
    LR study's run (not run twice) and the analysis counts it as the weight study's point at the default."""
    cfg = _study_cfg(smoke_cfg, parametrizations=["mup_sp"], sp_grid_range=[5e-3, 2e-2], grid_points=3,
                     weight_lr=0.01, weight_grid=[0.5, 1.0, 2.0], widths=[32, 64], weight_widths=[64])
    trials, labels = plan.stage1_trials(cfg)
    wt = [t for t, lab in zip(trials, labels) if lab.startswith("wattn-")]
    assert sorted(t["model.w_attn"] for t in wt) == [0.5, 2.0]
    assert all(t["model.parametrization"] == "mup_sp" and t["model.width"] == 64 for t in wt)
    df = _stage1_table(cfg, lambda lab, w, x: 5 + abs(math.log2(x / (1.0 if lab.startswith("wattn-") else 0.01))))
    res = lt.analyse(df, cfg)
    o = res["weight"]["by_parametrization"]["mup_sp"]["per_width"][64]
    assert o["x_opt"] == 1.0 and list(o["curve"]["x"]) == [0.5, 1.0, 2.0]
    assert set(res["weight"]["by_parametrization"]["mup_sp"]["per_width"]) == {64}
    off = _study_cfg(smoke_cfg, weight_lr=0.05)  # 0.05 is not on the LR grid: run the default
    assert sorted({t["model.w_attn"] for t, lab in zip(*plan.stage1_trials(off)) if lab.startswith("wattn-")}) \
        == [0.25, 1.0, 4.0]
    assert plan.weight_parametrization(_study_cfg(smoke_cfg, parametrizations=["sp"])) is None


def test_a_single_point_is_the_plans_own_trial(smoke_cfg):
    """``point_trial`` (experiments/lr-transfer/weight_points.py runs single weight points with it) builds the same
    overrides and label as the plan's stage 1 for the same point, the mup_sp anchor included."""
    cfg = _study_cfg(smoke_cfg, parametrizations=["mup_sp"], sp_grid_range=[5e-3, 2e-2], grid_points=3,
                     weight_lr=0.01, weight_grid=[0.5, 1.0, 2.0], widths=[32, 64], weight_widths=[64])
    trials, labels = plan.stage1_trials(cfg)
    ov, label = plan.point_trial(cfg, "weight", "mup_sp", 64, 2.0, cfg.seed)
    assert (ov, label) in list(zip(trials, labels)) and ov["model.w_attn"] == 2.0
    assert ov["model.base_width"] == 32  # anchored at the study's smallest width
    assert plan.point_trial(cfg, "lr", "mup_sp", 32, 5e-3, cfg.seed) in list(zip(trials, labels))


def test_every_mutation_of_the_mutation_check_still_applies():
    """experiments/lr-transfer/mutations.py breaks the code on purpose, one line at a time: each line it mutates must
    still be in the code (once), or the check would test nothing there."""
    import runpy
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    mutations = runpy.run_path(str(root / "experiments/lr-transfer/mutations.py"), run_name="mutation_list")["M"]
    assert len(mutations) >= 10
    for name, path, old, new in mutations:
        assert (root / path).read_text().count(old) == 1 and new != old, name


def test_config_rejects_bad_settings(smoke_cfg):
    with pytest.raises(ConfigError, match="sweep.lr_transfer.grid_range"):
        with_overrides(smoke_cfg, {"sweep.lr_transfer.grid_range": [1e-1, 1e-3]})
    with pytest.raises(ConfigError, match="sweep.lr_transfer.widths"):
        with_overrides(smoke_cfg, {"sweep.lr_transfer.widths": [64]})
    with pytest.raises(ConfigError, match="sweep.lr_transfer.weight_key"):
        with_overrides(smoke_cfg, {"sweep.lr_transfer.weight_key": "optim.lr"})
    with pytest.raises(ConfigError, match="sweep.lr_transfer.sp_grid_range"):
        with_overrides(smoke_cfg, {"sweep.lr_transfer.sp_grid_range": [1e-2, 1e-4]})
    with pytest.raises(ConfigError, match="sweep.lr_transfer.refine_top"):
        with_overrides(smoke_cfg, {"sweep.lr_transfer.refine_top": -1})


def test_control_is_cleared_by_null_and_its_keys_are_checked_before_any_trial():
    """The lr_study preset's control (PT without inference) plans ctrl- trials; ``control=null`` removes them
    (``{}`` would merge into the preset's mapping), and an unknown key fails the plan, not each trial."""
    base = ["preset=lr_study", "tracker=disabled", "sweep.lr_transfer.weight_grid=[]"]
    with_ctrl = plan.stage1_trials(compose(base))[1]
    assert any(lab.startswith("ctrl-") for lab in with_ctrl)
    cleared = compose([*base, "sweep.lr_transfer.control=null"])
    assert cleared.sweep.lr_transfer.control is None
    labels = plan.stage1_trials(cleared)[1]
    assert labels and not any(lab.startswith("ctrl-") for lab in labels)
    assert len(labels) == len(with_ctrl) - sum(lab.startswith("ctrl-") for lab in with_ctrl)
    assert lt._settings(cleared)["control"] == {}
    with pytest.raises(ConfigError, match="model.n_itres: unknown config key"):
        plan.stage1_trials(compose([*base, "sweep.lr_transfer.control={model.n_itres:4}"]))


# ---------------------------------------------------------------------------------------------------------------
# Analysis on synthetic tables with known optima
# ---------------------------------------------------------------------------------------------------------------
def _synthetic(opt_log2: dict, widths=(32, 256), seeds=3, noise=0.0, curvature=0.05, rng_seed=0,
               grid=tuple(2.0 ** k for k in range(-10, -1)), refine=None):
    """Quadratic loss in log2(lr) around opt_log2[(par, width)], seed offsets (shared across LRs, as same seed = same
    init and data) plus independent noise. refine: only that many values around the optimum get seeds > 0."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for (par, w), o in opt_log2.items():
        offsets = rng.normal(0, 0.05, seeds)
        for s in range(seeds):
            for lr in grid:
                if s > 0 and refine is not None and abs(math.log2(lr) - o) > refine:
                    continue
                loss = 6.0 + curvature * (math.log2(lr) - o) ** 2 + offsets[s] + rng.normal(0, noise)
                rows.append({"label": f"lr-{par}-w{w}", "model.parametrization": par, "model.width": w,
                             "optim.lr": lr, "seed": s, "val_loss": loss, "val_loss_se": 0.02,
                             "unigram_loss": 6.3, "unigram_loss_se": 0.04, "gain_over_unigram": 6.3 - loss,
                             "gain_over_unigram_se": 0.01, "status": "ok"})
    return pd.DataFrame(rows)


def test_optimum_is_the_argmin_of_seed_means_and_drift_is_in_factors_of_two():
    df = _synthetic({("mup", 32): -5, ("mup", 256): -5, ("sp", 32): -4, ("sp", 256): -7})
    res = td.drift(df, "optim.lr")
    assert res["mup"]["per_width"][32]["x_opt"] == 2.0 ** -5
    assert res["mup"]["drift_log2"] == 0.0
    assert res["sp"]["drift_log2"] == -3.0
    assert res["sp"]["per_width"][256]["x_opt"] == 2.0 ** -7
    # noiseless: the bootstrap always picks the same optimum, the plausible set is the optimum alone
    assert res["sp"]["drift_boot_q"] == [-3.0, -3.0, -3.0]
    assert res["mup"]["per_width"][256]["plausible"] == [2.0 ** -5]
    assert not res["sp"]["drift_is_bound"]


def test_optimum_on_the_grid_edge_makes_the_drift_a_bound():
    df = _synthetic({("sp", 32): -4, ("sp", 256): -12})  # true optimum below the grid (2^-10 .. 2^-2)
    res = td.drift(df, "optim.lr")
    assert res["sp"]["per_width"][256]["x_opt"] == 2.0 ** -10 and res["sp"]["per_width"][256]["at_edge"]
    assert res["sp"]["drift_is_bound"]


def test_seed_averaging_uses_every_seed_and_diverged_seeds_disqualify():
    # seed 0 alone prefers 2^-6; seeds 1, 2 prefer 2^-4 strongly: the mean must pick 2^-4
    rows = []
    for s, pref in ((0, {2 ** -6: 6.00, 2 ** -5: 6.05, 2 ** -4: 6.10}), (1, {2 ** -6: 6.30, 2 ** -5: 6.10, 2 ** -4: 5.90}),
                    (2, {2 ** -6: 6.30, 2 ** -5: 6.10, 2 ** -4: 5.90})):
        for lr, loss in pref.items():
            rows.append({"model.parametrization": "mup", "model.width": 32, "optim.lr": lr, "seed": s,
                         "val_loss": loss})
    df = pd.DataFrame(rows)
    o = td.optimum(df, "optim.lr")
    assert o["x_opt"] == 2 ** -4 and o["loss_opt"] == pytest.approx((6.10 + 5.90 + 5.90) / 3)
    assert o["n_seeds"] == 3
    # a diverged seed at the best value disqualifies it (mean = inf), it is not silently dropped
    df.loc[(df["optim.lr"] == 2 ** -4) & (df["seed"] == 2), "val_loss"] = math.inf
    o = td.optimum(df, "optim.lr")
    assert o["x_opt"] == 2 ** -5


def test_single_seed_grid_points_do_not_beat_refined_values():
    # two-stage table: 2^-8 ran with one seed only and is (by luck) lower than the 3-seed means
    df = _synthetic({("mup", 32): -5}, widths=(32,), seeds=3, refine=1)
    df.loc[df["optim.lr"] == 2 ** -8, "val_loss"] = 5.0
    o = td.optimum(df, "optim.lr")
    assert o["candidates"] == [2.0 ** -6, 2.0 ** -5, 2.0 ** -4]
    assert o["x_opt"] == 2 ** -5


def test_uncertainty_grows_with_noise_and_covers_the_truth():
    flat = _synthetic({("mup", 32): -5, ("mup", 256): -5}, seeds=3, noise=0.2, curvature=0.005, rng_seed=3)
    sharp = _synthetic({("mup", 32): -5, ("mup", 256): -5}, seeds=3, noise=0.0, curvature=0.05, rng_seed=3)
    rf, rs = td.drift(flat, "optim.lr")["mup"], td.drift(sharp, "optim.lr")["mup"]
    wf = rf["drift_boot_q"][2] - rf["drift_boot_q"][0]
    ws = rs["drift_boot_q"][2] - rs["drift_boot_q"][0]
    assert ws == 0.0 and wf > 1.0
    lo, hi = rf["drift_plausible_range"]
    assert lo <= 0.0 <= hi  # the plausible sets of both widths contain the true optimum
    pw = rf["per_width"][32]
    assert pw["plausible"][0] < pw["x_opt"] or pw["plausible"][-1] > pw["x_opt"]
    assert abs(sum(pw["boot_freq"].values()) - 1.0) < 1e-9


def test_paired_se_detects_a_consistent_small_difference():
    # 3 seeds with big shared offsets; 2^-5 is better than 2^-4 by 0.01 at every seed: paired SE ~ 0 -> 2^-4 is
    # excluded from the plausible set although the unpaired seed SE (~0.3) would include it
    rows = []
    for s, off in enumerate((0.0, 0.5, -0.5)):
        for lr, d in ((2 ** -5, 0.0), (2 ** -4, 0.01 + 0.001 * s)):
            rows.append({"model.parametrization": "mup", "model.width": 32, "optim.lr": lr, "seed": s,
                         "val_loss": 6 + off + d})
    o = td.optimum(pd.DataFrame(rows), "optim.lr")
    assert o["x_opt"] == 2 ** -5 and o["plausible"] == [2 ** -5]
    assert o["boot_freq"][2 ** -5] == 1.0


def test_vertex_is_the_sub_grid_minimum():
    df = _synthetic({("mup", 32): -5.3}, widths=(32,), seeds=1, curvature=0.05)
    o = td.optimum(df, "optim.lr")
    assert o["x_opt"] == 2 ** -5 and o["vertex_log2"] == pytest.approx(-5.3, abs=1e-6)
    edge = td.optimum(_synthetic({("mup", 32): -12}, widths=(32,), seeds=1), "optim.lr")
    assert edge["vertex_log2"] is None and edge["at_edge"]


def test_gains_combine_seed_spread_with_the_shared_validation_se():
    d = pd.DataFrame({"optim.lr": [0.1] * 3 + [0.2], "val_loss": [6.0, 6.1, 6.2, 7.0],
                      "val_loss_se": [0.03] * 4, "unigram_loss": [6.3] * 4, "unigram_loss_se": [0.04] * 4,
                      "gain_over_unigram": [0.3, 0.2, 0.1, -0.7], "gain_over_unigram_se": [0.01] * 4})
    g = td.gains(d, "optim.lr", 0.1)
    assert g["n"] == 3 and g["val_loss"] == pytest.approx(6.1) and g["gain_over_unigram"] == pytest.approx(0.2)
    assert g["gain_over_unigram_se"] == pytest.approx(math.sqrt(0.01 ** 2 + (0.1 / math.sqrt(3)) ** 2))
    assert g["unigram_loss"] == pytest.approx(6.3)


def test_baselines_are_means_of_the_finite_values_and_left_out_when_none():
    """lr-transfer's and lr-horizon's baselines (``transfer_drift.baselines``): a diverged or missing value is no
    baseline; the token SE is averaged over every run that has one."""
    d = pd.DataFrame({"unigram_loss": [6.3, 6.1, math.inf, math.nan],
                      "unigram_loss_se": [0.04, math.nan, 0.02, 0.03], "no_context_loss": [5.8, 5.9, math.nan, 5.7]})
    assert td.baselines(d) == pytest.approx({"unigram_loss": 6.2, "unigram_loss_spread": 0.2, "unigram_loss_se": 0.03,
                                             "no_context_loss": 5.8})
    only_nc = pd.DataFrame({"unigram_loss": [math.nan], "no_context_loss": [5.0]})
    assert td.baselines(only_nc) == {"no_context_loss": 5.0}
    assert td.baselines(pd.DataFrame({"val_loss": [4.0]})) == {}


def test_analyse_reports_unigram_gains_and_plots(smoke_cfg, tmp_path):
    cfg = _study_cfg(smoke_cfg, widths=[32, 256])
    df = _synthetic({("mup", 32): -5, ("mup", 256): -5, ("sp", 32): -4, ("sp", 256): -7})
    df["trial_key"] = [f"k{i}" for i in range(len(df))]
    w = []
    for width in (32, 256):
        for s in range(3):
            for wa in (0.25, 1.0, 4.0):
                loss = 6.0 + 0.1 * abs(math.log2(wa)) + 0.01 * s
                w.append({"trial_key": f"w{len(w)}", "label": f"wattn-mup-w{width}", "model.parametrization": "mup",
                          "model.width": width, "optim.lr": 0.01, "model.w_attn": wa, "seed": s, "val_loss": loss,
                          "val_loss_se": 0.02, "unigram_loss": 6.3, "unigram_loss_se": 0.04,
                          "gain_over_unigram": 6.3 - loss, "gain_over_unigram_se": 0.01, "status": "ok"})
    ctrl = _synthetic({("mup", 32): -6, ("mup", 256): -6}).assign(
        label=lambda d: d["label"].str.replace("lr-", "ctrl-"), **{"model.n_iters": 0})
    df = plan.fill_base(pd.concat([df, pd.DataFrame(w), ctrl], ignore_index=True), cfg)
    res = lt.analyse(df, cfg)
    # the control (PT without inference) is analysed beside PT, over its own rows only
    assert res["control"]["by_parametrization"]["mup"]["per_width"][32]["x_opt"] == 2.0 ** -6
    assert res["lr"]["by_parametrization"]["mup"]["per_width"][32]["x_opt"] == 2.0 ** -5
    assert res["unigram_loss"] == pytest.approx(6.3) and res["unigram_loss_spread"] == 0.0
    assert res["lr"]["by_parametrization"]["sp"]["drift_log2"] == -3.0
    assert res["weight"]["by_parametrization"]["mup"]["drift_log2"] == 0.0
    g = res["lr"]["by_parametrization"]["mup"]["per_width"][32]["gains"]
    assert g["gain_over_unigram"] == pytest.approx(0.3 - df[(df["label"] == "lr-mup-w32")
                                                           & (df["optim.lr"] == 2 ** -5)]["val_loss"].sub(6.0).mean())
    opt = lr_transfer_report.optima_table(res)
    assert len(opt) == 2 * 2 + 2 + 2 and set(opt["study"]) == {"lr", "weight", "control"}
    assert (opt["gain"] > 0).all() and np.isfinite(opt["gain_se"]).all()
    path = lr_transfer_report.plot(df, res, cfg, tmp_path / "lr.png")
    assert path.exists() and path.read_bytes()[:4] == b"\x89PNG"
    # weight study: seed means 6.01 at w_attn 1, 6.21 at 0.25 and 4 (+3.3 %): a basin of one point, no cliff (< 6.3)
    o = res["weight"]["by_parametrization"]["mup"]["per_width"][32]
    assert (o["basin"]["lo"], o["basin"]["hi"], o["basin"]["width_log2"]) == (1.0, 1.0, 0.0)
    assert o["window"]["passed"] is None and o["cliff"]["above"] is None and o["cliff"]["below"] is None
    text = lr_transfer_report.markdown(res)
    assert "| weight | mup | 32 | 1 | 1 - 1 | 0 | -, - | not run | -, - | -, - |" in text


# ---------------------------------------------------------------------------------------------------------------
# Smoke-size study on Ray Tune
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_smoke_two_stage_study_runs_on_ray_and_resumes(smoke_cfg):
    study = dict(widths=[32, 64], grid_points=2, weight_grid=[], parametrizations=["mup"], seeds=2, refine_top=1,
                 tokens=512, control={})  # the control's plan and analysis: tests above
    cfg = with_overrides(smoke_cfg, {f"sweep.lr_transfer.{k}": v for k, v in study.items()})
    sdir = lt.run(cfg)
    summary = json.loads((sdir / "summary.json").read_text())
    trials = pd.read_csv(sdir / "trials.csv")
    # every run reports the [MASK]-target context gain and the no-context baseline (the same for every run)
    assert np.isfinite(trials["context_gain"]).all() and trials["no_context_loss"].nunique() == 1
    # stage 1: 2 widths x 2 LRs (seed 0); stage 2: the best LR per width with seed 1
    assert len(trials) == 6 and summary["n_stage1"] == 4 and summary["n_stage2"] == 2
    s1 = trials[trials["stage"] == 1]
    for w in (32, 64):
        g = s1[(s1["model.width"] == w) & np.isfinite(s1["val_loss"])]
        best_lr = g.loc[g["val_loss"].idxmin(), "optim.lr"]
        s2 = trials[(trials["stage"] == 2) & (trials["model.width"] == w)]
        assert s2["optim.lr"].tolist() == [best_lr] and s2["seed"].tolist() == [cfg.seed + 1]
    # the ledger's extra metrics are in the table: unigram baseline identical for every run, gain = unigram - loss
    assert trials["unigram_loss"].nunique() == 1 and np.isfinite(trials["val_loss_se"]).all()
    assert np.allclose(trials["gain_over_unigram"], trials["unigram_loss"] - trials["val_loss"], atol=1e-4)
    assert summary["unigram_loss"] == pytest.approx(trials["unigram_loss"].iloc[0])
    per_width = summary["lr"]["by_parametrization"]["mup"]["per_width"]
    assert set(per_width) == {"32", "64"} and all(o["n_seeds"] == 2 for o in per_width.values())
    assert (sdir / "lr_transfer.png").exists() and (sdir / "optima.csv").exists()
    starts = (sdir / "trial_starts.log").read_text().splitlines()
    assert len(starts) == 6
    lt.run(cfg)  # resume: every trial of both stages is in the ledger, nothing trains again
    assert (sdir / "trial_starts.log").read_text().splitlines() == starts


def test_partial_report_reads_the_ledger_of_a_running_study(smoke_cfg, tmp_path, capsys):
    from ptsweep.config import to_dict
    from ptsweep.identity import trial_key

    grid = [2.0 ** k for k in range(-10, -1)]
    cfg = _study_cfg(smoke_cfg, widths=[32, 256], grid_range=[grid[0], grid[-1]], grid_points=len(grid),
                     weight_grid=[], refine_top=3)
    df = _synthetic({("mup", 32): -5, ("mup", 256): -5, ("sp", 32): -4, ("sp", 256): -7},
                    grid=tuple(plan.lr_grid(cfg, "mup")), refine=1)
    base = to_dict(cfg)
    for i, r in df.iterrows():
        ov = {**plan._common(cfg), **{k: r[k].item() if hasattr(r[k], "item") else r[k]
                                    for k in ("model.parametrization", "model.width", "optim.lr", "seed")}}
        key = trial_key(base, ov, r["label"]) if i != 0 else "other-model-version"  # not this study's trial
        rec = {"trial_key": key, "label": r["label"], "overrides": ov, "status": "ok",
               **{m: r[m] for m in ("val_loss", "val_loss_se", "unigram_loss", "unigram_loss_se",
                                    "gain_over_unigram", "gain_over_unigram_se")}}
        (tmp_path / "trials" / f"k{i}").mkdir(parents=True)
        (tmp_path / "trials" / f"k{i}" / "final.json").write_text(json.dumps({k: (v.item() if hasattr(v, "item") else v)
                                                                             for k, v in rec.items()}))
    (tmp_path / "trials" / "running").mkdir()  # a trial still running has no final.json: skipped
    t = lt.ledger_table(tmp_path, cfg)
    assert len(t) == len(df) - 1 and set(t["stage"]) == {1, 2}
    lt.main([str(tmp_path), "preset=smoke", "tracker=disabled", "sweep.lr_transfer.parametrizations=[mup,sp]",
             "sweep.lr_transfer.widths=[32,256]",
             f"sweep.lr_transfer.grid_range=[{grid[0]},{grid[-1]}]", f"sweep.lr_transfer.grid_points={len(grid)}",
             "sweep.lr_transfer.weight_grid=[]", "sweep.lr_transfer.refine_top=3", "sweep.lr_transfer.seeds=3"])
    out = capsys.readouterr().out
    assert "drift of optim.lr (sp), width 32 -> 256: -3.00 factors of 2" in out
    assert "Unigram baseline" in out and "| optim.lr | mup | 256 | 3 | 0.0312 |" in out
    assert (tmp_path / "partial_optima.csv").exists() and (tmp_path / "partial_lr_transfer.png").exists()
