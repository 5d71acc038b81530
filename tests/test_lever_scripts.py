"""experiments/lr-transfer/budget_drift.py (eta* per budget and its drift, on rows with known optima) and
lever_table.py (each variant's optimum and its [eta*/2, 2 eta*] window, by hand). The independent weight decay and
the feature cap that experiments/context/probe_training.py once applied are variants of PT now
(``test_variant_independent_wd.py``, ``test_variant_feature_cap.py``)."""

import math

from experiment_scripts import load_script


budget_drift = load_script("experiments/lr-transfer/budget_drift.py")
lever_table = load_script("experiments/lr-transfer/lever_table.py")


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


# ---------------------------------------------------------------- levers.py: the lever studies' calls
levers = load_script("experiments/lr-transfer/levers.py")


def _configs(*args, **kw) -> list:
    """The composed configs of ``levers.calls(*args, **kw)``."""
    from ptsweep.config import compose

    return [compose(overrides) for _, overrides in levers.calls(*args, **kw)]


def test_the_basin_calls_plan_each_lever_beside_the_default_over_the_high_side():
    """Each call plans eta*/2, eta*, 2 eta* at widths 32 and 128 for the default and for the lever (the control
    group: the lever on, MFVI kept), 3 seeds at every value, in one study folder."""
    from ptsweep.config import PTConfig, to_dict, with_overrides
    from ptsweep.sweeps.lr_transfer_plan import refine_values, stage1_trials

    found = set()
    configs = _configs("basin", [])
    assert len(configs) == len(levers.BASIN) == 9
    for cfg in configs:
        lt = cfg.sweep.lr_transfer
        assert (lt.widths, lt.seeds, lt.refine_top, cfg.train.tokens) == ([32, 128], 3, 0, 1228800)
        assert cfg.sweep.study == "levers-basin"
        trials, labels = stage1_trials(cfg)
        assert len(trials) == 12 and refine_values(cfg, None)[("control", "mup_sp", 128)] == [0.01, 0.02, 0.04]
        for ov, label in zip(trials, labels):
            assert ov["optim.lr"] in (0.01, 0.02, 0.04)
            model = with_overrides(cfg, ov).model
            changed = {k: v for k, v in to_dict(model).items() if v != to_dict(PTConfig())[k]
                       and k not in ("width", "scaling", "base_width", "base_rank", "damping_z", "w_attn")}
            if label.startswith("lr-"):
                assert changed == {} and model.w_attn == 1.0
            else:
                assert label.startswith("ctrl-") and model.n_iters == 4 and set(changed) == {"variants"}
                assert len(model.variants) == 1
                found.add(tuple(sorted((k, v) for k, v in model.variants[0].items())))
    assert {dict(v)["name"] for v in found} == {"z_loss", "qz_entropy_floor", "attn_row_rms", "z_scale",
                                                "topic_scale"} and len(found) == 8  # row_rms twice: w_attn 2, 6


def test_the_weight_calls_plan_each_weight_grid_and_the_lr_grid_per_rule():
    """Per rule (default, then each width rule) and per weight: the LR grid 0.01 / 0.02 / 0.04 and the weight's grid
    0.5-4 at eta 0.02, at widths 32 and 128, seed 0 first and 3 seeds at each grid's best two, in the rule's own
    study folder; the rule reaches every trial."""
    from ptsweep.config import with_overrides
    from ptsweep.sweeps.lr_transfer_plan import stage1_trials

    seen = set()
    configs = _configs("weights", [])
    assert len(configs) == 12
    for cfg in configs:
        lt = cfg.sweep.lr_transfer
        assert (lt.widths, lt.weight_widths, lt.seeds, lt.refine_top) == ([32, 128], [32, 128], 3, 2)
        trials, labels = stage1_trials(cfg)
        weight = lt.weight_key
        assert sorted({ov["optim.lr"] for ov, lab in zip(trials, labels) if lab.startswith("lr-")}) == [0.01, 0.02, 0.04]
        weight_trials = [ov for ov, lab in zip(trials, labels) if lab.startswith("w")]
        # 1.0 is the LR grid's 0.02 trial (the same run); the preset's control is PT without inference
        assert sorted({ov[weight] for ov in weight_trials}) == [0.5, 2.0, 4.0] and len(weight_trials) == 6
        assert all(ov["optim.lr"] == 0.02 for ov in weight_trials)
        assert all(ov["model.n_iters"] == 0 for ov, lab in zip(trials, labels) if lab.startswith("ctrl-"))
        assert len(trials) == 6 + 6 + 6
        rule = [v["name"] for v in cfg.model.variants]
        variant = cfg.sweep.study.removeprefix("weights-")
        assert rule == {"default": [], "z_scale": ["z_scale"], "topic_scale": ["topic_scale"]}[variant]
        assert all(with_overrides(cfg, ov).model.variants == cfg.model.variants for ov in trials)
        seen.add((variant, weight))
    assert len(seen) == 12


def test_the_driver_selects_by_name_and_passes_the_corpus_seeds_and_extra_overrides(capsys):
    """--dry-run prints the calls in the lists' order whatever the order asked; --data names the study folders;
    overrides after -- reach every call; an unknown name stops before any call."""
    import shlex

    import pytest

    assert levers.main(["basin", "z_scale", "z_loss-1e-4", "--seeds", "1", "--data", "python_docs", "--dry-run",
                        "--", "train.device=cuda"]) == 0
    lines = [shlex.split(ln) for ln in capsys.readouterr().out.splitlines()]
    assert [ln[-1].split("=", 1)[1] for ln in lines] == [levers.BASIN["z_loss-1e-4"], levers.BASIN["z_scale"]]
    for ln in lines:
        assert ln[:4] == ["python", "-m", "ptsweep", "lr-transfer"]
        assert {"data=python_docs", "sweep.lr_transfer.seeds=1", "sweep.study=levers-basin-python_docs",
                "train.device=cuda"} <= set(ln)
    cfgs = _configs("weights", ["topic_scale"], data="python_docs", weights=["w_attn"])
    assert [(c.sweep.study, c.sweep.lr_transfer.weight_key) for c in cfgs] == [
        ("weights-topic_scale-python_docs", "model.w_attn")]
    with pytest.raises(SystemExit, match="unknown z_los"):
        levers.main(["basin", "z_los", "--dry-run"])
