"""lr-transfer study (ptsweep.sweeps.lr_transfer): grid construction, analysis of a results table, and one smoke run
through Ray Tune that resumes without re-running finished trials."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from ptsweep.cli import compose
from ptsweep.config import ConfigError, with_overrides
from ptsweep.sweeps import lr_transfer as lt


@pytest.fixture(scope="module")
def smoke_cfg(tmp_path_factory):
    out = tmp_path_factory.mktemp("lrt")
    return compose(["preset=smoke", f"out_dir={out}", "tracker=disabled"])


def test_grid_is_log_spaced_and_covers_every_point(smoke_cfg):
    cfg = with_overrides(smoke_cfg, {"sweep.lr_grid_range": [1e-3, 1e-1], "sweep.lr_grid_points": 5,
                                     "sweep.lr_widths": [32, 64, 128], "sweep.lr_weight_grid": [0.5, 2.0],
                                     "sweep.lr_seeds": 2})
    grid = lt.lr_grid(cfg)
    assert grid[0] == 1e-3 and grid[-1] == 1e-1 and np.allclose(np.diff(np.log10(grid)), 0.5, atol=1e-3)
    trials, labels = lt.trial_list(cfg)
    lr_trials = [t for t, lab in zip(trials, labels) if lab.startswith("lr-")]
    w_trials = [t for t, lab in zip(trials, labels) if lab.startswith("wattn-")]
    assert len(lr_trials) == 2 * 3 * 5 * 2  # parametrizations x widths x LRs x seeds
    assert len(w_trials) == 3 * 2 * 2 and all(t["model.parametrization"] == "mup" for t in w_trials)
    assert all(t["model.scaling"] == cfg.sweep.lr_scaling for t in trials)
    assert all(t["train.tokens"] == cfg.sweep.lr_tokens for t in trials)


def test_config_rejects_bad_grids(smoke_cfg):
    with pytest.raises(ConfigError, match="sweep.lr_grid_range"):
        with_overrides(smoke_cfg, {"sweep.lr_grid_range": [1e-1, 1e-3]})
    with pytest.raises(ConfigError, match="sweep.lr_widths"):
        with_overrides(smoke_cfg, {"sweep.lr_widths": [64]})
    with pytest.raises(ConfigError, match="sweep.coord_widths"):
        with_overrides(smoke_cfg, {"sweep.coord_widths": [64, 64]})


def test_analysis_finds_optima_drift_and_edges(smoke_cfg, tmp_path):
    cfg = with_overrides(smoke_cfg, {"sweep.lr_grid_range": [1e-3, 1e-1], "sweep.lr_grid_points": 5,
                                     "sweep.lr_widths": [32, 128], "sweep.lr_weight_grid": [0.25, 1.0, 4.0]})
    rows = []
    for par in ("mup", "sp"):
        for w in (32, 128):
            for lr in lt.lr_grid(cfg):
                best = 1e-2 if par == "mup" else 1e-2 * 32 / w  # SP optimum shrinks like 1/width
                loss = 5 + (math.log10(lr) - math.log10(best)) ** 2
                rows.append({"label": f"lr-{par}-w{w}", "model.parametrization": par, "model.width": w,
                             "optim.lr": lr, "model.w_attn": 1.0, "val_loss": loss, "status": "ok"})
        rows[-1]["val_loss"] = math.inf  # a diverged run is dropped, not chosen
    for w in (32, 128):
        for wa in (0.25, 1.0, 4.0):
            rows.append({"label": f"wattn-mup-w{w}", "model.parametrization": "mup", "model.width": w,
                         "optim.lr": 1e-2, "model.w_attn": wa, "val_loss": 5 + abs(math.log(wa)), "status": "ok"})
    df = pd.DataFrame(rows)
    res = lt.analyse(df, cfg)
    assert res["lr"]["mup"]["drift_log2"] == 0.0
    assert res["lr"]["sp"]["optimum_lr"] == {32: 1e-2, 128: pytest.approx(3.162e-3, rel=1e-3)}
    assert res["lr"]["sp"]["drift_log2"] < -1.5
    assert not res["lr"]["mup"]["drift_is_bound"]
    assert res["w_attn"]["mup"]["optimum_lr"] == {32: 1.0, 128: 1.0}
    images = lt.plot(df, tmp_path)
    assert set(images) == {"lr_transfer", "w_attn_transfer"} and all(p.exists() for p in images.values())


@pytest.mark.slow
def test_smoke_study_runs_on_ray_and_resumes(smoke_cfg):
    cfg = with_overrides(smoke_cfg, {"sweep.lr_widths": [32, 64], "sweep.lr_grid_points": 2,
                                     "sweep.lr_weight_grid": [], "sweep.lr_parametrizations": ["mup"]})
    sdir = lt.run(cfg)
    summary = json.loads((sdir / "summary.json").read_text())
    trials = pd.read_csv(sdir / "trials.csv")
    assert len(trials) == 4 and summary["n_trials"] == 4
    assert set(summary["lr"]) == {"mup"} and set(summary["lr"]["mup"]["optimum_lr"]) == {"32", "64"}
    assert (sdir / "lr_transfer.png").exists()
    starts = (sdir / "trial_starts.log").read_text().splitlines()
    lt.run(cfg)  # resume: every trial is in the ledger, nothing trains again
    assert (sdir / "trial_starts.log").read_text().splitlines() == starts
