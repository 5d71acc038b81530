"""The per-parametrization constants of PT's unified MFVI graph (spec §6.3 table): feature multipliers a_Z, a_G,
logit scales s_H, s_G, and the muP variants' init and LR constants ([S] Table 2 exponents; 'mup_sp' anchored at SP).
``models.pt.ProbabilisticTransformer`` reads them in its forward and declares the init and LR constants to
``parametrization``."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ptsweep.config import PTConfig


@dataclass
class MFVIConstants:
    """Per-parametrization constants of the unified graph (spec §6.3 table) and the muP init multipliers: under
    'mup' S ~ N(0, init_s^2), U ~ N(0, init_u^2/N), V ~ N(0, init_v^2/N), B ~ N(0, init_b^2/N) ([S] Table 2's
    exponents of N); 'mup_paper' has them all 1; SP ignores them (original PT init)."""

    a_z: float  # Q_z -> feature multiplier
    a_g: float  # Q_g -> feature multiplier
    s_h: float  # attention-logit scale
    s_g: float  # topic-logit scale
    init_s: float = 1.0  # muP init-std multiplier of S
    init_u: float = 1.0  # ... of U
    init_v: float = 1.0  # ... of V
    init_b: float = 1.0  # ... of B
    init_out: float = 1.0  # ... of W_out
    center: float = 0.0  # features a_Z Q_z - center, a_G Q_g - center (1 under 'mup' with center_features)
    lr_s: float = 1.0  # muP LR constants of S, (U, V), B, W_out (eta x role multiplier x constant)
    lr_uv: float = 1.0
    lr_b: float = 1.0
    lr_out: float = 1.0

    @staticmethod
    def of(cfg: PTConfig, vocab_size: int) -> MFVIConstants:
        n, r, m = cfg.width, cfg.rank, cfg.topics
        if cfg.parametrization == "mup_sp":
            return MFVIConstants.sp_anchored(cfg, vocab_size)
        if cfg.parametrization in ("mup", "mup_paper"):
            # tau = N/r cancels in the Z and G updates, leaving N*Q_z, M*Q_g as features; H logits tau*N*<.> / 1
            # = (N^2/r) P^T T P = (1/r) <U^T N P_i, V^T N P_j> ([S] App. A.3); G logits M/N * B(N Q_z) (spec §6.2).
            const = MFVIConstants(a_z=float(n), a_g=float(m), s_h=1.0 / r, s_g=m / n)
            if cfg.parametrization == "mup":  # the width-stable base-shape constants
                const.init_s, const.init_u, const.init_v, const.init_b = (cfg.init_unary, cfg.init_u, cfg.init_v,
                                                                          cfg.init_topic)
                const.center = 1.0 if cfg.center_features else 0.0
                const.lr_s, const.lr_uv, const.lr_b, const.lr_out = (cfg.lr_unary, cfg.lr_ternary, cfg.lr_topic,
                                                                     cfg.lr_output)
            return const
        # original PT: lambda_Z = 1, lambda_H = 1/N (the code's F * d_model), topics reuse N (spec §3.3).
        return MFVIConstants(a_z=1.0, a_g=1.0, s_h=float(n), s_g=float(n))

    @staticmethod
    def sp_anchored(cfg: PTConfig, vocab_size: int) -> MFVIConstants:
        """'mup_sp': the muP exponents of N ([S] Table 2) with the constants that make the model at N0 =
        ``base_width`` equal to SP at N0 (U, V = U_SP, V_SP / sqrt(N0), B = B_SP / M0; AdamW's LR scaled alike; the
        attention scale s_H = r_A / r): docs/mup.md."""
        n, r, m = cfg.width, cfg.rank, cfg.topics
        n0, r0, m0 = cfg.base_width, cfg.base_rank, cfg.topic_ratio * cfg.base_width
        return MFVIConstants(
            a_z=float(n), a_g=float(m), s_h=cfg.attn_base_rank / r, s_g=float(m0),  # [S]'s M/N: topic_ratio
            init_s=math.sqrt(2.0 / (vocab_size + n0)),      # SP's xavier std of S (V x N0)
            init_u=1.0 / math.sqrt(r0), init_v=1.0 / math.sqrt(r0),  # N(0, 1/r0) / sqrt(N0) at N0
            init_b=1.0 / m0,                                 # N(0, 1/N0) / M0 at N0
            init_out=math.sqrt(n0 / 3.0),                    # SP's U(+-1/sqrt(N0)) std, over muP's 1/N0
            lr_s=1.0, lr_uv=math.sqrt(n0), lr_b=n0 / m0, lr_out=float(n0))  # c * N0 under the muP eta / N
