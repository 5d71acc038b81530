"""Weight decay independent of eta (the variant ``independent_wd``, ``variants/independent_wd.py``, through the hook
``parametrization.wd_rule``): one AdamW step shrinks every matrix by decay x the schedule factor whatever eta, the
group's muP multiplier or an LR cap (closed form of a zero-gradient step), leaves gains and biases alone, and adds
exactly -decay x f x w to the plain model's step under real gradients; ``optim.weight_decay`` without the variant
keeps following each group's LR."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ptsweep.config import compose
from ptsweep.errors import ConfigError
from ptsweep.models import build_model, mlm_logits
from ptsweep.parametrization import build_optimizer, set_lr
from test_variants import V, _cfg, _inputs, _model

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny shapes: conftest says why

DECAY = 1e-3
IWD = {"name": "independent_wd", "decay": DECAY}


def _zero_grad_step(model, lr: float, factor: float, weight_decay: float = 0.0) -> tuple[dict, dict, dict]:
    """(before, after, group LR) of each tensor over one AdamW step at ``factor`` of the schedule with zero gradients
    (Adam's update is 0: only the decay moves a weight)."""
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = build_optimizer(model, model.cfg.width, model.cfg.parametrization, lr, weight_decay=weight_decay)
    set_lr(opt, lr, factor)
    lr_of = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    return (before, {n: p.detach() for n, p in model.named_parameters()},
            {n: lr_of[id(p)] for n, p in model.named_parameters()})


@pytest.mark.parametrize("parametrization", ["mup_sp", "sp"])
def test_every_matrix_shrinks_by_the_decay_times_the_schedule_factor_whatever_eta(parametrization):
    """Width 64 over base 16 (hidden and output groups at eta / N under muP); under mup_sp S's LR capped too."""
    cap = [{"name": "unary_lr", "rule": "sqrt_capped", "cap": 2e-3}] if parametrization != "sp" else []
    for lr in (0.01, 0.04):
        model = _model(width=64, base_width=16, parametrization=parametrization, variants=[IWD, *cap])
        before, after, group_lr = _zero_grad_step(model, lr, factor=0.5)
        assert len(set(group_lr.values())) == (1 if parametrization == "sp" else 5)  # muP: 5 LRs, S at its cap
        for name, w in before.items():
            shrink = 1.0 if name in ("head_gain", "head_bias") else 1 - 0.5 * DECAY
            torch.testing.assert_close(after[name], shrink * w, rtol=1e-6, atol=0), (lr, name)
            assert name in ("head_gain", "head_bias") or w.abs().max() > 0


def test_without_the_variant_weight_decay_follows_each_groups_lr():
    """optim.weight_decay: a matrix shrinks by factor x its group's LR x weight_decay (unchanged by the hook)."""
    before, after, group_lr = _zero_grad_step(_model(width=64, base_width=16), 0.02, 0.5, weight_decay=0.1)
    assert len(set(group_lr.values())) > 1
    for name, w in before.items():
        shrink = 1.0 if name in ("head_gain", "head_bias") else 1 - group_lr[name] * 0.1  # group_lr: after set_lr
        torch.testing.assert_close(after[name], shrink * w, rtol=1e-6, atol=0), name


def test_under_real_gradients_the_step_is_the_plain_step_minus_the_decay():
    """w' = w - lr_t u (plain AdamW, no decay) becomes w' - decay f w: Adam's update u is the same (decoupled)."""
    ids, mask, labels = _inputs()
    new = {}
    for variants in ([], [IWD]):
        model = _model(variants=variants)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        opt = build_optimizer(model, model.cfg.width, model.cfg.parametrization, 0.01)
        set_lr(opt, 0.01, 0.25)
        F.cross_entropy(mlm_logits(model, ids, mask, labels), labels[labels >= 0]).backward()
        opt.step()
        new[bool(variants)] = {n: p.detach() for n, p in model.named_parameters()}
    for name, w in before.items():
        shrink = 0.0 if name in ("head_gain", "head_bias") else 0.25 * DECAY
        torch.testing.assert_close(new[True][name], new[False][name] - shrink * w, rtol=1e-5, atol=1e-9)


def test_the_groups_carry_the_rule_and_a_composed_override_reaches_them():
    cfg = compose(["preset=smoke", "model.width=32", "model.scaling=rank",
                   "model.variants=[{name:independent_wd,decay:5e-4}]"])
    model = build_model(cfg.model, V)
    opt = build_optimizer(model, 32, cfg.model.parametrization, 0.02)
    for g in opt.param_groups:
        if g["role"] in ("gain", "bias"):
            assert "wd_per_step" not in g and g["weight_decay"] == 0.0
        else:
            assert g["wd_per_step"] == 5e-4 and g["weight_decay"] * g["lr"] == pytest.approx(5e-4, rel=1e-12)


@pytest.mark.parametrize("decay", [0.0, 1.0, -1e-3])
def test_a_decay_outside_0_1_is_a_config_error(decay):
    with pytest.raises(ConfigError, match="model.variants: independent_wd: decay must be a fraction per step"):
        _cfg(variants=[{"name": "independent_wd", "decay": decay}]).validate()


def test_a_training_run_steps_the_optimizer_with_the_rule(cache_dir, tmp_path, monkeypatch):
    """``train.run`` builds its optimizer through the hook: the groups its steps use (seen by a probe) carry the
    decay, and the run beside ``feature_cap`` trains to a finite loss with both attached."""
    from ptsweep import train
    from ptsweep.tracking import Tracker

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    cfg = compose(["preset=smoke", "tracker=disabled", f"out_dir={tmp_path}", f"data.cache_dir={cache_dir}",
                   "model.width=32", "model.base_width=32", "model.base_rank=8", "model.scaling=rank",
                   "train.tokens=2048", "model.variants=[{name:independent_wd,decay:5e-4},{name:feature_cap,cap:4}]"])
    seen = {}

    class Probe:
        def __init__(self, model, optimizer, val, device):
            seen["groups"], seen["transform"] = optimizer.param_groups, model.feature_transform

        def before_logged_step(self):
            pass

        def on_logged_step(self):
            return {}

        def on_evaluation(self):
            return {}

    final = train.run(cfg, Tracker(), run_dir=tmp_path / "run", probes=[Probe])
    assert final["status"] == "ok" and final["val_loss"] == final["val_loss"]
    decayed = [g for g in seen["groups"] if g["role"] not in ("gain", "bias")]
    assert decayed and all(g["wd_per_step"] == 5e-4 for g in decayed)
    assert float(seen["transform"](torch.tensor(100.0))) == pytest.approx(4.0)  # feature_cap attached too
