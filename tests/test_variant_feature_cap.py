"""The Z-feature bound (the variant ``feature_cap``, ``variants/feature_cap.py``): inside MFVI every iteration's Z
features are cap * tanh(P^ / cap) of the hand-computed P^ = a_Z Q_z - center (bounded, RMS below the cap where the
plain features exceed it), the topic features keep their plain form, the dense and blockwise paths agree, and the head
reads capped features under ``head_input=probs``; a run of ``train.run`` attaches it."""

from __future__ import annotations

import pytest
import torch

from ptsweep.config import compose
from ptsweep.errors import ConfigError
from ptsweep.models import build_model, mlm_logits
from test_variants import V, _cfg, _inputs, _model

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny shapes: conftest says why

CAP = 2.0
SHARP = dict(parametrization="mup", init_unary=4.0)
"""'mup' (P^ = N Q_z - 1, centred) with a wide unary init: Q_z is sharp from the first iteration, so |P^| >> CAP."""


def _hand_features(model, q: torch.Tensor, scale: float) -> torch.Tensor:
    """P^ = scale * Q - center * sum(Q), written out (spec §6.3 step 1; ``models/pt.py`` module docstring)."""
    return scale * q - model.const.center * q.sum(-1, keepdim=True)


def test_every_mfvi_iteration_reads_the_capped_z_features(float64):
    model = _model(variants=[{"name": "feature_cap", "cap": CAP}], **SHARP)
    ids, mask, _ = _inputs()
    trace = model.inspect(ids, mask)
    assert len(trace) == model.cfg.n_iters and model.const.center == 1.0
    exceeded = False
    for step in trace:
        plain = _hand_features(model, step["q_z"], model.const.a_z)
        torch.testing.assert_close(step["p_hat"], CAP * torch.tanh(plain / CAP), rtol=1e-12, atol=1e-12)
        real = step["p_hat"][mask]                                                   # (n real tokens, N)
        assert real.abs().max() < CAP and real.pow(2).mean().sqrt() < CAP
        exceeded |= bool(plain[mask].abs().max() > 2 * CAP)
    assert exceeded  # the bound did bind: the plain features of these iterates run past it


def test_the_topic_features_are_not_capped(float64):
    model = _model(variants=[{"name": "feature_cap", "cap": CAP}], **SHARP)
    q_g = torch.softmax(20 * torch.randn(2, 5, model.cfg.topics, dtype=torch.float64), -1)
    want = _hand_features(model, q_g, model.const.a_g)
    assert want.abs().max() > 2 * CAP and torch.equal(model.topic_features(q_g), want)


def test_the_cap_changes_the_output_and_the_dense_and_blockwise_paths_agree(float64):
    ids, mask, labels = _inputs()
    plain = mlm_logits(_model(**SHARP), ids, mask, labels)
    capped = {impl: mlm_logits(_model(variants=[{"name": "feature_cap", "cap": CAP}], attention_impl=impl, **SHARP),
                               ids, mask, labels) for impl in ("dense", "blockwise")}
    torch.testing.assert_close(capped["blockwise"], capped["dense"], rtol=1e-6, atol=1e-8)  # 1e-3 apart from plain
    assert (capped["dense"] - plain).abs().max() > 1e-3


def test_the_head_reads_capped_features_under_head_input_probs(float64):
    model = _model(variants=[{"name": "feature_cap", "cap": CAP}], head_input="probs", **SHARP)
    ids, mask, _ = _inputs()
    logits = model.mfvi(ids, mask)
    want = CAP * torch.tanh(_hand_features(model, torch.softmax(logits, -1), model.const.a_z) / CAP)
    torch.testing.assert_close(model.encode(ids, mask), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cap", [0.0, -1.0, float("inf")])
def test_a_cap_that_bounds_nothing_is_a_config_error(cap):
    with pytest.raises(ConfigError, match=f"model.variants: feature_cap: cap must be positive, got {cap}"):
        _cfg(variants=[{"name": "feature_cap", "cap": cap}]).validate()


def test_build_model_from_a_composed_override_attaches_the_cap():
    cfg = compose(["preset=smoke", "model.width=32", "model.scaling=rank", "model.parametrization=mup",
                   "model.variants=[{name:feature_cap,cap:0.5}]"])
    model = build_model(cfg.model, V)
    q = torch.softmax(5 * torch.randn(2, 3, model.width), -1)
    assert torch.allclose(model.features(q), 0.5 * torch.tanh(_hand_features(model, q, model.const.a_z) / 0.5))
