"""experiments/weight-drift/adam_eps.py: eps's share of AdamW's step read from a real checkpoint (names mapped in the
optimizer's order, checked against each tensor's own second moment) and the first-step gradients' width slope
(muP: a Z-logit coordinate's gradient ~ 1/N, the decoder bias's width-free)."""

import math

import pytest
import torch
import torch.nn.functional as F

from ptsweep.config import compose, to_dict
from ptsweep.models import build_model, mlm_logits
from ptsweep.parametrization import build_optimizer
from experiment_scripts import load_script

adam_eps = load_script("experiments/weight-drift/adam_eps.py")


def test_eps_share_is_the_mean_of_eps_over_rms_plus_eps():
    rms = torch.tensor([1e-8, 3e-8, 0.0, 1.0])
    assert adam_eps.eps_share(rms, 1e-8) == pytest.approx((0.5 + 0.25 + 1.0 + 1e-8 / (1 + 1e-8)) / 4)


def test_a_checkpoint_names_each_second_moment_by_its_parameter(tmp_path):
    cfg = compose(["model.width=32", "model.base_width=16", "tracker=disabled", "optim.eps=1e-6"])
    model = build_model(cfg.model, 50, cfg.data.seq_len)
    opt = build_optimizer(model, cfg.model.width, cfg.model.parametrization, lr=1e-3, eps=cfg.optim.eps)
    ids = torch.randint(0, 50, (2, 9))
    labels = torch.where(torch.rand(2, 9) < 0.5, ids, -100)
    labels[0, 0] = ids[0, 0]
    F.cross_entropy(mlm_logits(model, ids, torch.ones_like(ids, dtype=torch.bool), labels),
                    labels[labels != -100]).backward()
    opt.step()
    path = tmp_path / "checkpoint.pt"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "state": {"step": 1},
                "config": to_dict(cfg)}, path)
    lines = adam_eps.from_checkpoint(path)
    assert lines[0].endswith("width 32, step 1, eps 1e-06")
    by_name = {line.split()[0]: line for line in lines[1:]}
    params = dict(model.named_parameters())
    assert set(by_name) == set(params)
    for name, p in params.items():
        rms = opt.state[p]["exp_avg_sq"].flatten().sqrt()
        assert f"{tuple(p.shape)}" in by_name[name]  # the shape of the tensor named, not of another one
        assert by_name[name].endswith(f"eps share {adam_eps.eps_share(rms, 1e-6):.3f}")
    assert not math.isclose(adam_eps.eps_share(opt.state[params["unary"]]["exp_avg_sq"].sqrt().flatten(), 1e-6), 0)


def test_the_unary_gradient_falls_like_one_over_width_and_the_decoder_bias_does_not(tmp_path):
    lines = adam_eps.first_step([32, 128], ["data.vocab_size=500", "data.max_train_tokens=20000",
                                            f"data.cache_dir={tmp_path}"])
    assert lines[0].startswith("width 32:") and lines[1].startswith("width 128:")
    slopes = dict(zip(lines[-1].split()[8::2], map(float, lines[-1].split()[9::2])))
    assert -1.3 < slopes["unary"] < -0.8
    assert abs(slopes["head_bias"]) < 0.2
