"""PT mean-field updates against an independent computation: the CRF energy written out term by term.

The muP CRF ([S] App. A) has potentials exp(tau S), exp(tau N T), exp(tau M B) with tau = N/r and entropy weights
tau for Z and G, 1 for H. Each mean-field update is Q ∝ exp(-(1/entropy weight) dE/dQ), computed here with autograd
on a brute-force energy (Python loops over channels and pairs, full N x N factors T = U V^T indexed by an explicitly
built class table). The original PT (SP) is the same with no tau/N/M in the potentials and entropy weights 1 (Z) and
1/N (H and G; the code's F * d_model).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ptsweep.config import PTConfig
from ptsweep.models.pt import ProbabilisticTransformer, class_index

DISTS = (2, 3, 4)


def mirror_class(k: int, dists: tuple[int, ...]) -> int:
    """The class of the opposite direction with the same distance band."""
    half = len(dists) + 1
    return (k + half) % (2 * half)


@pytest.fixture(autouse=True)
def float64_default():
    """Brute-force comparisons in float64; restored afterwards so no other test module inherits it."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def brute_class(i: int, j: int) -> int:
    """k(i, j) written from spec §4's table: d = j - i; 0..3 for d = +1, +2, +3, >=+4; 4..7 for -1, -2, -3, <=-4."""
    d = j - i
    mag = min(abs(d), 4)
    return mag - 1 if d > 0 else 4 + mag - 1


def make(parametrization: str, width=8, scaling="channels", **kw) -> ProbabilisticTransformer:
    kw.setdefault("n_iters", 2)
    cfg = PTConfig(width=width, base_width=8, base_channels=2, base_rank=4, topic_ratio=2,
                   scaling=scaling, parametrization=parametrization, **kw)
    torch.manual_seed(0)
    model = ProbabilisticTransformer(cfg, vocab_size=11).double()
    with torch.no_grad():  # random, O(1)-ish parameters so every term matters
        for p in model.parameters():
            p.normal_(0, 0.5)
    return model


def random_state(model, bsz=2, length=7, seed=1):
    g = torch.Generator().manual_seed(seed)
    n, c, m = model.cfg.width, model.cfg.channels, model.cfg.topics
    ids = torch.randint(0, model.vocab_size, (bsz, length), generator=g)
    mask = torch.ones(bsz, length, dtype=torch.bool)
    mask[1, 5:] = False  # second sequence padded
    qz = torch.softmax(torch.randn(bsz, length, n, generator=g), -1) * mask[..., None]
    qh = torch.softmax(torch.randn(bsz, c, length, length, generator=g), -1)
    qg = torch.softmax(torch.randn(bsz, length, m, generator=g), -1)
    return ids, mask, qz, qh, qg


def energy(model, ids, mask, qz, qh, qg) -> torch.Tensor:
    """Expected energy E of the mean-field Q (spec §2 / [S] App. A.2), pads excluded, loops over pairs."""
    cfg = model.cfg
    n, r, m = cfg.width, cfg.rank, cfg.topics
    if cfg.parametrization in ("mup", "mup_paper"):
        tau = n / r
        ku, kt, kb = tau, tau * n, tau * m
    else:
        ku = kt = kb = 1.0
    # 'mup' centres the features: the ternary and binary factors are double-centred (T~ = P T P), i.e. the energy
    # of Q - 1/N (and Q^G - 1/M) in those two terms
    shift = cfg.parametrization == "mup" and cfg.center_features
    cz = qz - (1.0 / n if shift else 0.0)
    cg = qg - (1.0 / m if shift else 0.0)
    e = torch.zeros((), dtype=qz.dtype)
    bsz, length = ids.shape
    for b in range(bsz):
        for i in range(length):
            if not mask[b, i]:
                continue
            e = e - ku * (qz[b, i] @ model.unary[ids[b, i]])
            e = e - kb * (cg[b, i] @ model.B @ cz[b, i])
            for j in range(length):
                if j == i or not mask[b, j]:
                    continue
                k = brute_class(i, j)
                for c in range(cfg.channels):
                    t = model.U[k, c] @ model.V[k, c].T  # (N, N): rows child label a, columns head label b
                    e = e - kt * qh[b, c, i, j] * (cz[b, i] @ t @ cz[b, j])
    return e


def entropy_weights(model):
    """(Z, H, G) entropy weights: muP tau, 1, tau ([S] eqs. for F(Q_i), F(Q_ic); spec §6.2); SP 1, 1/N, 1/N."""
    n, r = model.cfg.width, model.cfg.rank
    return (n / r, 1.0, n / r) if model.cfg.parametrization in ("mup", "mup_paper") else (1.0, 1.0 / n, 1.0 / n)


def energy_updates(model, ids, mask, qz, qh, qg):
    """Mean-field updates as softmax(-grad E / entropy weight) for Z, H (over valid heads) and G."""
    qz, qh, qg = (x.clone().requires_grad_(True) for x in (qz, qh, qg))
    gz, gh, gg = torch.autograd.grad(energy(model, ids, mask, qz, qh, qg), (qz, qh, qg))
    wz, wh, wg = entropy_weights(model)
    length = ids.shape[1]
    valid = mask[:, None, :, None] & mask[:, None, None, :] & ~torch.eye(length, dtype=torch.bool)
    h_logits = torch.where(valid, -gh / wh, torch.tensor(float("-inf")))
    return torch.softmax(-gz / wz, -1), torch.softmax(h_logits, -1), torch.softmax(-gg / wg, -1)


def model_updates(model, ids, mask, qz, qh, qg):
    """The model's own single updates of Z (from Q_h, Q_g), H and G (from Q_z)."""
    p_hat = model.features(qz)
    q, v = model.projections(p_hat)
    new_h = torch.softmax(model.mask_logits(model.attention_logits(q, v), mask), -1)
    new_g = torch.softmax(model.topic_logits(p_hat), -1)
    msgs = model.z_messages(ids, mask, q, v, qh, model.topic_features(qg))
    new_z = torch.softmax(model.combine_z(msgs), -1)
    return new_z, new_h, new_g


@pytest.mark.parametrize("parametrization", ["mup", "mup_paper", "sp"])
@pytest.mark.parametrize("scaling", ["channels", "rank"])
def test_mean_field_updates_match_energy_gradients(parametrization, scaling):
    model = make(parametrization, width=16, scaling=scaling)
    ids, mask, qz, qh, qg = random_state(model)
    ez, eh, eg = energy_updates(model, ids, mask, qz, qh, qg)
    with torch.no_grad():
        mz, mh, mg = model_updates(model, ids, mask, qz, qh, qg)
    real = mask  # compare on real tokens; pad rows are masked out downstream
    assert torch.allclose(mz[real], ez[real], atol=1e-5), (mz[real] - ez[real]).abs().max()
    assert torch.allclose(mg[real], eg[real], atol=1e-5), (mg[real] - eg[real]).abs().max()
    rows = real[:, None, :].expand_as(mh[..., 0])
    assert torch.allclose(mh[rows], eh[rows], atol=1e-5), (mh[rows] - eh[rows]).abs().max()


def test_class_table_matches_spec():
    kappa = class_index(9, DISTS)
    for i in range(9):
        for j in range(9):
            assert kappa[i, j] == (-1 if i == j else brute_class(i, j))


def free_energy(model, ids, mask, qz, qh, qg) -> float:
    """F = E - w_Z sum H(Q_z) - w_H sum H(Q_h) - w_G sum H(Q_g) over real tokens / valid heads."""
    wz, wh, wg = entropy_weights(model)
    length = ids.shape[1]
    valid = mask[:, None, :, None] & mask[:, None, None, :] & ~torch.eye(length, dtype=torch.bool)

    def ent(p, keep):
        return -(torch.where(keep, p * torch.log(p.clamp_min(1e-300)), 0.0)).sum()

    rows = mask[..., None]
    return float(energy(model, ids, mask, qz, qh, qg) - wz * ent(qz, rows) - wh * ent(qh, valid)
                 - wg * ent(qg, rows))


@pytest.mark.parametrize("parametrization", ["mup", "mup_paper", "sp"])
def test_coordinate_updates_never_increase_free_energy(parametrization):
    model = make(parametrization, width=8)
    for seed in range(4):
        ids, mask, qz, qh, qg = random_state(model, seed=seed)
        length = ids.shape[1]
        valid = mask[:, None, :, None] & mask[:, None, None, :] & ~torch.eye(length, dtype=torch.bool)
        qh = torch.where(valid, qh, 0.0)
        qh = qh / qh.sum(-1, keepdim=True).clamp_min(1e-12)
        with torch.no_grad():
            f0 = free_energy(model, ids, mask, qz, qh, qg)
            # H alone: all (i, c) at once is exact block minimisation (E is linear in each Q_ic, no H-H terms)
            _, new_h, new_g = model_updates(model, ids, mask, qz, qh, qg)
            f_h = free_energy(model, ids, mask, qz, torch.where(valid, new_h, 0.0), qg)
            assert f_h <= f0 + 1e-9
            f_g = free_energy(model, ids, mask, qz, qh, new_g)
            assert f_g <= f0 + 1e-9
            # Z alone, one position at a time (Z_i and Z_j interact, so only a single-site update is a descent step)
            f = f0
            for b in range(ids.shape[0]):
                for i in range(length):
                    if not mask[b, i]:
                        continue
                    new_z, _, _ = model_updates(model, ids, mask, qz, qh, qg)
                    qz = qz.clone()
                    qz[b, i] = new_z[b, i]
                    f_new = free_energy(model, ids, mask, qz, qh, qg)
                    assert f_new <= f + 1e-9
                    f = f_new
            assert f < f0 - 1e-6  # and it actually moved


def run_encoder(model, ids, mask):
    model.eval()
    with torch.no_grad():
        return model.encode(ids, mask)


@pytest.mark.parametrize("parametrization", ["mup", "sp"])
def test_padded_batch_equals_each_sequence_alone(parametrization):
    model = make(parametrization, width=8, n_iters=3)
    g = torch.Generator().manual_seed(3)
    a = torch.randint(0, 11, (6,), generator=g)
    b = torch.randint(0, 11, (9,), generator=g)
    ids = torch.zeros(2, 9, dtype=torch.long)
    mask = torch.zeros(2, 9, dtype=torch.bool)
    ids[0, :6], mask[0, :6] = a, True
    ids[1], mask[1] = b, True
    out = run_encoder(model, ids, mask)
    alone_a = run_encoder(model, a[None], torch.ones(1, 6, dtype=torch.bool))
    alone_b = run_encoder(model, b[None], torch.ones(1, 9, dtype=torch.bool))
    assert torch.allclose(out[0, :6], alone_a[0], atol=1e-10)
    assert torch.allclose(out[1], alone_b[0], atol=1e-10)


def test_no_token_attends_to_itself_or_to_pads():
    model = make("mup", width=8)
    ids, mask, *_ = random_state(model)
    trace = model.inspect(ids, mask)
    for step in trace:
        q_h = step["q_h"]  # (B, C, L, L)
        diag = torch.diagonal(q_h, dim1=-2, dim2=-1)  # (B, C, L)
        assert diag[mask[:, None, :].expand_as(diag)].abs().max() == 0.0  # pad rows are unused garbage (spec §3.2)
        assert q_h[1, :, :5, 5:].abs().max() == 0.0  # real children never pick a pad head
        assert torch.allclose(q_h[1, :, :5].sum(-1), torch.ones(1), atol=1e-12)


def test_shift_inside_padding_leaves_outputs_unchanged():
    model = make("mup", width=8, n_iters=3)
    seq = torch.randint(0, 11, (5,), generator=torch.Generator().manual_seed(4))
    ids = torch.zeros(2, 9, dtype=torch.long)
    mask = torch.zeros(2, 9, dtype=torch.bool)
    ids[0, :5], mask[0, :5] = seq, True
    ids[1, 3:8], mask[1, 3:8] = seq, True
    out = run_encoder(model, ids, mask)
    assert torch.allclose(out[0, :5], out[1, 3:8], atol=1e-10)


@pytest.mark.parametrize("parametrization", ["mup", "sp"])
def test_reversal_with_mirrored_classes_reverses_outputs(parametrization):
    model = make(parametrization, width=8, n_iters=3)
    ids = torch.randint(0, 11, (1, 9), generator=torch.Generator().manual_seed(5))
    mask = torch.ones(1, 9, dtype=torch.bool)
    mirrored = make(parametrization, width=8, n_iters=3)
    perm = [mirror_class(k, DISTS) for k in range(model.cfg.n_classes)]
    with torch.no_grad():
        mirrored.load_state_dict(model.state_dict())
        mirrored.U.copy_(model.U[perm])
        mirrored.V.copy_(model.V[perm])
    out = run_encoder(model, ids, mask)
    out_rev = run_encoder(mirrored, ids.flip(1), mask)
    assert torch.allclose(out.flip(1), out_rev, atol=1e-10)
    # and without mirroring the classes, order matters (PT is not a bag of words)
    assert not torch.allclose(out.flip(1), run_encoder(model, ids.flip(1), mask), atol=1e-3)


def test_damping_and_stepsize_knobs_change_the_fixed_schedule():
    base = make("mup", width=8, n_iters=3)
    ids, mask, *_ = random_state(base)
    ref = run_encoder(base, ids, mask)
    for field, value in [("damping_h", 0.5), ("damping_z", 0.25), ("damping_z", 0.0), ("stepsize_h", 0.5),
                         ("stepsize_z", 0.5)]:
        other = make("mup", width=8, n_iters=3, **{field: value})
        other.load_state_dict(base.state_dict())
        assert not torch.allclose(run_encoder(other, ids, mask), ref), field


@pytest.mark.parametrize("parametrization, beta", [("mup", 0.5), ("mup_paper", 0.0), ("sp", 0.0)])
def test_unset_z_damping_is_the_parametrizations_default(parametrization, beta):
    """damping_z = None means 0.5 under muP (experiments/context) and none for the original PT and [S] literally:
    the unset model computes exactly what the explicit beta computes."""
    base = make(parametrization, width=8, n_iters=3)
    assert base.cfg.damping_z is None and base.cfg.z_damping == beta
    explicit = make(parametrization, width=8, n_iters=3, damping_z=beta)
    explicit.load_state_dict(base.state_dict())
    ids, mask, *_ = random_state(base)
    assert torch.equal(run_encoder(explicit, ids, mask), run_encoder(base, ids, mask))


def test_information_weights_scale_their_messages():
    base = make("mup", width=8, n_iters=1)
    ids, mask, *_ = random_state(base)
    trace = base.inspect(ids, mask)[0]
    for w, name in [("w_unary", "unary"), ("w_child", "child"), ("w_head", "head"), ("w_topic_z", "topic")]:
        other = make("mup", width=8, n_iters=1, **{w: 2.0})
        other.load_state_dict(base.state_dict())
        t2 = other.inspect(ids, mask)[0]
        delta = t2["z_logits"] - trace["z_logits"]       # damped: l = beta l_prev + (1 - beta) sum of messages
        assert torch.allclose(delta, (1 - base.cfg.z_damping) * trace[f"msg_{name}"], atol=1e-9), w
    other = make("mup", width=8, n_iters=1, w_attn=2.0, w_topic_g=3.0)
    other.load_state_dict(base.state_dict())
    t2 = other.inspect(ids, mask)[0]
    assert torch.allclose(t2["attn_logits"], 2 * trace["attn_logits"])
    assert torch.allclose(t2["topic_logits"], 3 * trace["topic_logits"])


def test_dropout_only_in_training_and_deterministic_in_eval():
    model = make("mup", width=8, dropout=0.3)
    ids, mask, *_ = random_state(model)
    model.train()
    a, b = model.encode(ids, mask), model.encode(ids, mask)
    assert not torch.allclose(a, b)
    assert torch.allclose(run_encoder(model, ids, mask), run_encoder(model, ids, mask))


def test_length_one_sequence_is_finite():
    model = make("mup", width=8)
    out = run_encoder(model, torch.tensor([[3]]), torch.ones(1, 1, dtype=torch.bool))
    assert torch.isfinite(out).all()
    assert dataclasses.asdict(model.cfg)["n_iters"] == 2
