"""ptsweep/analysis/weight_grid.py (a width's information-weight grid from weight_points ledgers) against
by-hand seed means and scipy's paired t interval, and weight_points.py's LR points (the every-weight-1 trial at
another eta)."""

import json
from pathlib import Path

import pytest
from scipy import stats

from ptsweep.analysis import weight_grid
from ptsweep.config import compose
from ptsweep.sweeps.lr_transfer_plan import point_trial

from experiment_scripts import load_script


weight_points = load_script("experiments/lr-transfer/weight_points.py")

ONES = {0: 4.73, 1: 4.72, 2: 4.74}
ATTN2 = {0: 4.70, 1: 4.71, 2: 4.735}


def _write(folder: Path, seed: int, loss: float, lr: float = 0.02, width: int = 128, **weights) -> None:
    """A finished trial as the runner writes it (``trials/<key>/final.json``), with its overrides."""
    ov = {"model.scaling": "rank", "train.tokens": 1228800.0, "model.parametrization": "mup_sp",
          "model.width": width, "seed": seed, "model.base_width": 32, "optim.lr": lr,
          **{f"model.{k}": v for k, v in weights.items()}}
    d = folder / "trials" / f"t-{seed}-{lr}-{width}-{sorted(weights.items())}"
    d.mkdir(parents=True)
    (d / "final.json").write_text(json.dumps({"status": "ok", "overrides": ov, "val_loss": loss,
                                              "context_gain": 1.3}))


@pytest.fixture()
def ledger(tmp_path):
    for s in range(3):
        _write(tmp_path, s, ONES[s], w_unary=1.0)
        _write(tmp_path, s, ATTN2[s], w_attn=2.0)
    _write(tmp_path, 0, 4.80, w_attn=0.5)
    _write(tmp_path, 0, 4.76, lr=0.04, w_unary=1.0)
    _write(tmp_path, 0, 4.75, width=32, w_attn=2.0)  # another width: left out
    _write(tmp_path, 0, 4.60, w_attn=2.0, w_head=2.0)  # two weights changed: not a point of either grid
    return tmp_path


def test_points_read_each_single_weight_run_and_the_every_weight_1_runs(ledger):
    df = weight_grid.points([ledger], 128)
    assert len(df) == 8
    assert df["weight"].isna().sum() == 4  # w_unary = 1 is the default model: every weight 1 (one at eta 0.04)
    assert set(df.dropna(subset=["weight"])["value"]) == {0.5, 2.0}


def test_weight_row_gives_seed_means_optimum_and_the_paired_t_interval_of_best_minus_1(ledger):
    lines = weight_grid.weight_table(weight_grid.points([ledger], 128))
    (row,) = [ln for ln in lines if ln.startswith("| w_attn ")]
    mean1, mean2 = sum(ONES.values()) / 3, sum(ATTN2.values()) / 3
    assert f"0.5: 4.8000 (1) / 1: {mean1:.4f} (3) / 2: {mean2:.4f} (3)" in row
    diffs = [ATTN2[s] - ONES[s] for s in range(3)]
    lo, hi = stats.ttest_rel([ATTN2[s] for s in range(3)], [ONES[s] for s in range(3)]).confidence_interval(0.95)
    assert f"{sum(diffs) / 3:+.4f}" in row and f"[{lo:+.3f}, {hi:+.3f}] (3)" in row
    # seed 2 prefers 1 by 0.005 while seeds 0-1 prefer 2 by ~0.02: 1 stays within 2 paired SE
    assert "| 2 [1, 2], edge |" in row  # 2 is the top of this grid
    assert not any(ln.startswith("| w_head ") for ln in lines)  # no single-weight w_head run: no row
    assert row.endswith(f"| 2: {sum(diffs) / 3:+.4f} ± {stats.sem(diffs):.4f} [{lo:+.3f}, {hi:+.3f}] (3) |")
    _write(ledger, 3, 4.75, w_unary=1.0)  # a 4th every-weight-1 seed (an LR study's) leaves w_attn's row as it was
    again = weight_grid.weight_table(weight_grid.points([ledger], 128))
    assert [ln for ln in again if ln.startswith("| w_attn ")] == [row]


def test_where_1_is_the_optimum_the_last_column_is_the_runner_up_minus_1(ledger):
    """Values 0.5 (3 seeds, worse) and 4 (1 seed, worse still): the runner-up among the values with the most seeds
    is 0.5, and its gap to 1 is the column, paired by seed."""
    worse = {0: 4.76, 1: 4.74, 2: 4.78}
    for s in range(3):
        _write(ledger, s, worse[s], w_head=0.5)
    _write(ledger, 0, 4.74, w_head=4.0)  # lower than 0.5's seed mean, but on one seed: not the runner-up
    (row,) = [ln for ln in weight_grid.weight_table(weight_grid.points([ledger], 128)) if ln.startswith("| w_head ")]
    assert "| 1 [1" in row
    diffs = [worse[s] - ONES[s] for s in range(3)]
    lo, hi = stats.ttest_rel(list(worse.values()), list(ONES.values())).confidence_interval(0.95)
    assert row.endswith(f"| 0.5: {sum(diffs) / 3:+.4f} ± {stats.sem(diffs):.4f} [{lo:+.3f}, {hi:+.3f}] (3) |")


def test_lr_rows_are_the_every_weight_1_runs_per_eta(ledger):
    lines = weight_grid.lr_table(weight_grid.points([ledger], 128))
    assert lines[2].startswith(f"| 0.02 | {sum(ONES.values()) / 3:.4f} (3) |")
    assert lines[3] == f"| 0.04 | 4.7600 (1) | +1.300 | {100 * (4.76 / (sum(ONES.values()) / 3) - 1):+.1f} % | - |"
    assert lines[-1] == "eta* = 0.02, plausible set [0.02]"
    _write(ledger, 1, 5.81, lr=0.04)  # a second seed at 0.04: eta - 0.02 paired over seeds 0-1, against scipy
    row = weight_grid.lr_table(weight_grid.points([ledger], 128))[3]
    high, base = [4.76, 5.81], [ONES[0], ONES[1]]
    lo, hi = stats.ttest_rel(high, base).confidence_interval(0.95)
    diff = (high[0] - base[0] + high[1] - base[1]) / 2
    assert row.endswith(f"| {diff:+.4f} ± {abs(high[0] - base[0] - (high[1] - base[1])) / 2:.4f} "
                        f"[{lo:+.3f}, {hi:+.3f}] (2), {100 * diff / (sum(base) / 2):+.1f} % |")


def test_an_lr_point_is_the_every_weight_1_trial_at_that_eta():
    """``lr=0.04:0`` builds the trial of ``w_unary=1:0`` with eta 0.04 and nothing else changed."""
    trials = {}
    for spec in ("lr=0.04:0", "w_unary=1:0"):
        ((key, value, seed),) = weight_points.points([spec])
        key, value, at_lr = weight_points._lr_point(key, value)
        cfg = compose(weight_points.STUDY + [f"sweep.lr_transfer.weight_key={key}"] + at_lr)
        trials[spec] = point_trial(cfg, "weight", "mup_sp", 128, value, seed)[0]
    assert trials["lr=0.04:0"]["optim.lr"] == 0.04 and trials["w_unary=1:0"]["optim.lr"] == 0.02
    assert {**trials["lr=0.04:0"], "optim.lr": 0.02} == trials["w_unary=1:0"]
