"""experiments/lr-transfer/budget_drift.py (eta* per budget and its drift, on rows with known optima),
lever_table.py (each variant's optimum and its [eta*/2, 2 eta*] window, by hand) and the
independent weight decay lever of experiments/context/probe_training.py (against the closed form of one AdamW step
with zero gradients)."""

import math

import pytest
import torch

from ptsweep.parametrization import build_optimizer, set_lr
from ptsweep.models import build_model
from ptsweep.config import compose

from experiment_scripts import load_script


budget_drift = load_script("experiments/lr-transfer/budget_drift.py")
lever_table = load_script("experiments/lr-transfer/lever_table.py")
probe_training = load_script("experiments/context/probe_training.py")


def _rows(opt_by_steps: dict, width=32, seeds=3):
    """Quadratic loss in log2(eta) around each budget's optimum, with per-seed offsets."""
    rows = []
    for steps, opt in opt_by_steps.items():
        for k in range(-9, -4):
            lr = 2.0 ** k
            for s in range(seeds):
                rows.append({"par": "mup_sp", "width": width, "lr": lr, "tokens": float(steps * 1024), "seed": s,
                             "val_loss": 5 + 0.1 * (k - math.log2(opt)) ** 2 + 0.01 * s})
    return rows


def test_budget_drift_reports_each_budgets_optimum_and_the_drift_in_factors_of_two():
    lines = budget_drift.table(_rows({300: 2.0 ** -6, 1200: 2.0 ** -7}), "mup_sp")
    assert lines[0].startswith("| width | eta* at 300 steps") and "eta* at 1200 steps" in lines[0]
    row = lines[2].split(" | ")
    assert row[1].startswith("0.015625 ") and row[2].startswith("0.0078125 ") and row[3] == "-1"
    assert "-1.00 [" in lines[2]  # the fitted vertices: exactly one factor of 2 down
    flat = budget_drift.table(_rows({300: 2.0 ** -7, 1200: 2.0 ** -7}), "mup_sp")[2]
    assert flat.split(" | ")[3] == "+0"
    assert budget_drift.table(_rows({300: 2.0 ** -7}), "sp") == ["no runs of 'sp'"]


def test_independent_weight_decay_shrinks_matrices_by_the_set_amount_whatever_eta():
    cfg = compose(["preset=smoke", "model.parametrization=mup_sp", "model.width=32", "model.scaling=rank"])
    for lr in (0.01, 0.04):
        model = build_model(cfg.model, 64, cfg.data.seq_len)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        opt = build_optimizer(model, model.width, model.parametrization, lr)
        probe_training.independent_weight_decay(opt, 1e-3)
        set_lr(opt, lr, 0.5)  # mid-schedule: the decay follows the schedule factor, not eta
        for p in model.parameters():
            p.grad = torch.zeros_like(p)  # Adam's step is 0: only the decay moves the weights
        opt.step()
        roles = {id(p): g["role"] for g in opt.param_groups for p in g["params"]}
        for n, p in model.named_parameters():
            shrink = 1.0 if roles[id(p)] in ("gain", "bias") else 1 - 0.5 * 1e-3
            assert torch.allclose(p.detach(), before[n] * shrink, rtol=1e-6, atol=0), (lr, n)


def test_lever_table_gives_each_variants_optimum_and_window_in_percent():
    rows = [{"par": "mup_sp", "width": 32, "tokens": 1200 * 1024.0, "seed": s, "variant": (), "lr": lr,
             "val_loss": x + 0.1 * s, "context_gain": 1.0} for lr, x in ((0.005, 5.2), (0.01, 5.0), (0.02, 5.5))
            for s in (0, 1)]
    rows += [{"par": "mup_sp", "width": 32, "tokens": 1200 * 1024.0, "seed": 0, "lr": lr, "val_loss": x,
              "context_gain": 1.1, "variant": (("warmup_frac", "0.25"),)} for lr, x in ((0.01, 5.1), (0.02, 5.0))]
    rows += [{**rows[0], "width": 64, "val_loss": 1.0}]  # another width: not in the table
    lines = lever_table.table(rows, "mup_sp", 32, 1200)
    assert lines[2] == "| default | 5.250 (2) +1.00 | 5.050 (2) +1.00 | 5.550 (2) +1.00 | 0.01 | +4.0 % | +9.9 % |"
    assert lines[3] == "| warmup_frac=0.25 |  | 5.100 +1.10 | 5.000 +1.10 | 0.02 | +2.0 % | - |"
    assert lever_table.table(rows, "mup_sp", 32, 1200, seeds=[0])[2].startswith("| default | 5.200 +1.00 |")
    assert lever_table.table(rows, "sp", 32, 1200) == ["no runs of sp at width 32, 1200 steps"]
