"""PT's variants around the model (``ptsweep/variants``, ``model.variants``; experiments/lr-transfer/levers.md): the
entries' one-line errors, run and trial identities (an empty list is the config without the key; the keys of the
levers' earlier schema at their off values read as absent), the training step that backpropagates the loss terms, the
history that reports them (the lever studies' planned trials: ``test_lever_scripts.py``)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ptsweep.config import compose, to_dict, with_overrides
from ptsweep.errors import ConfigError
from ptsweep.identity import config_hash, result_config, trial_key
from ptsweep.models import build_model, mlm_logits
from ptsweep.train import accumulate_gradients
from test_variants import V, _cfg, _inputs, _model


# ---------------------------------------------------------------- config and identity
@pytest.mark.parametrize("entry, kw, message", [
    ({"name": "z_loss", "coef": -1e-4}, {}, "z_loss: coef must be > 0, got -0.0001"),
    ({"name": "z_loss", "coef": math.nan}, {}, "z_loss: coef must be > 0, got nan"),
    ({"name": "z_loss", "coef": 1e-4, "iters": "every"}, {},
     "z_loss: iters must be one of ['final', 'all'], got 'every'"),
    ({"name": "z_loss"}, {}, "z_loss: settings [] do not fit its settings ['coef', 'iters']"),
    ({"name": "z_loss", "coef": 1e-4, "scale": 2}, {},
     "z_loss: settings ['coef', 'scale'] do not fit its settings ['coef', 'iters']"),
    ({"name": "qz_entropy_floor", "floor": 1.0}, {},
     "qz_entropy_floor: floor must be a fraction of log N in (0, 1), got 1.0"),
    ({"name": "qz_entropy_floor", "floor": 0.5, "weight": 0}, {}, "qz_entropy_floor: weight must be positive, got 0.0"),
    ({"name": "z_scale"}, {"base_width": 1, "base_channels": 1},
     "z_scale: needs model.width and model.base_width >= 2 (log N0 > 0), got 32 and 1"),
    ({"name": "unary_lr", "scale": 0.0}, {}, "unary_lr: scale must be positive, got 0.0"),
    ({"name": "unary_lr", "scale": 2.0}, {"parametrization": "sp"},
     "unary_lr: scales a muP LR constant, which 'sp' does not read; use a muP parametrization"),
    ({"name": "unary_lr", "rule": "sqrt"}, {}, "unary_lr: rule must be one of ['const', 'sqrt_capped'], got 'sqrt'"),
    ({"name": "unary_lr", "rule": "sqrt_capped"}, {},
     "unary_lr: cap must be a positive LR under rule sqrt_capped and 0 under const, got 0.0 with sqrt_capped"),
    ({"name": "unary_lr", "cap": 0.04}, {},
     "unary_lr: cap must be a positive LR under rule sqrt_capped and 0 under const, got 0.04 with const"),
    ({"name": "temperature"}, {}, "unknown variant 'temperature' (choose from z_loss, qz_entropy_floor, attn_row_rms, "
     "z_scale, topic_scale, unary_lr, feature_cap, independent_wd)"),
])
def test_bad_variant_entries_are_one_line_config_errors(entry, kw, message):
    with pytest.raises(ConfigError) as e:
        _cfg(variants=[entry], **kw).validate()
    assert str(e.value) == f"model.variants: {message}"


def test_a_variant_listed_twice_is_an_error_and_settings_are_filled_in():
    with pytest.raises(ConfigError, match="model.variants: z_scale is listed twice"):
        _cfg(variants=[{"name": "z_scale"}, {"name": "z_scale"}]).validate()
    cfg = _cfg(variants=[{"name": "qz_entropy_floor", "floor": 0.5, "weight": 2}])
    cfg.validate()
    assert cfg.variants == [{"name": "qz_entropy_floor", "floor": 0.5, "weight": 2.0}]


def _keys(*overrides: str) -> tuple[str, str]:
    cfg = compose(["preset=lr_study", "model.width=128", "model.base_width=32", "model.scaling=rank",
                   "model.base_rank=8", *overrides])
    return config_hash(cfg), trial_key(to_dict(cfg), {})


def test_variants_change_an_identity_and_none_is_the_config_without_the_key():
    plain = _keys()
    assert _keys("model.variants=[]") == plain
    on = ["[{name:z_loss,coef:1e-4}]", "[{name:qz_entropy_floor,floor:0.5}]", "[{name:attn_row_rms}]",
          "[{name:z_scale}]", "[{name:topic_scale}]", "[{name:unary_lr,scale:2.0}]",
          "[{name:unary_lr,rule:sqrt_capped,cap:0.04}]", "[{name:z_loss,coef:1e-4,iters:all}]",
          "[{name:qz_entropy_floor,floor:0.5,weight:5.0}]", "[{name:z_loss,coef:1e-4},{name:z_scale}]"]
    keys = [_keys(f"model.variants={v}") for v in on]
    assert len({k for pair in keys for k in pair} | set(plain)) == 2 * len(keys) + 2  # every one new, all distinct
    # a setting left at its default is the same run as one written out
    assert _keys("model.variants=[{name:z_loss,coef:1e-4,iters:final}]") == keys[0]


def test_the_levers_earlier_keys_at_their_off_values_read_as_absent():
    """An old checkpoint's config carries model.z_loss=0.0 ... unary_lr_cap=0.0 and train.message_stats: its result
    config is the new one's (the resume check compares these); a lever that was on is another config, and the
    schema says where the key went."""
    from ptsweep.config import from_dict
    from ptsweep.config.convert import RETIRED_KEYS

    cfg = compose(["preset=smoke"])
    old = to_dict(cfg)
    for key, values in RETIRED_KEYS.items():
        section, leaf = key.split(".")
        old[section][leaf] = values[-1]
    assert result_config(old) == result_config(cfg)
    old["model"]["z_loss"] = 1e-3
    assert result_config(old) != result_config(cfg)
    with pytest.raises(ConfigError, match="model.z_loss: retired; PT's variants are set in model.variants"):
        from_dict(old)


def test_the_unary_lr_scale_multiplies_the_adamw_step_of_s_and_of_nothing_else():
    """One AdamW step from the same init: S moves by exactly the factor times the plain model's step (Adam's first
    step is lr * sign(g) elementwise), every other tensor by the same amount as in the plain model."""
    from ptsweep.parametrization import build_optimizer

    ids, mask, labels = _inputs()
    steps = {}
    for scale in (1.0, 2.5):
        model = _model(variants=[{"name": "unary_lr", "scale": scale}])
        before = {k: p.detach().clone() for k, p in model.named_parameters()}
        opt = build_optimizer(model, model.cfg.width, model.cfg.parametrization, lr=1e-3)
        F.cross_entropy(mlm_logits(model, ids, mask, labels), labels[labels >= 0]).backward()
        opt.step()
        steps[scale] = {k: p.detach() - before[k] for k, p in model.named_parameters()}
    for name, step in steps[1.0].items():
        factor = 2.5 if name == "unary" else 1.0
        torch.testing.assert_close(steps[2.5][name], factor * step, rtol=1e-4, atol=1e-9)
    assert steps[1.0]["unary"].abs().max() > 0  # S did move (its rows for the batch's tokens)


def test_a_sweep_override_of_the_variants_reaches_the_model():
    cfg = with_overrides(compose(["preset=smoke"]), {"model.variants": [{"name": "z_loss", "coef": 1e-3},
                                                                        {"name": "attn_row_rms"}]})
    model = build_model(cfg.model, V)
    assert model.loss_terms == ("z_loss",) and model.attention_scale() == cfg.model.w_attn


# ---------------------------------------------------------------- training step and loop
@pytest.mark.parametrize("micro", [0, 1])
def test_a_training_step_backpropagates_the_terms_and_returns_the_mlm_loss(micro):
    model = _model(variants=[{"name": "z_loss", "coef": 0.02}, {"name": "qz_entropy_floor", "floor": 0.999}])
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


def test_the_history_reports_the_variant_terms(cache_dir, tmp_path, monkeypatch):
    from ptsweep import train
    from ptsweep.tracking import LocalTracker

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    cfg = compose(["preset=smoke", "tracker=disabled", f"out_dir={tmp_path}", f"data.cache_dir={cache_dir}",
                   "model.width=32", "model.base_width=32", "model.base_rank=8", "model.scaling=rank",
                   "train.tokens=2048",
                   "model.variants=[{name:z_loss,coef:1e-3},{name:qz_entropy_floor,floor:0.99}]"])
    metrics = train.run(cfg, LocalTracker())
    logged = [row for row in metrics["history"] if "train_loss" in row]
    assert metrics["status"] == "ok" and logged
    for row in logged:
        assert row["aux/z_loss"] > 0 and math.isfinite(row["aux/z_loss"]) and row["aux/qz_entropy_floor"] >= 0
