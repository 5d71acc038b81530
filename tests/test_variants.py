"""PT's variants in the model (``ptsweep/variants``, ``model.variants``: z_loss, qz_entropy_floor, attn_row_rms,
z_scale, topic_scale): without them, the model is the one before they existed (pinned numbers), its hook points are
the identity and no variant code runs; with one, it equals an independent computation (Python loops over tokens and
rows, closed forms, finite differences in float64) on every attention path that supports it. Config, identity,
training step and history: ``test_variants_runs.py``; S's LR rule: ``test_variant_unary_lr.py``."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ptsweep.config import PTConfig
from ptsweep.models import build_model, mlm_logits, pt_dense, training_objective
from ptsweep.models.pt import ProbabilisticTransformer
from ptsweep.variants import attn_row_rms, qz_entropy_floor, z_loss

V = 30
MESSAGES = ("unary", "child", "head", "topic")


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny shapes: conftest says why


def _cfg(**kw) -> PTConfig:
    return PTConfig(**{**dict(width=32, base_width=16, base_channels=2, base_rank=3, n_iters=3), **kw})


def _model(seed: int = 0, variants=(), **kw) -> ProbabilisticTransformer:
    """PT with ``variants`` (``model.variants`` entries) attached, as ``build_model`` builds it."""
    torch.manual_seed(seed)
    return build_model(_cfg(variants=list(variants), **kw), V)


Z_LOSS = {"name": "z_loss", "coef": 0.01}
ROW_RMS = {"name": "attn_row_rms"}


def _inputs(bsz: int = 3, length: int = 11, pads: bool = True, seed: int = 1):
    """ids (B, L), mask (B, L) with pads in row 1 (and a row of 2 real tokens), labels on ~40 % of real tokens."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, V, (bsz, length), generator=g)
    mask = torch.ones(bsz, length, dtype=torch.bool)
    if pads:
        mask[1, 7:] = False
        mask[2, 2:] = False
    labels = torch.where(torch.rand(bsz, length, generator=g) < 0.4, ids, -100).masked_fill(~mask, -100)
    return ids, mask, labels


# ---------------------------------------------------------------- off: the plain model, bit for bit
REFERENCE_CASES = {"mup_sp-dense": dict(attention_impl="dense"), "mup_sp-blockwise": dict(attention_impl="blockwise"),
                   "mup-dense": dict(parametrization="mup"), "sp-dense": dict(parametrization="sp")}
PINNED = {  # (float64 loss, sum |logits|, gradient norm), computed by this code on the commit before the variants
    "mup_sp-dense": ("0x1.d2cc62c8261efp+1", "0x1.7eb8b7e3c3c9cp+7", "0x1.2039a0892922dp+3"),
    "mup_sp-blockwise": ("0x1.d2cc62d099094p+1", "0x1.7eb8b7f331b57p+7", "0x1.2039a0b920c85p+3"),
    "mup-dense": ("0x1.c127372b53880p+1", "0x1.55a58446d9f6dp+6", "0x1.b23cdbba8a2b6p+0"),
    "sp-dense": ("0x1.bfd692d3bc5b4p+1", "0x1.126097e31574ep+8", "0x1.a97a0b9820bf8p+0"),
}


def reference_numbers(case: str) -> tuple[float, float, float]:
    """Loss, sum |logits| and gradient norm of a float64 MLM step of a width-32 PT (with pads)."""
    model = _model(**REFERENCE_CASES[case])
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, V, (3, 11), generator=g)
    mask = torch.ones(3, 11, dtype=torch.bool)
    mask[1, 7:] = False
    labels = torch.where(torch.rand(3, 11, generator=g) < 0.4, ids, -100).masked_fill(~mask, -100)
    logits = mlm_logits(model, ids, mask, labels)
    loss = F.cross_entropy(logits, labels[labels != -100])
    loss.backward()
    gnorm = torch.sqrt(sum(p.grad.pow(2).sum() for p in model.parameters()))
    return float(loss.detach()), float(logits.detach().abs().sum()), float(gnorm)


@pytest.mark.parametrize("case", list(REFERENCE_CASES))
def test_without_variants_the_model_is_the_one_before_them(float64, case):
    """Bit-equal on the machine that pinned them (2026-11, torch 2.13 CPU); 1e-14 allows another CPU's BLAS."""
    got = reference_numbers(case)
    for value, pinned in zip(got, PINNED[case]):
        assert value == pytest.approx(float.fromhex(pinned), rel=1e-14, abs=0), (case, value.hex(), pinned)


@pytest.mark.parametrize("impl", ["dense", "blockwise"])
def test_without_variants_no_variant_code_runs_and_the_objective_is_the_mlm_loss(monkeypatch, impl):
    def boom(*a, **k):
        raise AssertionError("variant code ran without a variant")

    for module, name in ((attn_row_rms, "row_rms_normalize"), (z_loss, "z_loss_value"),
                         (qz_entropy_floor, "token_entropy"), (qz_entropy_floor, "masked_token_mean")):
        monkeypatch.setattr(module, name, boom)
    model = _model(attention_impl=impl)
    assert model.score_transform is None and model.z_factor == model.topic_factor == 1.0
    assert model.aux_losses == {} and model.loss_terms == ()
    ids, mask, labels = _inputs()
    objective, loss, terms = training_objective(model, ids, mask, labels)
    assert objective is loss and terms == {}
    objective.backward()
    assert model.U.grad is not None


# ---------------------------------------------------------------- auxiliary loss terms
def _real_tokens(mask: torch.Tensor) -> list[tuple[int, int]]:
    return [(b, i) for b in range(mask.shape[0]) for i in range(mask.shape[1]) if mask[b, i]]


def _brute_z_loss(z_logits: torch.Tensor, mask: torch.Tensor) -> float:
    """mean over real tokens of log(sum_n exp l_n)^2, one token at a time."""
    vals = [math.log(sum(math.exp(x) for x in z_logits[b, i].tolist())) ** 2 for b, i in _real_tokens(mask)]
    return sum(vals) / len(vals)


def _brute_entropy(q_z: torch.Tensor, mask: torch.Tensor) -> float:
    """mean over real tokens of -sum_n q_n log q_n, one token at a time."""
    vals = [-sum(p * math.log(p) for p in q_z[b, i].tolist() if p > 0) for b, i in _real_tokens(mask)]
    return sum(vals) / len(vals)


@pytest.mark.parametrize("iters", ["final", "all"])
def test_z_loss_is_the_mean_squared_logsumexp_of_the_traced_logits(float64, iters):
    model = _model(variants=[{**Z_LOSS, "iters": iters}])
    ids, mask, _ = _inputs()
    trace, aux = [], {}
    model.mfvi(ids, mask, trace, aux)
    chosen = trace if iters == "all" else trace[-1:]
    expected = 0.01 * sum(_brute_z_loss(step["z_logits"], mask) for step in chosen) / len(chosen)
    assert set(aux) == {"z_loss"} and model.loss_terms == ("z_loss",)
    assert aux["z_loss"].item() == pytest.approx(expected, rel=1e-12)
    assert len(trace) == 3 and expected > 0


def test_entropy_floor_is_the_hinge_on_the_brute_force_mean_entropy(float64):
    floor, weight = 0.9, 3.0
    model = _model(variants=[{"name": "qz_entropy_floor", "floor": floor, "weight": weight}])
    with torch.no_grad():
        model.unary.mul_(40.0)  # sharp Q_z: the floor binds
    ids, mask, _ = _inputs()
    trace, aux = [], {}
    model.mfvi(ids, mask, trace, aux)
    hinges = [max(0.0, floor * math.log(32) - _brute_entropy(step["q_z"], mask)) ** 2 for step in trace]
    assert min(hinges) > 0, hinges
    assert set(aux) == {"qz_entropy_floor"}
    assert aux["qz_entropy_floor"].item() == pytest.approx(weight * sum(hinges) / len(hinges), rel=1e-12)


def test_entropy_floor_below_the_entropy_adds_nothing_and_no_gradient(float64):
    # Q_z near uniform at init: entropy ~log N, far above the floor
    model = _model(variants=[{"name": "qz_entropy_floor", "floor": 0.05}])
    ids, mask, _ = _inputs()
    aux = {}
    model.mfvi(ids, mask, aux=aux)
    assert aux["qz_entropy_floor"].item() == 0.0
    aux["qz_entropy_floor"].backward()
    assert all(p.grad is None or float(p.grad.abs().max()) == 0.0 for p in model.parameters())


def test_no_mfvi_no_terms():
    model = _model(variants=[Z_LOSS, {"name": "qz_entropy_floor", "floor": 0.5}], n_iters=0)
    assert model.loss_terms == ()
    ids, mask, labels = _inputs()
    objective, loss, terms = training_objective(model, ids, mask, labels)
    assert objective is loss and terms == {}


def _fd_check(model, fn, n_dirs: int = 3, eps: float = 1e-6, seed: int = 0) -> None:
    """Autograd's directional derivative of fn() against central differences along random directions of every
    parameter at once."""
    params = [p for p in model.parameters()]
    model.zero_grad()
    fn().backward()
    grads = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params]
    g = torch.Generator().manual_seed(seed)
    for _ in range(n_dirs):
        dirs = [torch.randn(p.shape, generator=g, dtype=p.dtype) for p in params]
        with torch.no_grad():
            for p, d in zip(params, dirs):
                p.add_(eps * d)
            plus = float(fn())
            for p, d in zip(params, dirs):
                p.sub_(2 * eps * d)
            minus = float(fn())
            for p, d in zip(params, dirs):
                p.add_(eps * d)
        analytic = float(sum((gr * d).sum() for gr, d in zip(grads, dirs)))
        numeric = (plus - minus) / (2 * eps)
        assert numeric == pytest.approx(analytic, rel=1e-6, abs=1e-9), (numeric, analytic)


def test_variant_loss_terms_have_the_finite_difference_gradient(float64):
    model = _model(width=8, base_width=8, variants=[{"name": "z_loss", "coef": 0.05, "iters": "all"},
                                                    {"name": "qz_entropy_floor", "floor": 0.95, "weight": 2.0}])
    with torch.no_grad():
        model.unary.mul_(10.0)  # the hinge binds (a kink-free point of it)
    ids, mask, _ = _inputs()

    def terms():
        aux = {}
        model.mfvi(ids, mask, aux=aux)
        assert aux["qz_entropy_floor"].item() > 0
        return aux["z_loss"] + aux["qz_entropy_floor"]

    _fd_check(model, terms)


# ---------------------------------------------------------------- row-RMS attention scores
def test_row_rms_normalize_matches_a_loop_over_rows(float64):
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(2, 3, 4, 6, generator=g)
    valid = torch.rand(2, 1, 4, 6, generator=g) < 0.6
    valid[0, 0, 1] = False  # a row without a valid head
    out = attn_row_rms.row_rms_normalize(scores, valid)
    for b in range(2):
        for c in range(3):
            for i in range(4):
                js = [j for j in range(6) if valid[b, 0, i, j]]
                mean_sq = sum(float(scores[b, c, i, j]) ** 2 for j in js) / max(len(js), 1)
                for j in range(6):
                    ref = float(scores[b, c, i, j]) / math.sqrt(mean_sq + attn_row_rms.SCORE_NORM_EPS)
                    assert float(out[b, c, i, j]) == pytest.approx(ref, rel=1e-12, abs=1e-15)


def test_row_rms_attention_logits_have_rms_w_attn_on_every_row(float64):
    model = _model(variants=[ROW_RMS], w_attn=2.5)
    ids, mask, _ = _inputs()
    trace = model.inspect(ids, mask)
    valid = model.valid_pairs(mask)                                            # (B, 1, L, L)

    def mean_sq(x, keep):
        return (x.pow(2) * keep).sum(-1) / keep.sum(-1).clamp_min(1)

    for step in trace:
        a = step["attn_logits"]                                                # (B, C, L, L)
        keep = valid.expand_as(a).to(a.dtype)
        rows = keep.sum(-1) > 0
        raw = mean_sq(pt_dense.pair_scores(step["q"], step["v"], model._layout(a.shape[-1], a.device)), keep)
        expected = 2.5 * (raw / (raw + attn_row_rms.SCORE_NORM_EPS)).sqrt()          # RMS w_attn but for eps
        assert torch.allclose(mean_sq(a, keep).sqrt()[rows], expected[rows], rtol=1e-10)
    with pytest.raises(ValueError, match="a score transform needs the attention mask"):
        model.attention_logits(trace[0]["q"], trace[0]["v"])


def _encode_and_grads(model, ids, mask, weights):
    model.zero_grad()
    aux = {}
    h = model.encode(ids, mask, aux=aux)
    ((h * weights).sum() + sum(aux.values())).backward()
    return [h.detach(), *(t.item() for t in aux.values()),
            *(torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in model.parameters())]


def test_row_rms_is_the_same_on_the_dense_and_blockwise_paths(float64):
    """Two blocks of 32 rows (L = 37), pads, every parameter's gradient; the z-loss rides along. Within 1e-6: the
    blockwise path takes its softmax in float32 (as the dense one does for half precision only)."""
    dense = _model(variants=[ROW_RMS, Z_LOSS], attention_impl="dense")
    block = _model(variants=[ROW_RMS, Z_LOSS], attention_impl="blockwise")
    block.load_state_dict(dense.state_dict())
    ids, mask, _ = _inputs(length=37)
    mask[1, 30:] = False
    weights = torch.randn(*ids.shape, 32, generator=torch.Generator().manual_seed(3))
    plain = _model(variants=[Z_LOSS], attention_impl="dense")
    plain.load_state_dict(dense.state_dict())
    ref = _encode_and_grads(dense, ids, mask, weights)
    got = _encode_and_grads(block, ids, mask, weights)
    assert float((ref[0] - _encode_and_grads(plain, ids, mask, weights)[0]).abs().max()) > 1e-3  # the variant acts
    for a, b in zip(got, ref):
        a, b = torch.as_tensor(a), torch.as_tensor(b)
        assert float((a - b).abs().max()) <= 1e-6 * max(float(b.abs().max()), 1e-12)


def test_row_rms_gradient_matches_finite_differences(float64):
    """On the dense path (the blockwise one's float32 softmax would drown central differences; the test above holds
    its gradients to the dense ones)."""
    model = _model(width=8, base_width=8, variants=[ROW_RMS], attention_impl="dense", n_iters=2)
    ids, mask, _ = _inputs()
    weights = torch.randn(*ids.shape, 8, generator=torch.Generator().manual_seed(4))
    _fd_check(model, lambda: (model.encode(ids, mask) * weights).sum())


# ---------------------------------------------------------------- width rules
def test_z_scale_multiplies_combine_z_by_the_log_ratio_of_widths():
    g = torch.Generator().manual_seed(0)
    msgs = {name: torch.randn(2, 5, 64, generator=g) for name in MESSAGES}
    plain = _model(width=64, base_width=16).combine_z(msgs)
    for width, ratio in ((64, math.sqrt(math.log(64) / math.log(16))), (32, math.sqrt(1.25)), (16, 1.0)):
        ruled = _model(width=width, base_width=16, variants=[{"name": "z_scale"}]).combine_z(msgs)
        assert torch.allclose(ruled, ratio * plain, rtol=1e-6)
    assert torch.equal(_model(width=16, base_width=16, variants=[{"name": "z_scale"}]).combine_z(msgs),
                       _model(width=16, base_width=16).combine_z(msgs))  # 1 at the anchor, exactly


def test_z_scale_enters_the_mfvi_update_before_damping(float64):
    """l^(1) = beta_Z S_w + (1 - beta_Z) sigma_Z sum_k w_k m_k from the traced (unweighted) messages."""
    model = _model(width=64, base_width=16, variants=[{"name": "z_scale"}], w_child=1.5, w_topic_z=0.5)
    ids, mask, _ = _inputs()
    step = model.inspect(ids, mask)[0]
    beta, sigma = model.cfg.z_damping, math.sqrt(1.5)
    weights = {"unary": 1.0, "child": 1.5, "head": 1.0, "topic": 0.5}
    total = sum(weights[name] * step[f"msg_{name}"] for name in MESSAGES)
    expected = beta * model.unary[ids] * mask[..., None] + (1 - beta) * sigma * total
    assert beta == 0.5 and torch.allclose(step["z_logits"], expected, rtol=1e-12, atol=1e-12)


def test_topic_scale_topic_logits_from_the_traced_features(float64):
    """E = w_topic_g s_G sqrt(N0 / N) B P^ (no H/G damping), and the plain model's logits at the anchor."""
    model = _model(width=64, base_width=16, variants=[{"name": "topic_scale"}], w_topic_g=1.5)
    ids, mask, _ = _inputs()
    for step in model.inspect(ids, mask):
        expected = 1.5 * model.const.s_g * 0.5 * (step["p_hat"] @ model.B.t())
        assert torch.allclose(step["topic_logits"], expected, rtol=1e-12, atol=1e-12)
    anchored = _model(width=16, base_width=16, variants=[{"name": "topic_scale"}])
    plain = _model(width=16, base_width=16)
    p_hat = torch.rand(2, 5, 16)
    assert anchored.topic_factor == 1.0 and torch.equal(anchored.topic_logits(p_hat), plain.topic_logits(p_hat))
