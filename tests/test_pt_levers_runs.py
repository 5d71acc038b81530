"""PT's basin levers around the model (``models/pt_levers.py``; experiments/lr-transfer/levers.md): the keys'
one-line errors, run and trial identities that change only where a lever changes the computation, the training step
that backpropagates the loss terms, the history that reports them, and the measurement script's planned trials."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ptsweep.config import PTConfig, compose, to_dict, with_overrides
from ptsweep.errors import ConfigError
from ptsweep.identity import config_hash, trial_key
from ptsweep.models import aux_loss_terms, mlm_logits
from ptsweep.models.pt import ProbabilisticTransformer
from ptsweep.train import accumulate_gradients
from test_pt_levers import V, _cfg, _inputs, _model


# ---------------------------------------------------------------- config and identity
@pytest.mark.parametrize("kw, message", [
    (dict(z_loss=-1e-4), "model.z_loss: must be >= 0, got -0.0001"),
    (dict(z_loss=math.nan), "model.z_loss: must be >= 0, got nan"),
    (dict(z_loss_iters="every"), "model.z_loss_iters: must be one of ['final', 'all'], got 'every'"),
    (dict(qz_entropy_floor=1.0), "model.qz_entropy_floor: must be a fraction of log N in [0, 1), got 1.0"),
    (dict(qz_entropy_floor=-0.1), "model.qz_entropy_floor: must be a fraction of log N in [0, 1), got -0.1"),
    (dict(qz_entropy_weight=0.0), "model.qz_entropy_weight: must be positive, got 0.0"),
    (dict(attn_score_norm="qk"), "model.attn_score_norm: must be one of ['none', 'row_rms'], got 'qk'"),
    (dict(attn_score_norm="row_rms", attention_impl="fused"),
     "model.attn_score_norm: row_rms is not implemented on the fused path (its kernels never see a whole row of "
     "scores); use model.attention_impl=dense, auto or blockwise"),
    (dict(z_scale_rule="log"), "model.z_scale_rule: must be one of ['none', 'sqrt_log'], got 'log'"),
    (dict(z_scale_rule="sqrt_log", base_width=1, base_channels=1),
     "model.z_scale_rule: sqrt_log needs width and base_width >= 2 (log N0 > 0), got 32 and 1"),
    (dict(topic_scale_rule="sqrt"), "model.topic_scale_rule: must be one of ['none', 'inv_sqrt'], got 'sqrt'"),
    (dict(unary_lr_scale=0.0), "model.unary_lr_scale: must be positive, got 0.0"),
    (dict(unary_lr_scale=2.0, parametrization="sp"),
     "model.unary_lr_scale: scales a muP LR constant, which 'sp' does not read; use a muP parametrization"),
    (dict(unary_lr_rule="sqrt"), "model.unary_lr_rule: must be one of ['const', 'sqrt_capped'], got 'sqrt'"),
    (dict(unary_lr_rule="sqrt_capped", unary_lr_cap=0.04, parametrization="sp"),
     "model.unary_lr_rule: sqrt_capped scales a muP LR constant, which 'sp' does not read; use a muP parametrization"),
    (dict(unary_lr_rule="sqrt_capped"), "model.unary_lr_cap: must be a positive LR under unary_lr_rule=sqrt_capped "
     "and 0 under const, got 0.0 with sqrt_capped"),
    (dict(unary_lr_cap=0.04), "model.unary_lr_cap: must be a positive LR under unary_lr_rule=sqrt_capped and 0 under "
     "const, got 0.04 with const"),
])
def test_bad_lever_values_are_one_line_config_errors(kw, message):
    with pytest.raises(ConfigError) as e:
        _cfg(**kw).validate()
    assert str(e.value) == message


def _keys(*overrides: str) -> tuple[str, str]:
    cfg = compose(["preset=lr_study", "model.width=128", "model.base_width=32", "model.scaling=rank",
                   "model.base_rank=8", *overrides])
    return config_hash(cfg), trial_key(to_dict(cfg), {})


def test_the_levers_change_an_identity_only_where_they_change_the_computation():
    plain = _keys()
    off = ("model.z_loss=0.0", "model.z_loss_iters=final", "model.qz_entropy_floor=0.0", "model.qz_entropy_weight=1.0",
           "model.attn_score_norm=none", "model.z_scale_rule=none", "model.topic_scale_rule=none")
    assert _keys(*off) == plain
    # a setting of a lever that is off computes nothing new
    assert _keys("model.z_loss_iters=all", "model.qz_entropy_weight=5.0") == plain
    on = ["model.z_loss=1e-4", "model.qz_entropy_floor=0.5", "model.attn_score_norm=row_rms",
          "model.z_scale_rule=sqrt_log", "model.topic_scale_rule=inv_sqrt"]
    keys = [_keys(o) for o in on] + [_keys("model.z_loss=1e-4", "model.z_loss_iters=all"),
                                     _keys("model.qz_entropy_floor=0.5", "model.qz_entropy_weight=5.0")]
    assert len({k for pair in keys for k in pair} | set(plain)) == 2 * len(keys) + 2  # every one new, all distinct
    # the width rules at the anchor width, and any lever of the no-inference control, are the plain model
    for rule in ("model.z_scale_rule=sqrt_log", "model.topic_scale_rule=inv_sqrt"):
        assert _keys(rule, "model.width=32") == _keys("model.width=32")
    for lever in on:
        assert _keys(lever, "model.n_iters=0") == _keys("model.n_iters=0")
    # S's LR factor: 1 is the plain model; any other value is a new run, with or without inference (S trains in both)
    assert _keys("model.unary_lr_scale=1.0") == plain
    assert len({*_keys("model.unary_lr_scale=2.0"), *plain}) == 4
    assert _keys("model.unary_lr_scale=2.0", "model.n_iters=0") != _keys("model.n_iters=0")
    # S's LR rule: 'const' (cap 0) is the plain model; the capped rule is a new run, even at the anchor width
    assert _keys("model.unary_lr_rule=const", "model.unary_lr_cap=0.0") == plain
    capped = ("model.unary_lr_rule=sqrt_capped", "model.unary_lr_cap=0.04")
    assert len({*_keys(*capped), *_keys(*capped[:1], "model.unary_lr_cap=0.08"), *plain}) == 6
    assert _keys(*capped, "model.width=32") != _keys("model.width=32")


def test_the_unary_lr_scale_multiplies_the_adamw_step_of_s_and_of_nothing_else():
    """One AdamW step from the same init: S moves by exactly the factor times the plain model's step (Adam's first
    step is lr * sign(g) elementwise), every other tensor by the same amount as in the plain model."""
    from ptsweep.parametrization import build_optimizer

    ids, mask, labels = _inputs()
    steps = {}
    for scale in (1.0, 2.5):
        model = _model(unary_lr_scale=scale)
        before = {k: p.detach().clone() for k, p in model.named_parameters()}
        opt = build_optimizer(model, model.cfg.width, model.cfg.parametrization, lr=1e-3)
        F.cross_entropy(mlm_logits(model, ids, mask, labels), labels[labels >= 0]).backward()
        opt.step()
        steps[scale] = {k: p.detach() - before[k] for k, p in model.named_parameters()}
    for name, step in steps[1.0].items():
        factor = 2.5 if name == "unary" else 1.0
        torch.testing.assert_close(steps[2.5][name], factor * step, rtol=1e-4, atol=1e-9)
    assert steps[1.0]["unary"].abs().max() > 0  # S did move (its rows for the batch's tokens)


def test_a_sweep_override_of_a_lever_reaches_the_model():
    cfg = with_overrides(compose(["preset=smoke"]), {"model.z_loss": 1e-3, "model.attn_score_norm": "row_rms"})
    model = ProbabilisticTransformer(cfg.model, V)
    assert aux_loss_terms(model) == ("z_loss",) and model.attention_scale() == cfg.model.w_attn


# ---------------------------------------------------------------- training step and loop
@pytest.mark.parametrize("micro", [0, 1])
def test_a_training_step_backpropagates_the_terms_and_returns_the_mlm_loss(micro):
    model = _model(z_loss=0.02, qz_entropy_floor=0.999)
    ids, mask, labels = _inputs()
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    terms: dict = {}
    loss = accumulate_gradients(model, batch, micro, torch.device("cpu"), "fp32", terms)
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    rows = [slice(0, 3)] if micro == 0 else [slice(b, b + 1) for b in range(3)]
    n = [int((labels[r] != -100).sum()) for r in rows]
    want_loss, want_terms = 0.0, {"z_loss": 0.0, "qz_entropy_floor": 0.0}
    for r, n_r in zip(rows, n):  # by hand: each micro-batch's (MLM + terms), weighted by its share of the targets
        if n_r == 0:
            continue  # a micro-batch without targets is skipped
        aux = {}
        logits = mlm_logits(model, ids[r], mask[r], labels[r], aux)
        mlm = F.cross_entropy(logits, labels[r][labels[r] != -100])
        ((mlm + aux["z_loss"] + aux["qz_entropy_floor"]) * (n_r / sum(n))).backward()
        want_loss += mlm.item() * n_r / sum(n)
        for k in want_terms:
            want_terms[k] += aux[k].item() * n_r / sum(n)
    assert float(loss) == pytest.approx(want_loss, rel=1e-6)
    assert set(terms) == set(want_terms) and float(terms["z_loss"]) > 0
    for k in want_terms:
        assert float(terms[k]) == pytest.approx(want_terms[k], rel=1e-5, abs=1e-9)
    for a, p in zip(got, model.parameters()):
        assert torch.allclose(a, p.grad, rtol=1e-4, atol=1e-7)


def test_the_history_reports_the_lever_terms(cache_dir, tmp_path, monkeypatch):
    from ptsweep import train
    from ptsweep.tracking import LocalTracker

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    cfg = compose(["preset=smoke", "tracker=disabled", f"out_dir={tmp_path}", f"data.cache_dir={cache_dir}",
                   "model.width=32", "model.base_width=32", "model.base_rank=8", "model.scaling=rank",
                   "train.tokens=2048", "model.z_loss=1e-3", "model.qz_entropy_floor=0.99"])
    metrics = train.run(cfg, LocalTracker())
    logged = [row for row in metrics["history"] if "train_loss" in row]
    assert metrics["status"] == "ok" and logged
    for row in logged:
        assert row["aux/z_loss"] > 0 and math.isfinite(row["aux/z_loss"]) and row["aux/qz_entropy_floor"] >= 0


def test_the_basin_script_plans_each_lever_beside_the_default_over_the_high_side():
    """run_basin_levers.sh with PY=echo prints its commands; each plans eta*/2, eta*, 2 eta* at widths 32 and 128
    for the default and for the lever (the control group: the lever on, MFVI kept), 3 seeds at every value."""
    from ptsweep.sweeps.lr_transfer_plan import refine_values, stage1_trials

    levers = set()
    for cfg in _script_configs("run_basin_levers.sh", 9):
        lt = cfg.sweep.lr_transfer
        assert (lt.widths, lt.seeds, lt.refine_top, cfg.train.tokens) == ([32, 128], 3, 0, 1228800)
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
                assert label.startswith("ctrl-") and model.n_iters == 4 and len(changed) in (1, 2)
                levers |= set(changed)
    assert levers >= {"z_loss", "z_loss_iters", "qz_entropy_floor", "attn_score_norm", "z_scale_rule",
                      "topic_scale_rule"}


def test_the_weight_script_plans_each_weight_grid_and_the_lr_grid_per_variant():
    """run_weight_levers.sh with PY=echo prints its commands: per variant (default, then each width rule) and per
    weight, the LR grid 0.01 / 0.02 / 0.04 and the weight's grid 0.5-4 at eta 0.02, at widths 32 and 128, seed 0
    first and 3 seeds at each grid's best two, in the variant's own study folder; the rule reaches every trial."""
    from ptsweep.sweeps.lr_transfer_plan import stage1_trials

    seen = set()
    for cfg in _script_configs("run_weight_levers.sh", 12):
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
        rule = (cfg.model.z_scale_rule, cfg.model.topic_scale_rule)
        variant = cfg.sweep.study.removeprefix("weights-")
        assert rule == {"default": ("none", "none"), "z_scale": ("sqrt_log", "none"),
                        "topic_scale": ("none", "inv_sqrt")}[variant]
        assert all(with_overrides(cfg, ov).model.z_scale_rule == rule[0] for ov in trials)
        seen.add((variant, weight))
    assert len(seen) == 12


def _script_configs(script: str, n: int) -> list:
    """The configs of the ``lr-transfer`` calls that ``experiments/lr-transfer/<script>`` makes (run with PY=echo, so
    it prints them); there must be ``n``."""
    import shlex
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(["bash", f"experiments/lr-transfer/{script}"], cwd=root, check=True, capture_output=True,
                         text=True, env={"PATH": "/usr/bin:/bin", "PY": "echo"}).stdout
    commands = [shlex.split(line) for line in out.splitlines()]
    assert len(commands) == n and all(c[:3] == ["-m", "ptsweep", "lr-transfer"] for c in commands)
    return [compose(c[3:]) for c in commands]
