"""The blockwise (memory linear in L) PT attention path equals the dense reference: messages, gradients, encode."""

import pytest
import torch

from ptsweep.config import PTConfig
from ptsweep.errors import ConfigError
from ptsweep.models import pt_attention
from ptsweep.models.pt import ProbabilisticTransformer

V = 40


def _cfg(**kw) -> PTConfig:
    base = dict(width=32, base_width=32, base_channels=2, base_rank=4, n_iters=2)
    base.update(kw)
    return PTConfig(**base)


def _inputs(bsz=3, length=19, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, V, (bsz, length), generator=g)
    mask = torch.ones(bsz, length, dtype=torch.bool)
    mask[1, 12:] = False  # padding
    mask[2, 2:] = False   # a sequence of two real tokens
    return ids, mask


def _close(a, b, tol=1e-5):
    """|a - b| <= tol * max|b| (fp32 rounding of differently ordered sums)."""
    a, b = a.detach(), b.detach()
    scale = max(float(b.abs().max()), 1e-12)
    assert float((a - b).abs().max()) <= tol * scale, (float((a - b).abs().max()), scale)


@pytest.mark.parametrize("parametrization", ["mup", "sp"])
@pytest.mark.parametrize("scaling", ["channels", "rank"])
@pytest.mark.parametrize("block", [1, 5, 64])
def test_messages_and_grads_match_dense(parametrization, scaling, block):
    """child/head messages and their gradients w.r.t. P^, U, V equal the dense z_messages (all classes, pads)."""
    torch.manual_seed(0)
    model = ProbabilisticTransformer(_cfg(parametrization=parametrization, scaling=scaling, width=64), V)
    ids, mask = _inputs()
    q_z = torch.softmax(torch.randn(*ids.shape, model.width) * 3, -1) * mask[..., None]
    p_hat = model.features(q_z).requires_grad_()
    g_hat = torch.rand(*ids.shape, model.cfg.topics)
    w_c, w_h = torch.randn(*ids.shape, model.width), torch.randn(*ids.shape, model.width)

    def run(blockwise: bool):
        for p in (p_hat, model.U, model.V):
            p.grad = None
        weights = model.flat_weights(layout_order=blockwise)
        if blockwise:
            k, c, _, r = model.U.shape
            child, head = pt_attention.blockwise_messages(
                p_hat, weights, (k, c, r), mask, model.classes, model.cfg.w_attn * model.const.s_h,
                model.cfg.mask_value, block=block)
        else:
            q, v = model.projections(p_hat, weights)
            q_h = torch.softmax(model.mask_logits(model.attention_logits(q, v), mask), -1)
            msgs = model.z_messages(ids, mask, q, v, q_h, g_hat, weights)
            child, head = msgs["child"], msgs["head"]
        ((child * w_c).sum() + (head * w_h).sum()).backward()
        return child.detach(), head.detach(), p_hat.grad.clone(), model.U.grad.clone(), model.V.grad.clone()

    for got, ref in zip(run(True), run(False)):
        _close(got, ref)


def test_near_only_offsets_and_long_dists():
    """Other distance cut points (a wide near band, W larger than a block) still match the dense path."""
    torch.manual_seed(1)
    model = ProbabilisticTransformer(_cfg(dists=(3, 7)), V)
    ids, mask = _inputs(length=23)
    q_z = torch.softmax(torch.randn(*ids.shape, model.width), -1) * mask[..., None]
    p_hat = model.features(q_z)
    weights = model.flat_weights()
    q, v = model.projections(p_hat, weights)
    q_h = torch.softmax(model.mask_logits(model.attention_logits(q, v), mask), -1)
    ref = model.z_messages(ids, mask, q, v, q_h, torch.zeros(*ids.shape, model.cfg.topics), weights)
    k, c, _, r = model.U.shape
    child, head = pt_attention.blockwise_messages(p_hat, model.flat_weights(True), (k, c, r), mask, model.classes,
                                                  model.cfg.w_attn * model.const.s_h, model.cfg.mask_value, block=4)
    _close(child, ref["child"])
    _close(head, ref["head"])


@pytest.mark.parametrize("parametrization", ["mup", "sp"])
def test_encode_and_param_grads_match_dense(parametrization):
    """The whole encoder (T iterations) and every parameter gradient of an MLM-style loss: blockwise == dense."""
    torch.manual_seed(2)
    dense = ProbabilisticTransformer(_cfg(parametrization=parametrization, attention_impl="dense", n_iters=3), V)
    fast = ProbabilisticTransformer(_cfg(parametrization=parametrization, attention_impl="blockwise", n_iters=3), V)
    fast.load_state_dict(dense.state_dict())
    ids, mask = _inputs()
    w = torch.randn(*ids.shape, dense.width)
    outs = []
    for m in (dense, fast):
        h = m.encode(ids, mask)
        ((m.head(h) * mask[..., None]).logsumexp(-1).sum() + (h * w).sum()).backward()
        outs.append((h.detach(), {n: p.grad.clone() for n, p in m.named_parameters()}))
    _close(outs[1][0][mask], outs[0][0][mask])
    for name, g in outs[0][1].items():
        _close(outs[1][1][name], g)


def test_auto_is_dense_on_every_device_and_blockwise_only_when_asked():
    for device in ("cpu", "cuda"):  # auto: the path bench/ measured faster on both (bench/README.md)
        assert not _cfg().use_blockwise(device)
        assert _cfg(attention_impl="blockwise").use_blockwise(device)
        assert not _cfg(attention_impl="dense").use_blockwise(device)
    for kw in ({"dropout": 0.1}, {"damping_h": 0.5}, {"stepsize_h": 0.5}):
        assert not _cfg(**kw).use_blockwise("cuda")


def test_the_retired_fused_path_is_a_one_line_config_error(capsys):
    """``model.attention_impl=fused`` (retired: bench/README.md) is refused in one line naming the key and the paths
    that remain."""
    from ptsweep import cli

    assert cli.main(["size", "model.attention_impl=fused"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: model.attention_impl: 'fused' was retired"), err
    assert err[0].endswith("use dense, auto or blockwise"), err


@pytest.mark.parametrize("kw", [{"dropout": 0.1}, {"damping_h": 0.3}, {"stepsize_h": 0.5}])
def test_blockwise_with_dropout_is_a_config_error(kw):
    with pytest.raises(ConfigError, match="model.attention_impl"):
        ProbabilisticTransformer(_cfg(attention_impl="blockwise", **kw), V)


def test_trace_uses_dense_q_h_and_matches():
    """inspect() still returns the dense Q_h; its final logits equal the blockwise forward's."""
    torch.manual_seed(3)
    model = ProbabilisticTransformer(_cfg(attention_impl="blockwise"), V)
    ids, mask = _inputs()
    trace = model.inspect(ids, mask)
    assert trace[0]["q_h"].shape == (3, model.cfg.channels, 19, 19)
    with torch.no_grad():
        _close(model.encode(ids, mask)[mask], trace[-1]["z_logits"][mask])


def test_saved_memory_is_linear_in_length():
    """Bytes saved for backward per sequence: blockwise grows ~linearly in L (<= 4.2x for 4x L), dense faster."""
    def saved(impl: str, length: int) -> int:
        torch.manual_seed(0)
        model = ProbabilisticTransformer(_cfg(attention_impl=impl, width=64), V)
        ids = torch.randint(0, V, (2, length))
        seen = {}

        def pack(t):
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model.encode(ids, torch.ones_like(ids, dtype=torch.bool))
        del out
        params = {p.untyped_storage().data_ptr() for p in model.parameters()}
        return sum(b for ptr, b in seen.items() if ptr not in params)

    fast = saved("blockwise", 256) / saved("blockwise", 64)
    dense = saved("dense", 256) / saved("dense", 64)
    assert fast <= 4.2, fast
    assert dense > 5.0, dense
