"""S's LR rule (the variant ``unary_lr``, ``variants/unary_lr.py``, through the hook ``parametrization.lr_rule``): the
capped rule's first AdamW step of S against the plain model's, its optimizer groups against the existing options
whose runs it reproduces (experiments/weight-drift), and the LR schedule applied under the cap."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ptsweep.config import compose
from ptsweep.models import mlm_logits
from ptsweep.models import build_model
from ptsweep.parametrization import Role, build_optimizer, declare, lr_rule, param_groups, set_lr
from test_variants import V, _inputs, _model

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny shapes: conftest says why

CAP = 5e-3
"""S's peak-LR cap in the step tests: above 2 x 1e-3 (the width factor at 1e-3 does not reach it), below 2 x 4e-3."""


def _first_steps(lr: float, **kw) -> dict[str, torch.Tensor]:
    """Every tensor's change in one AdamW step from the seed-0 init (Adam's first step is lr * g / (|g| + eps))."""
    model = _model(**kw)
    ids, mask, labels = _inputs()
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    opt = build_optimizer(model, model.cfg.width, model.cfg.parametrization, lr=lr)
    F.cross_entropy(mlm_logits(model, ids, mask, labels), labels[labels >= 0]).backward()
    opt.step()
    return {k: p.detach() - before[k] for k, p in model.named_parameters()}


@pytest.mark.parametrize("lr, s_factor", [(1e-3, 2.0), (4e-3, CAP / 4e-3)])
def test_the_capped_rule_steps_s_by_the_width_factor_up_to_the_cap_and_nothing_else_differently(lr, s_factor):
    """Width 64 over base 16: sqrt(N / N0) = 2. At 1e-3 S's LR is 2e-3 (under the cap); at 4e-3 it would be 8e-3
    and is held at the cap, 1.25 x the plain model's 4e-3."""
    plain = _first_steps(lr, width=64)
    capped = _first_steps(lr, width=64, variants=[{"name": "unary_lr", "rule": "sqrt_capped", "cap": CAP}])
    for name, step in plain.items():
        torch.testing.assert_close(capped[name], (s_factor if name == "unary" else 1.0) * step, rtol=1e-4, atol=1e-9)
    assert plain["unary"].abs().max() > 0  # S did move (its rows for the batch's tokens)


def _group_lrs(lr: float, *overrides: str) -> list[tuple[str, float]]:
    """(role, LR) of every optimizer group of the weight study's model (width 128 anchored at 32, rank paradigm)."""
    cfg = compose(["preset=lr_study", "model.width=128", "model.base_width=32", "model.scaling=rank",
                   "model.base_rank=8", *overrides])
    model = build_model(cfg.model, V)
    opt = build_optimizer(model, cfg.model.width, cfg.model.parametrization, lr=lr)
    return sorted((g["role"], g["lr"]) for g in opt.param_groups)


def test_the_capped_rule_is_the_existing_options_the_weight_study_ran_it_through():
    """Cap 0.04 = 2 eta*_0, width 128 = 4 x N0: at eta* 0.02 S's LR is 0.04, as under unary_lr_scale=2; at 2 eta*
    the cap binds and S's LR is 0.04, as in the plain model at 0.04; at the anchor width the rule is the plain
    model at both."""
    rule = ("model.variants=[{name:unary_lr,rule:sqrt_capped,cap:0.04}]",)
    assert _group_lrs(0.02, *rule) == _group_lrs(0.02, "model.variants=[{name:unary_lr,scale:2}]")
    assert _group_lrs(0.04, *rule) == _group_lrs(0.04)
    assert ("input", pytest.approx(0.04)) in _group_lrs(0.04, *rule)
    for lr in (0.02, 0.04):
        assert _group_lrs(lr, *rule, "model.width=32") == _group_lrs(lr, "model.width=32")
    assert _group_lrs(0.02, *rule) != _group_lrs(0.02)  # the rule does act at width 128


def test_the_schedule_multiplies_the_capped_peak_lr():
    """set_lr: a group's LR is factor x min(eta x lr_mult, cap); a group without a cap (a checkpoint written before
    caps existed) gets factor x eta x lr_mult."""
    opt = torch.optim.AdamW([{"params": [torch.zeros(1, requires_grad=True)], "lr_mult": 2.0, "lr_cap": 0.04},
                             {"params": [torch.zeros(1, requires_grad=True)], "lr_mult": 2.0}], lr=1.0)
    set_lr(opt, base_lr=0.08, schedule_factor=0.5)
    assert [g["lr"] for g in opt.param_groups] == [pytest.approx(0.02), pytest.approx(0.08)]
    set_lr(opt, base_lr=0.01, schedule_factor=0.5)
    assert [g["lr"] for g in opt.param_groups] == [pytest.approx(0.01), pytest.approx(0.01)]


def test_an_lr_rule_acts_under_mup_only():
    """The rule's factor and cap are muP constants like the LR multiplier: under SP every group is eta, uncapped;
    without a rule no group carries a cap."""
    module = nn.Module()
    module.s = declare(nn.Parameter(torch.zeros(4, 8)), Role.INPUT, nn.init.zeros_, mup_lr_mult=0.5)
    module.t = declare(nn.Parameter(torch.zeros(4, 8)), Role.INPUT, nn.init.zeros_)
    assert [g.get("lr_cap", math.inf) for g in param_groups(module, 8, "mup_sp")] == [math.inf, math.inf]
    lr_rule(module.s, 3.0, 0.04)
    assert [(g["lr_mult"], g.get("lr_cap")) for g in param_groups(module, 8, "mup_sp")] == [(1.5, 0.04), (1.0, None)]
    assert [(g["lr_mult"], g.get("lr_cap")) for g in param_groups(module, 8, "sp")] == [(1.0, None)]
