"""PT's basin levers: optional changes to the MFVI and its training loss, each a ``model.*`` key that is off by
default (the model is then the plain one, bit for bit). Candidates against the narrow high-LR side of the default
PT's basin, where Q_z collapses to one-hot, and against the drift of w_unary's optimum with width; each is measured
in experiments/lr-transfer/levers.md or experiments/weight-drift, and none is the default.

With l^(t) the Z logits after iteration t, Q_z^(t) = softmax(l^(t-1)) the distribution iteration t starts from
(real tokens i only, T = ``n_iters``, N0 = ``base_width``):

    z-loss           z_loss * mean_i lse(l_i^(T))^2            ('final'; 'all': mean over t = 1..T of the same)
    entropy floor    w_H * mean_t relu(floor * log N - Hbar^(t))^2,   Hbar^(t) = mean_i H(Q_z,i^(t))
    score norm       A[c,i,j] = w_attn * S[c,i,j] / sqrt(mean_{valid j} S[c,i,j]^2 + eps)   (replaces w_attn s_H S)
    Z scale          l^(t) = (1 - beta_Z) sigma_Z sum_k w_k m_k + beta_Z l^(t-1),   sigma_Z = sqrt(log N / log N0)
    topic scale      E = w_topic_g s_G sqrt(N0 / N) B P^
    S's LR rule      peak LR of S = min(eta s_S sqrt(N / N0), cap)    (s_S = ``unary_lr_scale``)

The first two are auxiliary loss terms (``LossTerms``), added to the MLM loss in training
(``models.training_objective``); the others change the forward. Spec references: ``pt-mup-spec.md`` §6.3.
"""

from __future__ import annotations

import math

import torch

SCORE_NORM_EPS = 1e-6
"""eps in the row-RMS normalisation of the attention scores: keeps a row of all-zero scores (Q_z uniform at init,
a sequence of one real token) at 0 instead of 0/0."""


def z_scale(cfg) -> float:
    """sigma_Z(N) = sqrt(log N / log N0) under ``z_scale_rule='sqrt_log'`` (1 at N = N0), else 1."""
    if cfg.z_scale_rule == "sqrt_log":
        return math.sqrt(math.log(cfg.width) / math.log(cfg.base_width))
    return 1.0


def topic_scale(cfg) -> float:
    """sqrt(N0 / N) under ``topic_scale_rule='inv_sqrt'`` (1 at N = N0), else 1."""
    return math.sqrt(cfg.base_width / cfg.width) if cfg.topic_scale_rule == "inv_sqrt" else 1.0


def unary_lr(cfg) -> tuple[float, float]:
    """(factor on S's muP LR, cap on S's peak LR): (s_S sqrt(N / N0), ``unary_lr_cap``) under
    ``unary_lr_rule='sqrt_capped'``, (s_S, inf) under 'const' (s_S = ``unary_lr_scale``)."""
    if cfg.unary_lr_rule == "sqrt_capped":
        return cfg.unary_lr_scale * math.sqrt(cfg.width / cfg.base_width), cfg.unary_lr_cap
    return cfg.unary_lr_scale, math.inf


def row_rms_normalize(scores: torch.Tensor, valid: torch.Tensor, eps: float = SCORE_NORM_EPS) -> torch.Tensor:
    """S / sqrt(mean_j S^2 + eps), the mean over the valid heads j of each row (child i, channel c) only.

    scores (B, C, b, L); valid (B, 1, b, L) bool, True where (i, j) is a pair of real tokens with j != i. Rows
    without a valid head divide by sqrt(eps) (they are masked afterwards anyway). Every path gets whole rows (the
    blockwise path's blocks are complete rows), so dense and blockwise normalise the same numbers."""
    keep = valid.to(scores.dtype)
    count = keep.sum(-1, keepdim=True).clamp_min(1.0)                          # (B, 1, b, 1)
    mean_sq = (scores.pow(2) * keep).sum(-1, keepdim=True) / count             # (B, C, b, 1)
    return scores * torch.rsqrt(mean_sq + eps)


def masked_token_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x (B, L) over the real tokens (mask (B, L) bool); 0 when there are none."""
    keep = mask.to(x.dtype)
    return (x * keep).sum() / keep.sum().clamp_min(1.0)


def z_loss_value(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """mean over real tokens of logsumexp_labels(l)^2 (unweighted), in float32 or wider."""
    lse = logits.float().logsumexp(-1) if logits.dtype in (torch.float16, torch.bfloat16) else logits.logsumexp(-1)
    return masked_token_mean(lse.pow(2), mask)


def token_entropy(q: torch.Tensor) -> torch.Tensor:
    """H(q) = -sum q log q over the last axis (nats; 0 log 0 = 0), in float32 or wider. The log reads q clamped at
    the dtype's smallest normal number: the same value, and a finite gradient where q = 0 (pads, underflowed
    labels), where xlogy's log q + 1 = -inf would turn the zero upstream gradient into NaN."""
    q = q.float() if q.dtype in (torch.float16, torch.bfloat16) else q
    return -(q * q.clamp_min(torch.finfo(q.dtype).tiny).log()).sum(-1)


def mean_entropy(q_z: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Hbar = mean over real tokens of H(Q_z,i) (:func:`token_entropy`)."""
    return masked_token_mean(token_entropy(q_z), mask)


class LossTerms:
    """The auxiliary loss terms of one forward, fed one MFVI iteration at a time (``add``); ``finish`` writes the
    weighted terms into a dict, one scalar tensor each: 'z_loss' and 'qz_entropy_floor' (names of their keys)."""

    def __init__(self, cfg, mask: torch.Tensor):
        self.cfg, self.mask = cfg, mask
        self.floor = cfg.qz_entropy_floor * math.log(cfg.width)                # nats
        self.z, self.entropy, self.iters = [], [], 0

    def add(self, q_z: torch.Tensor, logits: torch.Tensor, last: bool) -> None:
        """One iteration: the Q_z it started from and the Z logits l^(t) it produced (``last``: t = T)."""
        cfg = self.cfg
        self.iters += 1
        if cfg.z_loss > 0 and (last or cfg.z_loss_iters == "all"):
            self.z.append(z_loss_value(logits, self.mask))
        if cfg.qz_entropy_floor > 0:
            self.entropy.append(torch.relu(self.floor - mean_entropy(q_z, self.mask)).pow(2))

    def finish(self, out: dict) -> None:
        """out['z_loss'] = z_loss * mean of the collected z-loss values; out['qz_entropy_floor'] = w_H * mean of
        the hinges (a term is left out when its lever is off or no iteration ran)."""
        if self.z:
            out["z_loss"] = self.cfg.z_loss * torch.stack(self.z).mean()
        if self.entropy:
            out["qz_entropy_floor"] = self.cfg.qz_entropy_weight * torch.stack(self.entropy).mean()


def loss_term_names(cfg) -> tuple[str, ...]:
    """The auxiliary terms a training forward of ``cfg`` adds (none without MFVI iterations: T = 0)."""
    if cfg.n_iters == 0:
        return ()
    return tuple(name for name, on in (("z_loss", cfg.z_loss > 0), ("qz_entropy_floor", cfg.qz_entropy_floor > 0))
                 if on)
