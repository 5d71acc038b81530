"""scaling-curves at a trained budget: baselines tuned on an LR grid without early stopping, PT at the config's own
point, the learning curves of every reported run and the budget check against the baselines' plateau.

The Ray test runs the grid mode end to end at smoke size; the others check the pieces against hand-computed values.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from ptsweep.analysis import learning_curves as lc
from ptsweep.config import TRANSFER_KEYS, compose, flatten, to_dict
from ptsweep.errors import ConfigError, SweepError
from ptsweep.sweeps import baseline_tuning
from ptsweep.trials import ledger
from ptsweep.sweeps.transfer import read_transfer

from experiment_scripts import load_script

GRID = [1e-3, 3e-3, 1e-2]


def _curve(steps, gains, series="bert", scale=64, seed=0, key="k"):
    return pd.DataFrame({"series": series, "scale": scale, "seed": seed, "trial_key": key, "step": steps,
                         "tokens": [s * 1024.0 for s in steps], "context_gain": gains})


def test_crossing_step_is_the_first_evaluation_at_or_above_the_threshold():
    c = _curve([0, 10, 20, 30, 40], [-0.1, 0.4, 1.0, 0.9, 1.3])
    assert lc.crossing_step(c, 1.0) == 20  # reached exactly at 20, the dip at 30 does not move it
    assert lc.crossing_step(c, 1.2) == 40
    assert math.isinf(lc.crossing_step(c, 2.0))
    # between evaluations: 0.4 at 10 -> 1.0 at 20 meets 0.7 at 15; 0.9 at 30 -> 1.3 at 40 meets 1.2 at 37.5
    assert lc.interpolated_crossing(c, 0.7) == pytest.approx(15.0) and lc.interpolated_crossing(c, 1.2) == 37.5
    assert lc.interpolated_crossing(c, -0.5) == 0 and math.isinf(lc.interpolated_crossing(c, 2.0))


def test_budget_check_takes_the_slowest_seed_of_the_slowest_baseline_and_ignores_pt():
    curves = pd.concat([_curve([0, 10, 20, 30], [0, 0.2, 1.1, 1.5], seed=0),  # bert seed 0 crosses at 20
                        _curve([0, 10, 20, 30], [0, 0.1, 0.5, 1.2], seed=1),  # bert seed 1 crosses at 30
                        _curve([0, 10, 20, 30], [0, 1.1, 1.2, 1.3], series="ut"),  # ut crosses at 10
                        _curve([0, 10, 20, 30], [0, 0.0, 0.0, 0.0], series="pt")])  # PT never: not a baseline
    check = lc.budget_check(curves, budget_steps=45)
    assert check["slowest"] == "bert at scale 64" and check["slowest_step"] == 30
    assert check["crossings"]["bert at scale 64"] == [20, 30] and check["covered"] is True  # 45 = 1.5 x 30
    assert lc.budget_check(curves, budget_steps=44)["covered"] is False
    assert "1.50x" in lc.budget_text(check) and "covered" in lc.budget_text(check)
    # the slowest seed (1) is 0.5 at 20 and 1.2 at 30: ~27.1 between evaluations, reported, not judged
    assert check["slowest_interpolated"] == pytest.approx(20 + 10 * 0.5 / 0.7)
    assert "crosses at ~27 (1.658x)" in lc.budget_text(check)
    never = lc.budget_check(pd.concat([curves, _curve([0, 10], [0, 0.3], series="ut", scale=128)]), 45)
    assert never["slowest"] == "ut at scale 128" and never["covered"] is False
    assert "NOT COVERED" in lc.budget_text(never) and "never" in lc.budget_text(never)
    assert lc.budget_check(curves[curves["series"] == "pt"], 45)["covered"] is None


def test_read_curves_keeps_evaluations_and_the_last_copy_of_a_replayed_step(tmp_path):
    hist = tmp_path / "trials" / "final-bert-w64-s0-x" / "history.jsonl"
    hist.parent.mkdir(parents=True)
    rows = [{"step": 0, "tokens": 0, "val_loss": 7.0, "context_gain": -1.0, "unigram_loss": 6.0},
            {"step": 4, "tokens": 4096, "train_loss": 6.5},  # a training log row: not an evaluation
            {"step": 8, "tokens": 8192, "val_loss": 6.4, "context_gain": -0.5, "unigram_loss": 6.0},
            {"step": 8, "tokens": 8192, "val_loss": 6.3, "context_gain": -0.4, "unigram_loss": 6.0}]
    hist.write_text("\n".join(json.dumps(r) for r in rows))
    runs = pd.DataFrame({"series": ["bert", "pt"], "scale": [64, 64], "seed": [0, 0],
                         "trial_key": ["final-bert-w64-s0-x", ""]})  # PT's run failed before training: no key
    curves = lc.read_curves(runs, tmp_path)
    assert list(curves["step"]) == [0, 8] and list(curves["val_loss"]) == [7.0, 6.3]
    assert math.isnan(curves["no_context_loss"].iloc[0])  # absent in the history: NaN, never 0


def test_grid_and_config_point_settings_validate():
    cfg = compose(["preset=trained"])
    assert cfg.sweep.baseline.grid == [1e-3, 2e-3, 4e-3] and baseline_tuning.budget(cfg) == 3
    assert cfg.sweep.baseline.lr_widen == 2 and "up to 2 time(s)" in baseline_tuning.method(cfg)
    assert "no early stopping" in baseline_tuning.method(cfg)
    assert cfg.sweep.transfer_from == "grid" and cfg.sweep.transfer_grid == [5e-3, 1e-2, 2e-2]
    with pytest.raises(SweepError, match="transfer_from=grid"):  # verify-transfer cannot tune PT's LR itself
        read_transfer(cfg)
    cfg = compose(["preset=trained", "sweep.transfer_from=config"])
    values, provenance, path = read_transfer(cfg)  # no transfer.yaml needed: the preset's own 7 values
    flat = flatten(to_dict(cfg))
    assert path is None and values == {k: float(flat[k]) for k in TRANSFER_KEYS} and values["optim.lr"] == cfg.optim.lr
    assert provenance["source"] == "config" and provenance["num_samples"] == 0
    for bad in ("[1e-3,2e-3]", "[2e-3,1e-3,4e-3]", "[0,1e-3,2e-3]"):
        with pytest.raises(ConfigError, match="sweep.baseline.grid"):
            compose(["preset=smoke", f"sweep.baseline.grid={bad}"])
        with pytest.raises(ConfigError, match="sweep.transfer_grid"):
            compose(["preset=smoke", "sweep.transfer_from=grid", f"sweep.transfer_grid={bad}"])
    with pytest.raises(ConfigError, match="sweep.transfer_grid"):  # grid without its LRs
        compose(["preset=smoke", "sweep.transfer_from=grid"])


def test_pt_rows_fail_with_why_when_no_pt_grid_trial_finished():
    from ptsweep.sweeps import scaling_curves

    cfg = compose(["preset=smoke", "sweep.transfer_from=grid", "sweep.transfer_grid=[1e-3,1e-2,1e-1]",
                   "sweep.seeds=2"])
    plan = scaling_curves._Plan(seeds={"pt": [0, 1]})
    values = {k: 1.0 for k in TRANSFER_KEYS}
    scaling_curves._plan_pt(cfg, plan, {**values, "optim.lr": math.nan}, 1000)
    assert not plan.finals and len(plan.runs) == 2 * 2  # scales 64 and 128 x 2 seeds, nothing to train
    assert all(r["status"] == "failed" and "PT grid" in r["error"] for r in plan.runs)
    scaling_curves._plan_pt(cfg, plan, {**values, "optim.lr": 0.01}, 1000)
    assert len(plan.finals) == 4 and all(o["optim.lr"] == 0.01 for o in plan.finals)
    assert all("tuned at width 64" in r["from"] for r in plan.runs[4:])


@pytest.mark.usefixtures("ray_local")
def test_scaling_curves_tunes_pt_lr_at_the_smallest_scale_and_transfers_it(tmp_path):
    from ptsweep.sweeps import scaling_curves

    grid = [0.003, 0.015, 0.075]
    cfg = compose(["preset=smoke", "tracker=disabled", f"out_dir={tmp_path}", "sweep.transfer_from=grid",
                   f"sweep.transfer_grid=[{','.join(map(str, grid))}]", "sweep.models=[pt]", "sweep.scales=[64,128]",
                   "sweep.baseline.lr_widen=0", "sweep.bootstrap=20"])
    sdir = scaling_curves.run(cfg)
    lr = pd.read_csv(sdir / "lr_search.csv")
    assert sorted(lr["optim.lr"]) == grid and (lr["model"] == "pt").all() and (lr["scale"] == 64).all()
    assert (lr["status"] == "ok").all() and (lr["steps"] == 16).all()  # the whole budget, none stopped early
    best = lr.loc[lr["val_loss"].idxmin(), "optim.lr"]
    runs = pd.read_csv(sdir / "runs.csv")
    assert sorted(runs["scale"]) == [64, 128] and (runs["best_lr"] == best).all()  # transferred untuned to 128
    assert runs["from"].str.contains("tuned at width 64").all()
    for key in runs["trial_key"]:  # the finals train at the grid's best LR and the reported seed
        over = json.loads((sdir / "trials" / key / "trial.json").read_text())["overrides"]
        assert over["optim.lr"] == best and over["seed"] == cfg.seed
    summary = json.loads((sdir / "summary.json").read_text())
    assert summary["transferred"]["optim.lr"] == best and summary["transfer_provenance"]["source"] == "grid"
    effort = summary["tuning_trials"]["pt"]
    assert effort["total"] == 3 and f"optim.lr on the grid {grid} at width 64" in effort["description"]
    starts = [line.split()[-1] for line in (sdir / ledger.STARTS_LOG).read_text().splitlines()]
    assert [k[:8] for k in starts] == ["hp-pt-w6"] * 3 + ["final-pt"] * 2  # the grid before the finals
    planned = scaling_curves.planned_trials(cfg)
    assert [(t.stage, t.scale) for t in planned] == [("search", 64)] * 3 + [("final", 64), ("final", 128)]


@pytest.mark.usefixtures("ray_local")
def test_scaling_curves_grid_mode_learning_curves_and_budget(tmp_path):
    from ptsweep.sweeps import scaling_curves

    cfg = compose(["preset=smoke", "tracker=disabled", f"out_dir={tmp_path}", "sweep.transfer_from=config",
                   f"sweep.baseline.grid=[{','.join(map(str, GRID))}]", "sweep.scales=[64]", "sweep.seeds=2",
                   "sweep.models=[pt,bert]", "sweep.bootstrap=20", "optim.lr=0.015",
                   "sweep.baseline.lr_widen=0"])  # the grid alone (its edge rule: tests/test_grid_edge.py)
    sdir = scaling_curves.run(cfg)
    lr = pd.read_csv(sdir / "lr_search.csv")
    assert sorted(lr["optim.lr"]) == GRID and (lr["status"] == "ok").all()  # one trial per LR, none stopped early
    assert (lr["steps"] == 16).all() and (lr["optim.warmup_frac"] == cfg.optim.warmup_frac).all()
    runs = pd.read_csv(sdir / "runs.csv")
    bert = runs[runs["model"] == "bert"]
    best = lr.loc[lr["val_loss"].idxmin(), "optim.lr"]
    assert len(bert) == 2 and (bert["best_lr"] == best).all()  # finals at the grid's best validation loss
    for key in bert["trial_key"]:  # ... at fresh seeds (0, 1), not the grid's search seed 2
        over = json.loads((sdir / "trials" / key / "trial.json").read_text())["overrides"]
        assert over["optim.lr"] == best and over["seed"] in (0, 1)
    pt = runs[runs["model"] == "pt"]
    assert len(pt) == 2 and (pt["best_lr"] == 0.015).all()  # the config's own point, untuned
    summary = json.loads((sdir / "summary.json").read_text())
    assert summary["tuning_trials"]["pt"]["total"] == 0 and summary["transfer_file"] is None
    # every grid trial and PT run started before any BERT final (they ran as one list)
    starts = [line.split()[-1] for line in (sdir / ledger.STARTS_LOG).read_text().splitlines()]
    first_final = min(i for i, k in enumerate(starts) if k.startswith("final-bert"))
    assert all(i < first_final for i, k in enumerate(starts) if k.startswith(("hp-bert", "final-pt")))
    curves = pd.read_csv(sdir / "learning_curves.csv")
    assert set(curves["trial_key"]) == set(runs["trial_key"])  # every reported run, no search trial
    assert sorted(set(curves["step"])) == [0, 8, 16]  # train.eval_every = 8 of 16 steps, plus init
    assert curves[["val_loss", "context_gain", "unigram_loss", "no_context_loss"]].notna().all().all()
    assert (sdir / "learning_curves_w64.png").read_bytes()[:4] == b"\x89PNG"
    assert "learning_curves_w64.png" in summary["plots"]
    check = summary["budget_check"]
    assert check["budget_steps"] == 16 and check["slowest"] == "bert at scale 64"
    assert "Budget check" in (sdir / "report.md").read_text()
    late = summary["plateau_late"]  # the plateau gate's cells, from these curves: 16 steps reach +1 nat nowhere
    assert late == {f"{m} at scale 64": f"{m} never reached +1 nat of context gain in 16 steps" for m in ("pt", "bert")}
    report = (sdir / "report.md").read_text()
    assert "Plateau gate: no verdict from the comparisons of bert at scale 64 (bert never" in report
    assert Path(sdir / "learning_curves.parquet").exists()
    # experiments/scaling/curves_table.py: one row per trial with a history, finished ones with their test gain
    table = load_script("experiments/scaling/curves_table.py")
    rows = [table.trial_row(d, 8) for d in sorted((sdir / "trials").iterdir())]
    text = table.markdown(rows, 8).splitlines()
    assert len(text) == 2 + len(rows) == 2 + 3 + 2 + 2  # header, rule, 3 grid + 2 BERT finals + 2 PT runs
    assert all(r["final"]["test_context_gain"] == pytest.approx(float(t.split("|")[-2].split("±")[0]), abs=6e-4)
               for r, t in zip(rows, text[2:]))


def test_context_lines_give_a_failed_cells_error_not_an_inf_loss():
    from ptsweep.reports.scaling_tables import context_lines
    table = pd.DataFrame([
        {"series": "modernbert", "scale": 64, "loss": math.inf, "status": "failed",
         "error": "no modernbert shape of the sizing rule matches total = 2.11e+05 within a factor 1.5"},
        {"series": "modernbert", "scale": 128, "loss": 6.7066, "unigram_loss": 5.9074, "no_context_loss": 5.3983,
         "context_gain": 0.5, "context_gain_se": 0.1, "status": "ok", "error": None}])
    lines = context_lines(table, "test")
    assert lines[2] == ("- modernbert at scale 64: failed: no modernbert shape of the sizing rule matches total = "
                        "2.11e+05 within a factor 1.5")
    assert lines[3].startswith("- modernbert at scale 128: loss 6.7066 (unigram 5.9074, no-context 5.3983); ")
    assert "inf" not in "\n".join(lines) and "nan" not in "\n".join(lines)  # no visible-target counts: no part
    table.loc[1, ["visible_loss", "visible_no_context"]] = [4.2, 3.8]
    assert context_lines(table, "test")[3].endswith("(learned); visible targets 4.200 (no-context 3.800)")
    table.loc[1, ["params", "match_ratio"]] = [1536128, 1.349]  # a baseline's shape, 1.349x PT's count
    assert context_lines(table, "test", "non_embedding")[3].startswith(
        "- modernbert at scale 128, 1.54M parameters (1.35x PT's non_embedding): loss 6.7066")
    table.loc[1, "match_ratio"] = math.nan  # PT's own cell: its count, no ratio
    assert context_lines(table, "test")[3].startswith("- modernbert at scale 128, 1.54M parameters: loss")


def test_tuning_rows_keep_the_full_budget_runs_with_their_exit_step(tmp_path):
    from ptsweep.reports import scaling_tables

    def trial(key, steps, status="ok", gains=()):
        if gains:
            hist = tmp_path / "trials" / key / "history.jsonl"
            hist.parent.mkdir(parents=True)
            hist.write_text("".join(json.dumps({"step": 100 * (i + 1), "val_loss": 5.0, "context_gain": g}) + "\n"
                                    for i, g in enumerate(gains)))
        return {"model": "bert", "scale": 32, "trial_key": key, "optim.lr": float(len(key)) * 1e-3,
                "steps": steps, "status": status, "search_round": 0 if status == "ok" else None,
                "val_loss": 4.5 if status == "ok" else None, "test_loss": 4.6 if status == "ok" else None,
                "test_context_gain": 1.2 if status == "ok" else None, "test_context_gain_se": 0.04}

    table = pd.DataFrame([trial("a", 400, gains=[0.2, 1.1, 1.4, 1.3]),   # crosses +1 at step 200
                          trial("bb", 400, gains=[0.5, 1.2, 0.3, 0.4]),  # crosses at 200, ends below
                          trial("ccc", 200, gains=[0.1, 0.2]),           # early-stopped: not a budget run
                          trial("dddd", None, status="missing")])
    rows = {r["lr"]: r for r in scaling_tables.tuning_rows(table, tmp_path, 400, 1.0, full_searches=True)}
    assert sorted(rows) == [1e-3, 2e-3, 4e-3]
    assert (rows[1e-3]["exit_step"], rows[1e-3]["fell_back"]) == (200, False)
    assert (rows[2e-3]["exit_step"], rows[2e-3]["fell_back"]) == (200, True)
    assert rows[4e-3]["status"] == "missing" and math.isnan(rows[4e-3]["val_loss"])
    assert [r["lr"] for r in scaling_tables.tuning_rows(table, tmp_path, 400, 1.0, full_searches=False)] == [1e-3, 2e-3]
    lines = scaling_tables.tuning_lines({"tuning_runs": list(rows.values()), "search_training_seed": 4,
                                         "budget_check": {"threshold": 1.0}})
    assert "| bert at scale 32 | 0.002 | 0 | 4.500 | 4.600 | +1.200 ± 0.040 | 200 (below +1 at the end) |" in lines
    assert "| bert at scale 32 | 0.004 | 0 | missing | | | |" in lines and lines[0] == "" and "training seed 4" in lines[1]
