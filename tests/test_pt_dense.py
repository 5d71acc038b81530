"""The dense PT attention path (``pt_dense``: skewed bands, unbind/stack layout) equals a brute-force computation with
one-hot class masks, in float64: scores, message contexts, their gradients, and the model's gradients end to end."""

import pytest
import torch

from ptsweep.config import PTConfig
from ptsweep.models import pt_dense
from ptsweep.models.pt import ProbabilisticTransformer, class_index, distance_classes

DISTS = [(2, 3, 4), (2, 5), (), (6,)]


def _layout(dists, length):
    return pt_dense.dense_layout(tuple(distance_classes(dists)), length, torch.device("cpu"))


def brute_scores(q, v, dists):
    """S[b,c,i,j] = sum_k 1[k(i,j)=k] <q_i^k, v_j^k>: every class evaluated densely, then selected."""
    onehot = _onehot(q.shape[-2], dists, q.dtype)
    return torch.einsum("bkcir,bkcjr,kij->bcij", q, v, onehot)


def brute_contexts(q_h, q, v, dists):
    """ctx_child[b,i,k,c] = sum_j R[c,i,j] 1[k(i,j)=k] v_j^k; ctx_head[b,i,k,c] = sum_j R[c,j,i] 1[k(j,i)=k] q_j^k."""
    bsz, n_cls, chans, length, rank = q.shape
    onehot = _onehot(length, dists, q.dtype)
    child = torch.einsum("bcij,kij,bkcjr->bikcr", q_h, onehot, v)
    head = torch.einsum("bcji,kji,bkcjr->bikcr", q_h, onehot, q)
    return child.reshape(bsz * length, -1), head.reshape(bsz * length, -1)


def _onehot(length, dists, dtype):
    kappa = class_index(length, dists)
    return torch.stack([kappa == k for k in range(2 * (len(dists) + 1))]).to(dtype)  # (K, L, L)


@pytest.mark.parametrize("length", [1, 2, 5, 17])
@pytest.mark.parametrize("w", [0, 1, 3, 6])
def test_skew_and_unskew_place_the_band_on_its_diagonals(length, w):
    band = torch.randn(2, length, 2 * w + 1, dtype=torch.float64)
    dense = pt_dense.skew(band)
    expect = torch.zeros(2, length, length, dtype=torch.float64)
    for i in range(length):
        for j in range(length):
            if abs(j - i) <= w:
                expect[:, i, j] = band[:, i, j - i + w]
    assert torch.equal(dense, expect)
    x = torch.randn(2, length, length, dtype=torch.float64)
    back = pt_dense.unskew(x, w)
    for i in range(length):
        for t in range(2 * w + 1):
            j = i + t - w
            assert torch.equal(back[:, i, t], x[:, i, j] if 0 <= j < length else torch.zeros(2, dtype=x.dtype))


@pytest.mark.parametrize("dists", DISTS)
@pytest.mark.parametrize("length", [3, 11])
def test_scores_contexts_and_gradients_match_brute_force(dists, length):
    torch.manual_seed(0)
    k, c, r, bsz = 2 * (len(dists) + 1), 2, 3, 2
    q, v = (torch.randn(bsz, k, c, length, r, dtype=torch.float64, requires_grad=True) for _ in range(2))
    q_h = torch.softmax(torch.randn(bsz, c, length, length, dtype=torch.float64), -1).requires_grad_()
    layout = _layout(dists, length)
    got = (pt_dense.pair_scores(q, v, layout), *pt_dense.contexts(q_h, q, v, layout))
    ref = (brute_scores(q, v, dists), *brute_contexts(q_h, q, v, dists))
    probes = [torch.randn_like(t) for t in ref]
    grads = []
    for outs in (got, ref):
        assert all(o.shape == p.shape for o, p in zip(outs, probes))
        grads.append(torch.autograd.grad(sum((o * p).sum() for o, p in zip(outs, probes)), (q, v, q_h)))
    for a, b in zip((*got, *grads[0]), (*ref, *grads[1])):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-12), float((a - b).abs().max())


@pytest.mark.parametrize("dists", [(2, 3, 4), (2, 5)])
@pytest.mark.parametrize("parametrization", ["mup", "sp"])
def test_model_loss_and_every_gradient_match_brute_force_attention(monkeypatch, dists, parametrization):
    """End to end (MFVI + head, pads in the batch): the model with ``pt_dense`` vs the same model with the brute-force
    scores and contexts patched in; float64, every parameter gradient within 1e-10 relative."""
    cfg = PTConfig(width=16, base_width=16, base_channels=2, base_rank=3, n_iters=3, dists=dists,
                   parametrization=parametrization, attention_impl="dense")
    torch.set_default_dtype(torch.float64)
    try:
        torch.manual_seed(0)
        model = ProbabilisticTransformer(cfg, 30)
        ids = torch.randint(0, 30, (3, 9))
        mask = torch.ones(3, 9, dtype=torch.bool)
        mask[1, 5:] = False

        def loss_and_grads():
            model.zero_grad(set_to_none=True)
            h = model.encode(ids, mask)
            loss = torch.nn.functional.cross_entropy(model.head(h[mask]), ids[mask])
            loss.backward()
            return float(loss.detach()), {n: p.grad.clone() for n, p in model.named_parameters()}

        loss, grads = loss_and_grads()
        with monkeypatch.context() as mp:
            mp.setattr(pt_dense, "pair_scores", lambda q, v, lay: brute_scores(q, v, dists))
            mp.setattr(pt_dense, "contexts", lambda q_h, q, v, lay: brute_contexts(q_h, q, v, dists))
            ref_loss, ref_grads = loss_and_grads()
    finally:
        torch.set_default_dtype(torch.float32)
    assert abs(loss - ref_loss) <= 1e-12 * abs(ref_loss)
    for name, g in ref_grads.items():
        assert float((grads[name] - g).abs().max()) <= 1e-10 * float(g.abs().max()), name
