"""muP rules of [S] Table 2 (spec §8), measured on built models, and the exact parameter count (spec §9)."""

from __future__ import annotations

import math

import pytest
import torch

from ptsweep.config import PTConfig
from ptsweep.models.pt import ProbabilisticTransformer, pt_param_count
from ptsweep.parametrization import Role, build_optimizer, role_of, set_lr

VOCAB = 64


STABLE_INIT = {"unary": 0.125, "U": 0.5, "V": 0.5, "B": 0.03}
"""The 'mup' default's base-shape init constants (PTConfig.init_*; experiments/coord-check/README.md)."""
STABLE_LR = {"U": 4.0, "V": 4.0, "B": 0.15}
"""The 'mup' default's base-shape LR constants of the hidden group (PTConfig.lr_ternary, lr_topic)."""


@pytest.mark.parametrize("parametrization", ["mup", "mup_paper"])
@pytest.mark.parametrize("scaling", ["channels", "rank"])
@pytest.mark.parametrize("width", [64, 256, 1024])
def test_mup_init_std_and_group_lrs_follow_table_2(width, scaling, parametrization):
    """Same exponents of N as [S] Table 2 in both muP variants; 'mup' changes only the constants of S, U, V, B."""
    torch.manual_seed(0)
    model = ProbabilisticTransformer(PTConfig(width=width, scaling=scaling, parametrization=parametrization), VOCAB)
    const = STABLE_INIT if parametrization == "mup" else dict.fromkeys(STABLE_INIT, 1.0)
    expected_std = {"unary": const["unary"], "U": const["U"] * width ** -0.5, "V": const["V"] * width ** -0.5,
                    "B": const["B"] * width ** -0.5, "head_weight": 1.0 / width}
    for name, std in expected_std.items():
        measured = getattr(model, name).detach().std().item()
        assert measured == pytest.approx(std, rel=0.05, abs=1e-12), name
    assert torch.all(model.head_gain == 1) and torch.all(model.head_bias == 0)
    # shape follows the paradigm: C r = C0 r0 N / N0 in both
    cfg = model.cfg
    assert cfg.channels * cfg.rank == 4 * 64 * width // 256
    assert (cfg.rank == 64) if scaling == "channels" else (cfg.channels == 4)
    eta = 0.01
    opt = build_optimizer(model, model.width, parametrization, lr=eta)
    lr_of = {name: g["lr"] for name, p in model.named_parameters() for g in opt.param_groups
             if any(p is q for q in g["params"])}
    lr_const = STABLE_LR if parametrization == "mup" else {}
    assert lr_of == pytest.approx({"unary": eta, "head_gain": eta, "head_bias": eta, "head_weight": eta / width,
                                   **{k: lr_const.get(k, 1.0) * eta / width for k in ("U", "V", "B")}})
    # the schedule multiplies each group's multiplier, never sets an absolute LR
    lr_before = [g["lr"] for g in opt.param_groups]
    set_lr(opt, eta, 0.5)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([v * 0.5 for v in lr_before])


def test_every_pt_parameter_has_the_papers_role():
    model = ProbabilisticTransformer(PTConfig(width=64), VOCAB)
    roles = {name: role_of(p) for name, p in model.named_parameters()}
    assert roles == {"unary": Role.INPUT, "U": Role.HIDDEN, "V": Role.HIDDEN, "B": Role.HIDDEN,
                     "head_gain": Role.GAIN, "head_weight": Role.OUTPUT, "head_bias": Role.BIAS}


def test_sp_uses_pytorch_style_init_and_one_lr():
    torch.manual_seed(0)
    width = 256
    model = ProbabilisticTransformer(PTConfig(width=width, parametrization="sp"), 1000)
    assert model.unary.std().item() == pytest.approx(math.sqrt(2.0 / (1000 + width)), rel=0.05)  # xavier
    assert model.U.std().item() == pytest.approx(64 ** -0.5, rel=0.05)                         # N(0, 1/r)
    assert model.head_weight.abs().max().item() <= width ** -0.5                               # U(+-1/sqrt N)
    opt = build_optimizer(model, width, "sp", lr=3e-3)
    assert all(g["lr"] == pytest.approx(3e-3) for g in opt.param_groups)


@pytest.mark.parametrize("width,scaling,dists,ratio,vocab", [
    (256, "channels", (2, 3, 4), 4, 30522), (64, "rank", (2, 3, 4), 4, 1000), (128, "channels", (), 1, 77),
    (512, "rank", (3,), 2, 500), (96, "channels", (2, 5), 4, 123),
])
def test_parameter_count_formula(width, scaling, dists, ratio, vocab):
    cfg = PTConfig(width=width, scaling=scaling, dists=dists, topic_ratio=ratio,
                   base_width=32 if width % 32 == 0 and width < 256 else 256)
    model = ProbabilisticTransformer(cfg, vocab)
    assert pt_param_count(cfg, vocab)["total"] == sum(p.numel() for p in model.parameters())


def test_base_model_is_about_17M_parameters():
    counts = pt_param_count(PTConfig(width=256), 30522)
    assert counts["total"] == 16_968_762  # 2VN + V + N + 2KCrN + MN with N=256, K=8, C=4, r=64, M=1024
    assert counts["non_embedding"] == 256 + 2 * 8 * 4 * 64 * 256 + 1024 * 256


def test_init_constants_are_config_fields_and_validated():
    torch.manual_seed(0)
    model = ProbabilisticTransformer(PTConfig(width=64, parametrization="mup", init_unary=0.25, init_u=0.3, init_v=0.7,
                                              init_topic=0.1), VOCAB)
    for name, std in {"unary": 0.25, "U": 0.3 / 8, "V": 0.7 / 8, "B": 0.1 / 8}.items():
        assert getattr(model, name).detach().std().item() == pytest.approx(std, rel=0.05), name
    from ptsweep.errors import ConfigError
    for bad in ({"init_unary": 0.0}, {"init_topic": -1.0}, {"init_u": 0.0, "init_v": 0.0}):
        with pytest.raises(ConfigError):
            PTConfig(width=64, parametrization="mup", **bad).validate()
    with pytest.raises(ValueError):
        build_optimizer(model, 64, "mup_typo", lr=1e-3)
