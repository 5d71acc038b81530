"""scaling-curves running the cheaper baseline LR rule (sweep.baseline.rule=extrapolate) at smoke size on a local Ray:
the searched scales run their grid, the larger scale runs exactly the local LRs of the power law through their best
LRs (recomputed here in closed form from the recorded results), its finals use the best local LR, the report says
so, and the trials started are the plan's; a larger scale without a fit gets failed rows, no trial."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

pytest.importorskip("ray")

from ptsweep.config import compose  # noqa: E402
from ptsweep.sweeps import baseline_rule, baseline_tuning, scaling_curves
from ptsweep.trials import ledger  # noqa: E402

GRID = [3e-3, 1e-2, 3e-2]


def rule_cfg(out_dir, *overrides: str):
    # the grid alone, no edge-rule LRs: the plan (which counts none) is the list of trials started
    return compose(["preset=smoke", "tracker=disabled", f"out_dir={out_dir}", "sweep.transfer_from=config",
                    "sweep.models=[bert]", "sweep.scales=[64,128,192]", "sweep.baseline.rule=extrapolate",
                    "sweep.baseline.search_scales=2", "sweep.baseline.local_points=2", "sweep.baseline.local_factor=2",
                    f"sweep.baseline.grid=[{','.join(map(str, GRID))}]", "sweep.baseline.lr_widen=0", *overrides])


def overrides_of(sdir, key: str) -> dict:
    return json.loads((sdir / "trials" / key / "trial.json").read_text())["overrides"]


@pytest.mark.usefixtures("ray_local")
def test_extrapolate_rule_runs_the_closed_form_local_lrs_at_the_larger_scale(tmp_path):
    cfg = rule_cfg(tmp_path)
    sdir = scaling_curves.run(cfg)
    lr = pd.read_csv(sdir / "lr_search.csv")
    runs = pd.read_csv(sdir / "runs.csv").set_index("scale")
    assert lr.groupby("scale").size().to_dict() == {64: 3, 128: 3, 192: 2}
    for s in (64, 128):  # the searched scales ran their grid
        assert sorted(lr[lr["scale"] == s]["optim.lr"]) == pytest.approx(GRID)

    # the power law through the searched scales' best LRs, by hand: eta = a P^-b through two points
    ok = lr[(lr["status"] == "ok") & lr["val_loss"].map(math.isfinite)]
    best = {s: float(ok.loc[ok[ok["scale"] == s]["val_loss"].idxmin(), "optim.lr"]) for s in (64, 128)}
    size = {s: float(runs.loc[s, "non_embedding_params"]) for s in (64, 128, 192)}
    assert best[64] != best[128], "equal best LRs give b = 0: the size of the larger scale would not matter"
    b = math.log(best[64] / best[128]) / math.log(size[128] / size[64])
    lr_hat = best[64] * (size[192] / size[64]) ** -b
    expected = [lr_hat / math.sqrt(2), lr_hat * math.sqrt(2)]  # 2 points, factor 2: centred between the two
    local = lr[lr["scale"] == 192]
    assert sorted(local["optim.lr"]) == pytest.approx(expected, rel=1e-9)
    searched_warmup = json.loads((sdir / "summary.json").read_text())["lr_search"]["bert-w128"]["best"]
    for key in local["trial_key"]:  # at the searched warm-up, the search seed and budget, under their own label
        over = overrides_of(sdir, key)
        assert over["optim.warmup_frac"] == searched_warmup["optim.warmup_frac"] == cfg.optim.warmup_frac
        assert over["seed"] == baseline_tuning.search_training_seed(cfg) and key.startswith("local-bert-w192-")
        assert over["train.tokens"] == baseline_tuning.search_tokens(cfg)

    summary = json.loads((sdir / "summary.json").read_text())
    info = summary["lr_search"]["bert-w192"]
    assert info["rule"] == "extrapolated" and info["fit"]["b"] == pytest.approx(b, rel=1e-9)
    assert info["lr_hat"] == pytest.approx(lr_hat, rel=1e-9)
    best_local = float(local.loc[local["val_loss"].idxmin(), "optim.lr"])
    assert runs.loc[192, "best_lr"] == pytest.approx(best_local, rel=1e-12)
    assert overrides_of(sdir, runs.loc[192, "trial_key"])["optim.lr"] == pytest.approx(best_local, rel=1e-12)
    report = (sdir / "report.md").read_text()
    assert "rule 'extrapolate': 3 grid LRs at scales 64, 128" in report
    assert f"N=192: LR extrapolated to {lr_hat:.3g}" in report and f"best {best_local:.3g}" in report

    # the trials started are the plan's, and no local trial started before the searched scales' grids
    starts = [line.split()[-1] for line in (sdir / ledger.STARTS_LOG).read_text().splitlines()]
    assert len(starts) == len(set(starts)) == len(scaling_curves.planned_trials(cfg)) == 11
    assert not [k for k in starts if k.startswith("hp-bert-w192")]  # the combined first phase left it out
    order = [i for i, k in enumerate(starts) if k.startswith("hp-")], [i for i, k in enumerate(starts)
                                                                         if k.startswith("local-")]
    assert len(order[0]) == 6 and len(order[1]) == 2 and max(order[0]) < min(order[1])


def test_a_larger_scale_without_two_searched_scales_gets_failed_rows_and_no_trial(tmp_path):
    """One finished searched scale (the other's trials all failed): the fit's reason on every seed's row, no trial
    started (this path runs no Ray) - never a full search."""
    cfg = rule_cfg(tmp_path)
    plan = scaling_curves._Plan(seeds=scaling_curves.final_seeds(cfg))
    searched = {1e5: {"optim.lr": 1e-2, "optim.warmup_frac": 0.25}}
    scaling_curves._plan_baseline(cfg, plan, "bert", 192, "channels", cfg.data.vocab_size, tmp_path, searched)
    assert [r["status"] for r in plan.runs] == ["failed"] * cfg.sweep.seeds and not plan.finals
    reason = plan.runs[0]["error"]
    assert reason.startswith("rule 'extrapolate': no LR for bert at scale 192: need >= 2") and "\n" not in reason
    assert plan.lr_info["bert-w192"]["n_trials"] == 0 and not (tmp_path / "trials").exists()
    assert baseline_rule.scale_line(192, plan.lr_info["bert-w192"]) == f"N=192: no LR - {reason}"
