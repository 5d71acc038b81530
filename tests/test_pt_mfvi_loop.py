"""The whole MFVI loop of ``ProbabilisticTransformer.mfvi`` against an independent multi-iteration MFVI.

The reference is written from the CRF energy only (spec §2, §6.1-6.2; [S] App. A): Python loops over tokens and
pairs, full N x N ternary factors T = U_{k,c} V_{k,c}^T indexed by a hand-written class table, and every message
taken as an autograd gradient of its own energy term, in float64:

    E_unary = -ku sum_i Q_i . S_{w_i}
    E_tern  = -kt sum_{c,i,j != i} Q_h[c,i,j] Q_i^T T^{k(i,j),c} Q_j      (child slot Q_i, head slot Q_j)
    E_topic = -kb sum_i Q^G_i^T B Q_i

One iteration (async; H and G from the same Q_z, then Z; spec §6.3), with information weights w and entropy weights
(w_Z, w_H, w_G):  Q_z = m * softmax(l);  H logits = w_attn * (-dE_tern/dQ_h) / w_H (masked j = i, pads);
G logits = w_topic_g * (-dE_topic/dQ^G) / w_G;  l <- [w_unary (-dE_unary/dQ_z) + w_child (-dE_tern/d child slot)
+ w_head (-dE_tern/d head slot) + w_topic_z (-dE_topic/dQ_z)] / w_Z, damped: l <- beta_Z l + (1 - beta_Z) [...]
(beta_Z = 0.5 under 'mup', 0 otherwise: PTConfig.z_damping);  l^(0) = S_w (spec §3.2).
muP and mup_paper ([S]): ku, kt, kb = tau, tau N, tau M with tau = N / r; entropy weights tau, 1, tau.
SP (original PT): potentials 1; entropy weights 1, 1/N, 1/N (the code's F * d_model, reused for the topics).
'mup' (center_features): the ternary and binary factors double-centred, T~ = P T P, B~ = P_M B P_N; written here
as the energy of the centred marginals, Q -> Q - 1/N (Q^G -> Q^G - 1/M) inside E_tern and E_topic, which is the
same expected energy for distributions (spec §2 factors, a potential shift).

Mutations of ``mfvi()`` that this file catches (tried by hand, see experiments/coord-check/README.md):
(a) initial Z logits 0 instead of S_w, (b) topic logits from Q_z instead of N * Q_z.
"""

from __future__ import annotations

import pytest
import torch

from ptsweep.config import PTConfig
from ptsweep.models.pt import ProbabilisticTransformer

VOCAB = 11
WEIGHTS = {"w_unary": 0.9, "w_child": 1.3, "w_head": 0.7, "w_topic_z": 1.1, "w_attn": 1.2, "w_topic_g": 0.8}
"""All different from 1 and from each other, so a weight on the wrong message or a missing one shows."""


def brute_class(i: int, j: int) -> int:
    """k(i, j) from spec §4's table (dists 2, 3, 4): d = j - i; 0..3 for d = +1, +2, +3, >=+4; 4..7 for -1..<=-4."""
    d = j - i
    mag = min(abs(d), 4)
    return mag - 1 if d > 0 else 4 + mag - 1


def make(parametrization: str, scaling: str, n_iters: int, width: int = 16, **kw) -> ProbabilisticTransformer:
    cfg = PTConfig(width=width, base_width=8, base_channels=2, base_rank=4, topic_ratio=2, scaling=scaling,
                   parametrization=parametrization, n_iters=n_iters, **WEIGHTS, **kw)
    torch.manual_seed(0)
    model = ProbabilisticTransformer(cfg, vocab_size=VOCAB).to(torch.float64)
    with torch.no_grad():  # random parameters so every message matters (the stable init has U = 0), small enough
        for name, p in model.named_parameters():  # that MFVI does not saturate and forget l^(0) within 3 iterations
            p.normal_(0, 0.5 if name == "unary" else 0.1)
    model.eval()
    return model


def batch(seed: int = 1, bsz: int = 2, length: int = 7):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (bsz, length), generator=g)
    mask = torch.ones(bsz, length, dtype=torch.bool)
    mask[1, 5:] = False  # the second sequence is padded
    return ids, mask


def constants(model):
    """(ku, kt, kb) potentials and (w_Z, w_H, w_G) entropy weights of the CRF ([S] App. A; spec §3.1, §6.1-6.2)."""
    n, r, m = model.cfg.width, model.cfg.rank, model.cfg.topics
    if model.cfg.parametrization in ("mup", "mup_paper"):
        tau = n / r
        return (tau, tau * n, tau * m), (tau, 1.0, tau)
    return (1.0, 1.0, 1.0), (1.0, 1.0 / n, 1.0 / n)


def reference_mfvi(model, ids, mask) -> torch.Tensor:
    """Independent T-iteration MFVI from the energy (module docstring). Returns l^(T) (B, L, N), float64."""
    cfg = model.cfg
    (ku, kt, kb), (wz, wh, wg) = constants(model)
    S, U, V, B = (x.detach() for x in (model.unary, model.U, model.V, model.B))
    bsz, length = ids.shape
    tern = {(k, c): U[k, c] @ V[k, c].T for k in range(cfg.n_classes) for c in range(cfg.channels)}  # (N, N)
    pairs = [(b, i, j) for b in range(bsz) for i in range(length) for j in range(length)
             if i != j and mask[b, i] and mask[b, j]]

    def e_unary(qz):
        return -ku * sum(qz[b, i] @ S[ids[b, i]] for b in range(bsz) for i in range(length) if mask[b, i])

    shift = cfg.parametrization == "mup" and cfg.center_features
    u_n = 1.0 / cfg.width if shift else 0.0    # Q -> Q - u: the double-centred factors
    u_m = 1.0 / cfg.topics if shift else 0.0

    def e_tern(q_child, q_head, qh):
        return -kt * sum(qh[b, c, i, j] * ((q_child[b, i] - u_n) @ tern[(brute_class(i, j), c)] @ (q_head[b, j] - u_n))
                         for b, i, j in pairs for c in range(cfg.channels))

    def e_topic(qz, qg):
        return -kb * sum((qg[b, i] - u_m) @ B @ (qz[b, i] - u_n) for b in range(bsz) for i in range(length)
                         if mask[b, i])

    def softmax(x):
        return torch.softmax(x, -1)

    logits = S[ids] * mask[..., None]  # l^(0) = S_w, pads 0
    valid = torch.zeros(bsz, 1, length, length, dtype=torch.bool)
    for b, i, j in pairs:
        valid[b, 0, i, j] = True
    for _ in range(cfg.n_iters):
        qz = softmax(logits) * mask[..., None]
        # H and G from the same Q_z: their logits are -grad of the energy w.r.t. Q_h / Q^G (linear in them)
        qh0 = torch.zeros(bsz, cfg.channels, length, length, dtype=torch.float64, requires_grad=True)
        qg0 = torch.zeros(bsz, length, cfg.topics, dtype=torch.float64, requires_grad=True)
        (gh,) = torch.autograd.grad(e_tern(qz, qz, qh0), qh0)
        (gg,) = torch.autograd.grad(e_topic(qz, qg0), qg0)
        h_logits = torch.where(valid, cfg.w_attn * -gh / wh, torch.tensor(float("-inf"), dtype=torch.float64))
        qh = torch.nan_to_num(softmax(h_logits))  # rows without a valid head (pads) are unused
        qg = softmax(cfg.w_topic_g * -gg / wg)
        # Z: one energy gradient per message; the ternary one split into the child slot and the head slot
        qz_u, qz_c, qz_h, qz_t = (qz.clone().requires_grad_(True) for _ in range(4))
        (g_u,) = torch.autograd.grad(e_unary(qz_u), qz_u)
        g_c, g_h = torch.autograd.grad(e_tern(qz_c, qz_h, qh), (qz_c, qz_h))
        (g_t,) = torch.autograd.grad(e_topic(qz_t, qg), qz_t)
        new = -(cfg.w_unary * g_u + cfg.w_child * g_c + cfg.w_head * g_h + cfg.w_topic_z * g_t) / wz
        logits = cfg.z_damping * logits + (1 - cfg.z_damping) * new  # damping beta_Z (spec §3.2 step 6; 0.5 under mup)
    return logits


def model_mfvi(model, ids, mask) -> torch.Tensor:
    with torch.no_grad():
        return model.mfvi(ids, mask)


@pytest.mark.parametrize("n_iters", [1, 2, 3])
@pytest.mark.parametrize("scaling", ["channels", "rank"])
@pytest.mark.parametrize("parametrization", ["mup", "mup_uncentred", "mup_damped_z", "mup_paper", "sp"])
def test_whole_mfvi_loop_matches_energy_reference(parametrization, scaling, n_iters):
    variants = {"mup_uncentred": {"center_features": False},
                "mup_damped_z": {"damping_z": 0.25}}  # beta_Z != 1/2: the two weights of the mix differ
    if parametrization in variants:
        model = make("mup", scaling, n_iters, **variants[parametrization])
    else:
        model = make(parametrization, scaling, n_iters)
    ids, mask = batch()
    ours = model_mfvi(model, ids, mask)
    ref = reference_mfvi(model, ids, mask)
    assert ours.dtype == torch.float64  # no float32 round trip inside mfvi()
    err = (ours[mask] - ref[mask]).abs().max().item()
    assert err < 1e-10 * max(1.0, ref[mask].abs().max().item()), err


def test_float64_stays_float64_through_encode_and_head():
    model = make("mup", "channels", 2)
    ids, mask = batch()
    with torch.no_grad():
        trace: list[dict] = []
        h = model.mfvi(ids, mask, trace)
        assert h.dtype == torch.float64
        assert all(v.dtype == torch.float64 for rec in trace for v in rec.values())
        assert model.head(h[mask]).dtype == torch.float64


def test_reference_separates_the_two_known_mutations(monkeypatch):
    """The reference is sensitive to exactly the two mutations that the single-update tests miss:
    (a) l^(0) = 0 instead of S_w, (b) topic logits from Q_z instead of N * Q_z (muP). Each is applied to the model
    by monkeypatching and must break the agreement by far more than the tolerance."""
    ids, mask = batch()
    model = make("mup", "channels", 2)
    ref = reference_mfvi(model, ids, mask)

    # (a) initial Z logits 0 instead of S_w
    with monkeypatch.context() as mp:
        mp.setattr(ProbabilisticTransformer, "initial_logits", lambda self, ids_, m: torch.zeros_like(
            self.unary[ids_] * m))
        bad = model_mfvi(model, ids, mask)
    assert (bad[mask] - ref[mask]).abs().max() > 1e-3

    # (b) topic logits from Q_z instead of N * Q_z
    real_topic = ProbabilisticTransformer.topic_logits
    with monkeypatch.context() as mp:
        mp.setattr(ProbabilisticTransformer, "topic_logits", lambda self, p_hat: real_topic(self, p_hat / self.const.a_z))
        bad = model_mfvi(model, ids, mask)
    assert (bad[mask] - ref[mask]).abs().max() > 1e-3
