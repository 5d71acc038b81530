"""Row-RMS attention scores (``{name: attn_row_rms}``; hook: the score transform): the attention logits become

    A[c,i,j] = w_attn * S[c,i,j] / sqrt(mean_{valid j} S[c,i,j]^2 + eps)      (in place of w_attn * s_H * S)

so every row's logits have RMS w_attn whatever the scale of q and v: a bound on attention logits that would
otherwise sharpen without limit. The dense and blockwise paths normalise whole rows (the same numbers).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ptsweep.variants.base import Variant

SCORE_NORM_EPS = 1e-6
"""eps of the normalisation: keeps a row of all-zero scores (Q_z uniform at init, a sequence of one real token) at 0
instead of 0/0."""


def row_rms_normalize(scores: torch.Tensor, valid: torch.Tensor, eps: float = SCORE_NORM_EPS) -> torch.Tensor:
    """S / sqrt(mean_j S^2 + eps), the mean over the valid heads j of each row (child i, channel c) only.

    scores (B, C, b, L); valid (B, 1, b, L) bool, True where (i, j) is a pair of real tokens with j != i. Rows
    without a valid head divide by sqrt(eps) (they are masked afterwards anyway)."""
    keep = valid.to(scores.dtype)
    count = keep.sum(-1, keepdim=True).clamp_min(1.0)                          # (B, 1, b, 1)
    mean_sq = (scores.pow(2) * keep).sum(-1, keepdim=True) / count             # (B, C, b, 1)
    return scores * torch.rsqrt(mean_sq + eps)


@dataclass(frozen=True)
class AttnRowRms(Variant):
    name = "attn_row_rms"

    def attach(self, model) -> None:
        model.score_transform = row_rms_normalize
