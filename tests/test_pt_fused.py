"""The fused-kernel PT attention path (``attention_impl=fused``, ``pt_fused``) equals the dense reference in float64:
messages, encoder output and every parameter gradient within 1e-9 relative; its autograd.Function passes gradcheck;
the private aten kernels it calls exist with the signatures and the semantics it relies on."""

import pytest
import torch

from ptsweep.config import PTConfig
from ptsweep.errors import ConfigError
from ptsweep.models import pt_fused
from ptsweep.models.pt import ProbabilisticTransformer

V = 30


def _cfg(**kw):
    base = dict(width=16, base_width=16, base_channels=2, base_rank=3, n_iters=3)
    return PTConfig(**{**base, **kw})


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny shapes: conftest says why


def test_private_flash_ops_exist_with_the_signatures_used():
    fwd, bwd = pt_fused.flash_ops()
    assert str(fwd.default._schema) == (
        "aten::_scaled_dot_product_flash_attention_for_cpu(Tensor query, Tensor key, Tensor value, "
        "float dropout_p=0., bool is_causal=False, *, Tensor? attn_mask=None, float? scale=None) "
        "-> (Tensor output, Tensor logsumexp)")
    assert str(bwd.default._schema) == (
        "aten::_scaled_dot_product_flash_attention_for_cpu_backward(Tensor grad_out, Tensor query, Tensor key, "
        "Tensor value, Tensor out, Tensor logsumexp, float dropout_p, bool is_causal, *, Tensor? attn_mask=None, "
        "float? scale=None) -> (Tensor grad_query, Tensor grad_key, Tensor grad_value)")


def test_flash_ops_semantics_relied_on(float64):
    """float64; causal = key index <= query index; a (B, H, 1, n) float mask is a per-key bias added after the
    scale; the backward rebuilds P from the caller's lse and takes D = rowsum(grad_out * out) from the caller's out."""
    fwd, bwd = pt_fused.flash_ops()
    torch.manual_seed(0)
    q, k, v, g, o = (torch.randn(2, 3, 7, 4) for _ in range(5))
    bias, scale = torch.randn(2, 3, 1, 7), 0.7
    logits = (scale * q @ k.transpose(-1, -2) + bias).masked_fill(~torch.ones(7, 7, dtype=torch.bool).tril(),
                                                                  -torch.inf)
    out, lse = fwd(q, k, v, 0.0, True, attn_mask=bias, scale=scale)
    assert out.dtype == lse.dtype == torch.float64 and lse.shape == (2, 3, 7)
    assert torch.allclose(lse, logits.logsumexp(-1), rtol=1e-13, atol=1e-13)
    assert torch.allclose(out, torch.softmax(logits, -1) @ v, rtol=1e-13, atol=1e-13)
    lse_any = lse + torch.rand_like(lse)
    p = (logits - bias - lse_any[..., None]).exp()  # no bias in the backward call
    ds = p * (g @ v.transpose(-1, -2) - (g * o).sum(-1, keepdim=True))
    dq, dk, dv = bwd(g, q, k, v, o, lse_any, 0.0, True, attn_mask=None, scale=scale)
    for got, ref in ((dq, scale * ds @ k), (dk, scale * ds.transpose(-1, -2) @ q), (dv, p.transpose(-1, -2) @ g)):
        assert torch.allclose(got, ref, rtol=1e-12, atol=1e-12)


def _run(model, ids, mask):
    model.zero_grad(set_to_none=True)
    h = model.encode(ids, mask)
    loss = torch.nn.functional.cross_entropy(model.head(h[mask]), ids[mask])
    loss.backward()
    return h.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def _assert_close(got, ref, tol, what):
    got, ref = got.detach(), ref.detach()
    err = float((got - ref).abs().max()) / max(float(ref.abs().max()), 1e-300)
    assert err <= tol, f"{what}: relative error {err:.2e}"


@pytest.mark.parametrize("length", [7, 13])
@pytest.mark.parametrize("dists", [(2, 3, 4), (2,), (3, 5)])
@pytest.mark.parametrize("scaling", ["channels", "rank"])
@pytest.mark.parametrize("parametrization", ["mup", "sp"])
def test_fused_output_and_every_gradient_match_dense(float64, monkeypatch, parametrization, scaling, dists, length):
    """End to end (T = 3 MFVI iterations + MLM head, no pads), float64: fused vs dense, encoder output and every
    parameter gradient within 1e-9 relative; the fused Function really ran (once per iteration)."""
    kw = dict(parametrization=parametrization, scaling=scaling, dists=dists, width=32)
    torch.manual_seed(0)
    dense = ProbabilisticTransformer(_cfg(attention_impl="dense", **kw), V)
    fused = ProbabilisticTransformer(_cfg(attention_impl="fused", **kw), V)
    fused.load_state_dict(dense.state_dict())
    ids = torch.randint(0, V, (2, length))
    mask = torch.ones(2, length, dtype=torch.bool)
    calls = []
    apply = pt_fused._FusedMessages.apply
    monkeypatch.setattr(pt_fused._FusedMessages, "apply", lambda *a: calls.append(1) or apply(*a))
    h, grads = _run(fused, ids, mask)
    assert len(calls) == 3
    h_ref, grads_ref = _run(dense, ids, mask)
    _assert_close(h, h_ref, 1e-9, "encoder output")
    for name, g in grads_ref.items():
        _assert_close(grads[name], g, 1e-9, name)


@pytest.mark.parametrize("dists,length", [((2, 3, 4), 67), ((), 5), ((6,), 5), ((2, 3, 4), 2), ((2, 3, 4), 4)])
def test_fused_messages_match_dense(float64, dists, length):
    """The two ternary Z messages at one P^, and their gradients through P^ and the weights: kernel blocks crossed
    (L = 67), one class per direction (dists ()), no far pair (L <= D), the shortest sequence."""
    torch.manual_seed(1)
    model = ProbabilisticTransformer(_cfg(dists=dists, attention_impl="dense"), V)
    bsz, n = 2, model.width
    p_hat = torch.randn(bsz, length, n, requires_grad=True)
    weights = model.flat_weights()
    k, c, _, r = model.U.shape
    scale = model.cfg.w_attn * model.const.s_h
    mask = torch.ones(bsz, length, dtype=torch.bool)
    q, v = model.projections(p_hat, weights)
    q_h = torch.softmax(model.mask_logits(model.attention_logits(q, v), mask), -1)
    ref = model.z_messages(torch.zeros(bsz, length, dtype=torch.long), mask, q, v, q_h, torch.zeros(bsz, length,
                                                                                                  model.cfg.width * 4))
    got = pt_fused.fused_messages(p_hat, weights, (k, c, r), model.classes, scale)
    probes = [torch.randn(bsz, length, n) for _ in range(2)]
    params = (p_hat, model.U, model.V)
    grads = [torch.autograd.grad(sum((o * w).sum() for o, w in zip(outs, probes)), params)
             for outs in (got, (ref["child"], ref["head"]))]
    for a, b, what in zip((*got, *grads[0]), (ref["child"], ref["head"], *grads[1]),
                          ("child", "head", "d p_hat", "d U", "d V")):
        _assert_close(a, b, 1e-9, what)


@pytest.mark.parametrize("dists,length", [((2,), 5), ((), 4), ((2, 3), 6)])
def test_fused_function_passes_gradcheck(float64, dists, length):
    torch.manual_seed(2)
    k, c, r, n = 2 * (len(dists) + 1), 2, 2, 3
    model_classes = ProbabilisticTransformer(_cfg(dists=dists), V).classes
    p_hat = torch.randn(2, length, n, requires_grad=True)
    w_q, w_v = (torch.randn(n, k * c * r, requires_grad=True) for _ in range(2))
    w_c, w_h = (torch.randn(k * c * r, n, requires_grad=True) for _ in range(2))

    def fn(p, wq, wv, wc, wh):
        return pt_fused.fused_messages(p, {"q": wq, "v": wv, "child": wc, "head": wh}, (k, c, r), model_classes, 0.8)

    assert torch.autograd.gradcheck(fn, (p_hat, w_q, w_v, w_c, w_h), eps=1e-6, atol=1e-7, rtol=1e-6)


def test_batches_with_pads_take_the_blockwise_path(float64, monkeypatch):
    """A batch with pads never reaches the fused Function; the model gives what the blockwise model gives (exactly:
    the same code; the blockwise softmax runs in float32, so the dense reference is not the right comparison)."""
    torch.manual_seed(3)
    blockwise = ProbabilisticTransformer(_cfg(attention_impl="blockwise"), V)
    fused = ProbabilisticTransformer(_cfg(attention_impl="fused"), V)
    fused.load_state_dict(blockwise.state_dict())
    ids = torch.randint(0, V, (3, 9))
    mask = torch.ones(3, 9, dtype=torch.bool)
    mask[1, 6:] = False
    monkeypatch.setattr(pt_fused._FusedMessages, "apply", lambda *a: pytest.fail("fused path with pads"))
    h, grads = _run(fused, ids, mask)
    h_ref, grads_ref = _run(blockwise, ids, mask)
    assert torch.equal(h, h_ref)
    for name, g in grads_ref.items():
        assert torch.equal(grads[name], g), name


def test_fused_config_choice_checks_and_note():
    assert _cfg(attention_impl="fused").use_fused("cpu") and not _cfg(attention_impl="fused").use_blockwise("cpu")
    assert not _cfg().use_fused("cpu") and not _cfg(attention_impl="blockwise").use_fused("cpu")
    assert _cfg(attention_impl="fused").attention_note("cpu") is None
    assert "CPU kernels only" in _cfg(attention_impl="fused").attention_note("cuda")
    with pytest.raises(ConfigError, match="model.attention_impl"):
        _cfg(attention_impl="fused", dropout=0.1).validate()
    assert not pt_fused.applicable(torch.ones(2, 1, dtype=torch.bool))
