"""The training-horizon pieces without Ray: the power-law fit and its beta range (analysis.horizon), the lr-horizon
study's edge rounds and collapse marks, and the config's one-line errors."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ptsweep import cli
from ptsweep.analysis import horizon
from ptsweep.config import with_overrides
from ptsweep.errors import ConfigError
from ptsweep.reports import lr_horizon_report
from ptsweep.sweeps import baseline_tuning, lr_horizon, lr_transfer_plan
from ptsweep.train.step import lr_factor

STEPS = [1200, 4800, 19200, 76800]


def test_fit_matches_numpy_polyfit_on_synthetic_optima():
    rng = np.random.default_rng(3)
    eta = 0.02 * (np.array(STEPS) / 1200.0) ** -0.46 * np.exp(rng.normal(0, 0.2, len(STEPS)))
    fit = horizon.fit_power(STEPS, eta)
    slope, icpt = np.polyfit(np.log(np.array(STEPS) / 1200.0), np.log(eta), 1)
    assert fit["beta"] == pytest.approx(-slope, rel=1e-12)
    assert fit["eta0"] == pytest.approx(math.exp(icpt), rel=1e-12) and fit["T0"] == 1200
    resid = np.log(eta) - np.polyval([slope, icpt], np.log(np.array(STEPS) / 1200.0))
    assert fit["rms_log"] == pytest.approx(float(np.sqrt(np.mean(resid ** 2))), rel=1e-9)
    exact = horizon.fit_power(STEPS[:3], 0.02 * (np.array(STEPS[:3]) / 1200.0) ** -0.46)
    assert exact["beta"] == pytest.approx(0.46) and exact["eta0"] == pytest.approx(0.02)


def _grid_brackets(beta_true: float, factor: float = 2.0):
    """Optima of eta = 0.02 (T / 1200)^-beta rounded to a factor-2 grid, each bracketed by its grid neighbours."""
    grid = 0.02 * factor ** np.arange(-8, 5)
    true = 0.02 * (np.array(STEPS) / 1200.0) ** -beta_true
    opt = np.array([grid[np.argmin(np.abs(np.log(grid / t)))] for t in true])
    return opt, opt / factor, opt * factor


def closed_two(lo, hi) -> float:
    """beta_min of two budgets' brackets: the shallowest line from the first's floor to the second's ceiling."""
    return (math.log(lo[0]) - math.log(hi[1])) / math.log(STEPS[1] / STEPS[0])


def _brute_force_range(steps, lo, hi):
    """min / max beta over a fine (intercept, beta) grid of lines through every bracket."""
    x = np.log(np.array(steps) / min(steps))
    beta = np.linspace(-3, 3, 6001)[:, None, None]
    a = np.linspace(np.log(1e-4), np.log(1.0), 1501)[None, :, None]
    y = a - beta * x[None, None, :]
    ok = ((y >= np.log(lo) - 1e-12) & (y <= np.log(hi) + 1e-12)).all(axis=2).any(axis=1)
    b = beta[:, 0, 0][ok]
    return (b.min(), b.max()) if len(b) else None


@pytest.mark.parametrize("beta_true", [0.0, 0.32, 0.46, 0.8])
def test_beta_range_holds_the_true_beta_and_matches_a_brute_force_scan(beta_true):
    opt, lo, hi = _grid_brackets(beta_true)
    rng = horizon.beta_range(STEPS, lo, hi)
    assert rng[0] <= beta_true <= rng[1]
    brute = _brute_force_range(STEPS, lo, hi)
    assert rng == pytest.approx(brute, abs=2e-3)


def test_beta_range_is_open_at_an_edge_and_none_without_a_power_law():
    opt, lo, hi = _grid_brackets(0.46)
    closed = horizon.beta_range(STEPS, lo, hi)
    hi_open = hi.copy()
    hi_open[0] = math.inf  # the shortest budget's optimum on the grid's top edge: a steeper fall is allowed
    wider = horizon.beta_range(STEPS, lo, hi_open)
    assert wider[0] == closed[0] and closed[1] < wider[1] < math.inf  # the other budgets still bound it
    assert horizon.beta_range(STEPS[:2], lo[:2], hi_open[:2]) == (pytest.approx(closed_two(lo, hi)), math.inf)
    assert horizon.beta_range(STEPS[:2], [lo[0], 0.0], hi[:2])[1] == math.inf
    # optima that go down, then up, then down again by 16x each: no line passes through the narrow brackets
    zig = np.array([0.02, 0.02 / 16, 0.02, 0.02 / 16])
    assert horizon.beta_range(STEPS, zig / 1.5, zig * 1.5) is None


def test_scale_lr_is_the_power_rule():
    beta = math.log(4) / math.log(20)
    assert horizon.scale_lr(0.02, 1200, 24000, beta) == pytest.approx(0.005)
    assert horizon.scale_lr(0.02, 1200, 1200, 0.9) == 0.02
    with pytest.raises(ValueError):
        horizon.scale_lr(0.02, 0, 24000, beta)


def test_schedule_warmup_and_decay_follow_each_runs_own_length():
    for steps in (1200, 24000):
        f = [lr_factor(s, steps, 0.25, "linear", 0.0) for s in range(steps)]
        peak = int(np.argmax(f))
        assert peak == round(0.25 * steps) - 1 and f[peak] == pytest.approx(1.0) and f[-1] < 0.01


@pytest.mark.parametrize("over, key", [
    ("sweep.horizon.beta=-0.3", "sweep.horizon.beta"),
    ("sweep.horizon.rule=power", "sweep.horizon"),
    ("sweep.lr_horizon.steps=[1200,4800,9600]", "sweep.lr_horizon.steps"),
    ("sweep.lr_horizon.grid=[0.01,0.02]", "sweep.lr_horizon.grid"),
    ("sweep.lr_horizon.baseline=pt", "sweep.lr_horizon.baseline"),
    ("sweep.lr_horizon.predict=[0.005,-0.01]", "sweep.lr_horizon.predict"),
    ("sweep.lr_horizon.anchor=-32", "sweep.lr_horizon.anchor"),
    ("sweep.horizon.extrapolate=0.5", "sweep.horizon.extrapolate"),
])
def test_bad_horizon_settings_are_one_line_errors(over, key):
    with pytest.raises(ConfigError) as e:
        cli.compose(["preset=smoke", over])
    assert str(e.value).startswith(key + ":") and "\n" not in str(e.value)


def _fake_run_trials(loss_of):
    """A run_trials stand-in: every trial 'ok' at loss_of(label, lr, seed) (inf = diverged); records each call."""
    calls = []

    def run(cfg, trials, sdir, name, labels, tags):
        calls.append((name, len(trials)))
        rows = []
        for ov, lab in zip(trials, labels):
            loss = loss_of(lab, ov["optim.lr"], ov["seed"])
            rows.append({"label": lab, "optim.lr": ov["optim.lr"], "seed": ov["seed"], "val_loss": loss,
                         "status": "ok" if math.isfinite(loss) else "diverged", "trial_key": f"{lab}-{ov['optim.lr']}"})
        return pd.DataFrame(rows)
    return run, calls


def test_edge_rounds_widen_an_edge_optimum_of_the_seed_mean(monkeypatch):
    cfg = cli.compose(["preset=smoke", "sweep.lr_horizon.seeds=2", "sweep.lr_horizon.lr_widen=2"])
    # grid 1e-3 / 1e-2 / 1e-1: at 1 step the optimum 0.3 sits past the top (1.0 brackets it); at 16 steps 0.2 too,
    # and 1.0 diverges there, which brackets it as well; at 4 steps 0.01 is inside
    def loss(lab, lr, seed):
        best = {"pt-T1": 0.3, "pt-T4": 0.01, "pt-T16": 0.2}[lab]
        return math.inf if lab == "pt-T16" and lr >= 1.0 else 5 + (math.log10(lr / best)) ** 2 + 0.01 * seed
    run, calls = _fake_run_trials(loss)
    monkeypatch.setattr(lr_horizon, "run_trials", run)
    df, lrs = lr_horizon.run_grids(cfg, {"pt": {}}, None, [])
    assert lrs[("pt", 1)] == lrs[("pt", 16)] == [1e-3, 1e-2, 1e-1, 1.0]
    assert lrs[("pt", 4)] == [1e-3, 1e-2, 1e-1]
    assert [c[0] for c in calls] == ["grid", "edge1"] and len(df) == 2 * (4 + 3 + 4)
    means = lr_horizon.seed_means(df[df["label"] == "pt-T1"])
    assert means["val_loss"].tolist() == pytest.approx([loss("pt-T1", x, 0) + 0.005 for x in lrs[("pt", 1)]])


def test_seed_means_mark_a_diverged_seed_a_failed_one_and_a_missing_one():
    g = pd.DataFrame({"optim.lr": [1, 1, 2, 2, 3, 3, 4, 4], "val_loss": [5, 6, 5, math.inf, 5, math.inf, 5, math.inf],
                      "status": ["ok", "ok", "ok", "diverged", "ok", "failed", "ok", "missing"]})
    m = lr_horizon.seed_means(g)
    assert m["status"].tolist() == ["ok", "diverged", "failed", "missing"]
    assert m["val_loss"].tolist() == [5.5, math.inf, math.inf, math.inf]
    assert baseline_tuning.lr_edge(m) == baseline_tuning.PENDING  # a seed not in the folder yet decides no edge


def test_report_marks_collapses_and_brackets_the_optimum():
    lrs = [0.005, 0.01, 0.02, 0.04, 0.08]
    loss = {0.005: 5.2, 0.01: 5.05, 0.02: 5.0, 0.04: 5.9, 0.08: 6.5}
    gain = {0.005: 1.2, 0.01: 1.3, 0.02: 1.4, 0.04: 0.4, 0.08: -0.1}
    rows = [{"optim.lr": x, "seed": s, "val_loss": loss[x] + 0.01 * s, "status": "ok",
             "context_gain": gain[x], "context_gain_se": 0.03} for x in lrs for s in range(2)]
    rows.append({"optim.lr": 0.16, "seed": 0, "val_loss": math.inf, "status": "diverged", "context_gain": math.nan,
                 "context_gain_se": math.nan})
    rows.append({"optim.lr": 0.16, "seed": 1, "val_loss": 7.0, "status": "ok", "context_gain": -1,
                 "context_gain_se": 0.03})
    b = lr_horizon_report.budget_result(pd.DataFrame(rows), unigram=6.3, collapse_frac=0.5)
    assert b["x_opt"] == 0.02 and b["bracket"] == [0.01, 0.04] and b["learned"]
    assert b["seed_loss"] == {0: {"val_loss": 5.0}, 1: {"val_loss": 5.01}}  # each seed's loss at eta*
    assert b["rise_half"] == pytest.approx(5.055 / 5.005 - 1) and b["rise_double"] == pytest.approx(5.905 / 5.005 - 1)
    marks = {p["lr"]: p["mark"] for p in b["points"]}
    assert marks[0.02] == marks[0.01] == marks[0.005] == ""
    assert marks[0.04].startswith("collapsed (context gain +0.40")
    assert marks[0.08].startswith("collapsed (above the unigram") and marks[0.16] == "diverged"
    slow = [{**r, "context_gain": 0.5} if r["optim.lr"] == 0.005 else r for r in rows]  # below eta*: not a collapse
    marks = {p["lr"]: p["mark"] for p in lr_horizon_report.budget_result(pd.DataFrame(slow), 6.3, 0.5)["points"]}
    assert marks[0.005].startswith("too slow (context gain +0.50 against +1.40") and marks[0.04].startswith("collap")
    part = slow + [{**rows[0], "optim.lr": 0.0025, "val_loss": math.inf, "status": "missing"}]
    b = lr_horizon_report.budget_result(pd.DataFrame(part), 6.3, 0.5)  # a run missing: no eta* from the others
    assert b["x_opt"] is None and (b["runs_in"], b["runs"]) == (12, 13)
    marks = {p["lr"]: p["mark"] for p in b["points"]}
    assert marks[0.0025] == "missing" and marks[0.005] == marks[0.04] == "" and marks[0.16] == "diverged"
    assert marks[0.08] == "above the unigram loss"
    full = lr_horizon_report.budget_result(pd.DataFrame(rows), 6.3, 0.5)
    budgets = {1200: b, 4800: full}
    summary = {"study": "s", "unigram_loss": 6.3, "no_context_loss": 5.7, "settings": {"width": 32, "seeds": 2,
               "data": "d"}, "models": {"pt": {"fit": lr_horizon_report.model_fit(budgets), "budgets": budgets,
                                               "model": {"parametrization": "mup_sp", "width": 32}}}}
    text = lr_horizon_report.markdown(summary)  # a point without a loss shows its seeds in the folder and dashes
    assert "| 1,200 | incomplete: 12 of 13 runs in the results folder | | | | | | |" in text
    assert "| 1,200 | 0.0025 | 0 of 1 | - | - | - | missing |" in text and "| 1,200 | 0.16 | 2 | - |" in text
    assert "| 1,200 | 0.02 | 2 | 5.0050 | +1.400 | - | - |" in text  # no eta* to compare with
    assert "| 4,800 | 0.02 | 2 | 5.0050 | +1.400 | +0.0 % | - |" in text
    assert "1 budget(s) with an optimum where the model learned context, a fit needs 2" in text
    assert "inf" not in text and "nan" not in text


def test_vertex_lr_is_the_parabolas_vertex_and_none_at_an_edge():
    lrs = [2.5e-3, 5e-3, 1e-2, 2e-2, 4e-2]
    u_star = math.log(7e-3)  # a loss exactly quadratic in ln lr: the vertex is recovered exactly
    loss = [4.0 + 0.3 * (math.log(x) - u_star) ** 2 for x in lrs]
    assert horizon.vertex_lr(lrs, loss) == pytest.approx(7e-3, rel=1e-9)
    ref = np.polyfit(np.log(lrs[:3]), [4.5, 4.2, 4.4], 2)  # three points: numpy's parabola through them
    assert horizon.vertex_lr(lrs[:3], [4.5, 4.2, 4.4]) == pytest.approx(math.exp(-ref[1] / (2 * ref[0])))
    assert horizon.vertex_lr(lrs, [4.0, 4.1, 4.2, 4.3, 4.4]) is None  # the lowest on the grid's edge
    assert horizon.vertex_lr(lrs, [4.3, 4.1, math.inf, 4.0, 4.2]) is None  # a neighbour diverged


def test_slope_interval_is_scipys_regression_with_a_t_interval():
    rng = np.random.default_rng(0)
    steps = [1200, 1200, 4800, 4800, 19200, 19200]
    eta = [0.02 * (t / 1200) ** -0.4 * math.exp(rng.normal(0, 0.2)) for t in steps]
    got = horizon.slope_interval(steps, eta)
    ref = stats.linregress(np.log(steps), np.log(eta))
    q = stats.t.ppf(0.975, len(steps) - 2)
    assert got["beta"] == pytest.approx(-ref.slope) and got["beta_se"] == pytest.approx(ref.stderr)
    assert got["beta_ci"] == pytest.approx([-ref.slope - q * ref.stderr, -ref.slope + q * ref.stderr])
    assert got["df"] == 4
    with pytest.raises(ValueError, match=">= 3 seed optima"):
        horizon.slope_interval([1200, 4800], [0.02, 0.01])


SEED_OPTIMA = {(1200, 0): 1.3e-2, (1200, 1): 1.1e-2, (4800, 0): 7e-3, (4800, 1): 8e-3, (19200, 0): 4.5e-3,
               (19200, 1): 3.6e-3}
"""Each (budget, seed)'s optimum: its loss is exactly quadratic in ln lr around it."""


def _seed_optima_budgets(plateaus=()) -> dict[int, dict]:
    """``budget_result`` per budget of :data:`SEED_OPTIMA` on PT's grid; at the budgets in ``plateaus`` no LR gains
    from context."""
    rows = [{"model": "pt", "steps": t, "seed": s, "optim.lr": x, "status": "ok",
             "context_gain": -0.05 if t in plateaus else 1.5, "context_gain_se": 0.03,
             "val_loss": 4.0 + 0.2 * (math.log(x) - math.log(e)) ** 2}
            for (t, s), e in SEED_OPTIMA.items() for x in [2.5e-3, 5e-3, 1e-2, 2e-2, 4e-2]]
    return {t: lr_horizon_report.budget_result(g, unigram=6.3, collapse_frac=0.5)
            for t, g in pd.DataFrame(rows).groupby("steps")}


def test_the_fit_over_seed_optima_recovers_each_seeds_vertex():
    truth = SEED_OPTIMA
    budgets = _seed_optima_budgets()
    assert budgets[4800]["seed_opt"] == pytest.approx([7e-3, 8e-3], rel=1e-9)
    fit = lr_horizon_report.model_fit(budgets)
    ref = stats.linregress(np.log([t for t, _ in truth]), np.log(list(truth.values())))
    assert fit["beta_seeds"] == pytest.approx(-ref.slope) and fit["n_seed_optima"] == 6 and fit["df"] == 4
    half = stats.t.ppf(0.975, 4) * ref.stderr
    assert fit["beta_ci"] == pytest.approx([-ref.slope - half, -ref.slope + half])
    line = lr_horizon_report._fit_line("pt", fit)
    assert f"over the 6 seed optima between grid points (parabola in ln eta) beta {-ref.slope:+.3g}" in line
    open_side = lr_horizon_report._fit_line("pt", {**fit, "beta_range": [-math.inf, 1.5]})
    assert "beta through every bracket [open, 1.5];" in open_side and "inf" not in open_side
    # beta between adjacent budgets: each pair's own regression of its four seed optima
    for (a, b, beta, lo, hi), pair in zip(fit["beta_local"], [(1200, 4800), (4800, 19200)], strict=True):
        sub = {k: v for k, v in truth.items() if k[0] in pair}
        r = stats.linregress(np.log([t for t, _ in sub]), np.log(list(sub.values())))
        q = stats.t.ppf(0.975, 2) * r.stderr
        assert (a, b) == pair and [beta, lo, hi] == pytest.approx([-r.slope, -r.slope - q, -r.slope + q])
        assert f"{a:,}-{b:,} steps {-r.slope:+.3g} [" in line


def test_a_seed_optimum_just_under_a_collapse_is_left_out_and_counted():
    lrs = [0.005, 0.01, 0.02, 0.04]
    above = {0: (5.9, 0.4, "ok"), 1: (5.1, 1.35, "ok"), 2: (math.inf, math.nan, "diverged"), 3: (6.4, 1.0, "ok")}
    rows = [{"optim.lr": x, "seed": s, "val_loss": v, "context_gain": c, "context_gain_se": 0.03, "status": st}
            for s, top in above.items()
            for x, (v, c, st) in zip(lrs, [(5.2, 1.2, "ok"), (5.05, 1.3, "ok"), (5.0, 1.4, "ok"), top])]
    optima, bounded = lr_horizon_report.seed_optima(pd.DataFrame(rows), 6.3, 0.5)
    # above the best: lost its context gain, trained, diverged, above the unigram loss
    assert bounded == [True, False, True, True] and optima[0] is optima[2] is optima[3] is None
    assert optima[1] == pytest.approx(horizon.vertex_lr(lrs, [5.2, 5.05, 5.0, 5.1]))
    assert lr_horizon_report.seed_optima(pd.DataFrame(rows), math.nan, 0.5)[1][2]  # diverged: without a unigram too
    # why: a cliff drags the vertex to the geometric mean of the best LR and the one below, wherever the optimum is
    assert horizon.vertex_lr(lrs, [5.2, 5.05, 5.0, 50.0]) == pytest.approx(math.sqrt(0.01 * 0.02), rel=1e-2)
    budgets = _seed_optima_budgets()
    budgets[4800] = {**budgets[4800], "seed_opt": [None, 8e-3], "seed_bounded": [True, False]}
    fit = lr_horizon_report.model_fit(budgets)
    kept = {k: v for k, v in SEED_OPTIMA.items() if k != (4800, 0)}
    ref = stats.linregress(np.log([t for t, _ in kept]), np.log(list(kept.values())))
    assert fit["beta_seeds"] == pytest.approx(-ref.slope)
    assert (fit["n_seed_optima"], fit["n_seed_bounded"], fit["n_seed_edges"], fit["df"]) == (5, 1, 0, 3)
    assert "over the 5 seed optima between grid points (1 against a collapse above them left out)" in \
        lr_horizon_report._fit_line("pt", fit)


def test_a_budget_where_the_model_learned_no_context_is_left_out_of_the_fit():
    """A plateau's optimum (eta*'s context gain not above zero) says nothing about how eta* moves with the budget:
    the fit runs over the other budgets, says which it left out, and with fewer than two left gives no beta."""
    fit = lr_horizon_report.model_fit(_seed_optima_budgets({1200}))
    kept = {k: v for k, v in SEED_OPTIMA.items() if k[0] != 1200}
    ref = stats.linregress(np.log([t for t, _ in kept]), np.log(list(kept.values())))
    assert fit["beta_seeds"] == pytest.approx(-ref.slope) and fit["n_seed_optima"] == 4
    assert "left out: no context learned at eta* of 1,200 steps" in fit["note"]
    none = lr_horizon_report.model_fit(_seed_optima_budgets({1200, 19200}))
    assert none["beta"] is None and "a fit needs 2" in none["note"] and "1,200, 19,200 steps" in none["note"]


def test_slope_difference_is_the_interaction_of_a_joint_least_squares_fit():
    """beta_b - beta_a and its SE against an independent computation: one least-squares fit of ln eta on [1, g,
    ln T, g ln T] (g = 1 for the second set) by numpy, its covariance s^2 (X'X)^-1; the interval is t at n - 4 df."""
    rng = np.random.default_rng(7)
    ta, tb = [1200, 1200, 4800, 4800, 19200, 19200], [300, 1200, 1200, 2400, 4800]  # spreads differ
    ea = 0.02 * (np.array(ta) / 1200.0) ** -0.3 * np.exp(rng.normal(0, 0.1, 6))
    eb = 0.03 * (np.array(tb) / 300.0) ** -0.5 * np.exp(rng.normal(0, 0.1, 5))
    got = horizon.slope_difference((ta, ea), (tb, eb))
    g = np.r_[np.zeros(6), np.ones(5)]
    lt = np.log(np.r_[ta, tb])
    design = np.c_[np.ones(11), g, lt, g * lt]
    coef, sse, *_ = np.linalg.lstsq(design, np.log(np.r_[ea, eb]), rcond=None)
    cov = sse[0] / 7 * np.linalg.inv(design.T @ design)
    assert got["diff"] == pytest.approx(-coef[3], rel=1e-9) and got["se"] == pytest.approx(math.sqrt(cov[3, 3]))
    assert got["beta_a"] == pytest.approx(-coef[2], rel=1e-9) and got["df"] == 7
    q = stats.t.ppf(0.975, 7)
    assert got["ci"] == pytest.approx([-coef[3] - q * math.sqrt(cov[3, 3]), -coef[3] + q * math.sqrt(cov[3, 3])])
    with pytest.raises(ValueError, match=">= 5 points"):
        horizon.slope_difference(([1200, 4800], [0.02, 0.01]), ([1200, 4800], [0.02, 0.01]))


def test_the_anchor_makes_the_study_model_the_mup_model_a_transfer_trains_at_that_width():
    """By default 'mup_sp' is anchored at the study's width (SP there); sweep.lr_horizon.anchor=32 at width 128 gives
    the base shape lr-transfer gives its width 128 when tuned at 32, and the start line and the report say so."""
    base = ["preset=lr_study", "sweep.lr_horizon.width=128", "sweep.lr_horizon.scaling=rank"]
    sp = lr_horizon.pt_shape(cli.compose(base))
    assert sp["model.width"] == 128 and sp["model.base_width"] == 128
    cfg = cli.compose(base + ["sweep.lr_horizon.anchor=32", "sweep.lr_transfer.widths=[32,64,128]",
                              "sweep.lr_transfer.scaling=rank"])
    mup = lr_horizon.pt_shape(cfg)
    assert mup == {"model.width": 128, "model.scaling": "rank", **lr_transfer_plan._anchor(cfg)}
    assert mup["model.base_width"] == 32 and with_overrides(cfg, mup).model.rank == 4 * mup["model.base_rank"]
    assert "PT width 128 (mup_sp anchored at 32)" in cli.start_line("lr-horizon", cfg)
    assert "anchored" not in cli.start_line("lr-horizon", cli.compose(base))
    assert lr_horizon_report.anchored({"width": 128, "anchor": 32}) == " anchored at 32"
    assert lr_horizon_report.anchored({"width": 32, "anchor": 32}) == lr_horizon_report.anchored({"width": 64}) == ""
    with pytest.raises(ConfigError, match=r"^sweep.lr_horizon.anchor: anchors 'mup_sp' only; model.parametrization "
                                          r"is 'sp' \(leave the anchor at 0\)$"):
        cli.compose(base + ["sweep.lr_horizon.anchor=32", "model.parametrization=sp"])
