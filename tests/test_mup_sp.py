"""'mup_sp' (muP anchored at SP): at N = base_width it is SP - same MLM logits and the same AdamW trajectory once
SP's weights are mapped by the rescaling derived by hand (U, V / sqrt(N0), B / M0) - and away from N0 its init
stds, LR multipliers and logit scales follow the muP powers of N ([S] Table 2), checked against closed forms."""

import math

import pytest
import torch
import torch.nn.functional as F

from ptsweep.config import PTConfig
from ptsweep.errors import ConfigError
from ptsweep.models import mlm_logits
from ptsweep.models.pt import ProbabilisticTransformer
from ptsweep.parametrization import build_optimizer, param_groups

VOCAB, N0, R0 = 40, 16, 4


def _cfg(par, width=N0, scaling="rank", **kw):
    """'mup_sp' takes SP's attention constant at r0 (attn_base_rank = r0) unless a test sets another."""
    if par == "mup_sp":
        kw.setdefault("attn_base_rank", R0)
    return PTConfig(width=width, scaling=scaling, parametrization=par, base_width=N0, base_rank=R0,
                    base_channels=2, topic_ratio=2, **kw)


def _batch(seed=0, bsz=3, length=11):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (bsz, length), generator=g)
    mask = torch.ones(bsz, length, dtype=torch.bool)
    labels = torch.full_like(ids, -100)
    labels[:, ::3] = ids[:, ::3]
    return ids, mask, labels


def _pair(scaling="rank", attn_base_rank=R0):
    """An SP model and a 'mup_sp' model at N0 holding SP's function: S, W_out, gain, bias copied; U, V divided by
    sqrt(N0) and B by M0 = topic_ratio * N0 (the hand derivation of the anchor, independent of MFVIConstants). With
    attn_base_rank r_A the attention logits are SP's times r_A / r0, which SP gets from w_attn = r_A / r0."""
    torch.manual_seed(0)
    sp = ProbabilisticTransformer(_cfg("sp", scaling=scaling, w_attn=attn_base_rank / R0, damping_z=0.5),
                                  VOCAB).double()  # mup_sp's default damping
    mup = ProbabilisticTransformer(_cfg("mup_sp", scaling=scaling, attn_base_rank=attn_base_rank), VOCAB).double()
    scale = {"U": 1 / math.sqrt(N0), "V": 1 / math.sqrt(N0), "B": 1 / (2 * N0)}
    with torch.no_grad():
        for name, p in sp.named_parameters():
            getattr(mup, name).copy_(p * scale.get(name, 1.0))
    return sp, mup, scale


@pytest.mark.parametrize("scaling,attn_base_rank", [("rank", R0), ("channels", R0), ("channels", 1), ("rank", 8)])
def test_mup_sp_at_the_base_width_has_sps_logits_and_adamw_trajectory(scaling, attn_base_rank):
    sp, mup, scale = _pair(scaling, attn_base_rank)
    opts = [build_optimizer(m, N0, m.parametrization, lr=3e-3, eps=1e-300) for m in (sp, mup)]
    for step in range(4):
        losses = []
        for model, opt in zip((sp, mup), opts):
            opt.zero_grad()
            ids, mask, labels = _batch(step)  # float64 cross-entropy (mlm_loss computes it in float32)
            loss = F.cross_entropy(mlm_logits(model, ids, mask, labels), labels[labels != -100])
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[1] == pytest.approx(losses[0], rel=1e-10, abs=0)
    for name, p in sp.named_parameters():  # after 4 AdamW steps the rescaled weights still map onto each other
        torch.testing.assert_close(getattr(mup, name), p * scale.get(name, 1.0), rtol=1e-9, atol=1e-12)


def test_mup_sp_init_stds_at_the_base_width_are_sps():
    torch.manual_seed(1)
    big = dict(base_width=64, base_rank=16, base_channels=2, topic_ratio=2, width=64, scaling="rank")
    vocab = 3000
    sp = ProbabilisticTransformer(PTConfig(parametrization="sp", **big), vocab)
    mup = ProbabilisticTransformer(PTConfig(parametrization="mup_sp", **big), vocab)
    expect = {"unary": 1.0, "U": 1 / math.sqrt(64), "V": 1 / math.sqrt(64), "B": 1 / 128, "head_weight": 1.0}
    for name, ratio in expect.items():
        got = getattr(mup, name).std().item() / getattr(sp, name).std().item()
        assert got == pytest.approx(ratio, rel=0.03), name


@pytest.mark.parametrize("factor", [2, 4])
def test_mup_sp_away_from_the_base_width_follows_the_mup_powers_of_n(factor):
    """Against 'mup_paper' (constants 1, [S] Table 2 literally): the ratio of every constant at N and at N0 is 1."""
    def ratios(par):
        small = ProbabilisticTransformer(_cfg(par), VOCAB)
        wide = ProbabilisticTransformer(_cfg(par, width=N0 * factor), VOCAB)
        std = {n: getattr(wide, n).std().item() / getattr(small, n).std().item() for n in ("U", "B", "head_weight")}
        lr = {g_w["role"]: g_w["lr_mult"] / g_s["lr_mult"] for g_s, g_w in
              zip(param_groups(small, N0, par), param_groups(wide, N0 * factor, par)) if g_s["role"] != "gain"}
        scale = {"s_h": wide.const.s_h / small.const.s_h, "s_g": wide.const.s_g / small.const.s_g,
                 "a_z": wide.const.a_z / small.const.a_z}
        return std, lr, scale
    torch.manual_seed(2)
    std_sp, lr_sp, scale_sp = ratios("mup_sp")
    torch.manual_seed(2)
    std_paper, lr_paper, scale_paper = ratios("mup_paper")
    assert lr_sp == pytest.approx(lr_paper, rel=1e-12)
    assert lr_sp["hidden"] == pytest.approx(1 / factor) and lr_sp["input"] == 1.0
    assert scale_sp == pytest.approx(scale_paper, rel=1e-12)
    assert scale_sp["s_h"] == pytest.approx(1 / factor)   # 1/r, r grows with N under rank scaling
    for name in std_sp:
        assert std_sp[name] == pytest.approx(std_paper[name], rel=0.05), name
    assert std_sp["head_weight"] == pytest.approx(1 / factor, rel=0.05)


def test_mup_sp_rejects_the_mup_only_constants():
    with pytest.raises(ConfigError, match="init_u.*mup_sp"):
        _cfg("mup_sp", init_u=0.3).validate()
    _cfg("mup", init_u=0.3).validate()
    with pytest.raises(ConfigError, match="attn_base_rank.*>= 1"):
        _cfg("mup_sp", attn_base_rank=0).validate()


@pytest.mark.parametrize("scaling", ["channels", "rank"])
def test_moving_the_anchor_keeps_every_widths_shape(scaling):
    """PTConfig.anchor_overrides: the base shape moved to width 64 gives every width the (C, r) it had (the
    demo and the coordinate check anchor 'mup_sp' at their tuning width without changing a model's shape)."""
    cfg = PTConfig(scaling=scaling, parametrization="mup_sp")
    anchor = {k.split(".", 1)[1]: v for k, v in PTConfig(scaling=scaling, width=64).anchor_overrides().items()}
    assert anchor["base_width"] == 64
    for width in (32, 64, 128, 512):
        before = PTConfig(scaling=scaling, width=width)
        after = PTConfig(scaling=scaling, width=width, **anchor)
        assert (after.channels, after.rank) == (before.channels, before.rank), width
    assert cfg.base_width == 256  # the default anchor is the paper's tuning width


def test_demo_and_coordinate_check_anchor_mup_sp_at_their_smallest_width():
    from ptsweep.config import compose
    from ptsweep.sweeps import coords
    from ptsweep.sweeps.demo import demo_config

    sp_anchored = demo_config(compose(["preset=demo", "model.parametrization=mup_sp"])).model
    assert (sp_anchored.width, sp_anchored.base_width, sp_anchored.base_rank, sp_anchored.rank) == (32, 32, 8, 8)
    assert compose(["preset=demo"]).model.parametrization == "mup_sp"  # the default is anchored too
    assert demo_config(compose(["preset=demo"])).model == sp_anchored
    mup = demo_config(compose(["preset=demo", "model.parametrization=mup"])).model  # 'mup' keeps its constants' base
    assert (mup.width, mup.base_width, mup.rank) == (32, 256, 8)
    from ptsweep.sweeps.lr_transfer_plan import stage1_trials
    trials, _ = stage1_trials(compose(["preset=lr_study", "sweep.lr_transfer.weight_grid=[]"]))
    anchors = {(t["model.parametrization"], t.get("model.base_width"), t.get("model.base_rank")) for t in trials}
    assert anchors == {("mup_sp", 32, 8), ("sp", None, None)}  # the study's smallest width, r = N / 4 there
    cfg = compose(["preset=coord_train", "model=pt"])
    assert cfg.sweep.coord_check.anchor == 0 and coords.anchor_of(cfg) == \
        {"model.base_width": 32, "model.base_channels": 4, "model.base_rank": 8}
    assert coords.anchor_of(compose(["preset=coord_train", "model=bert"])) == {}
