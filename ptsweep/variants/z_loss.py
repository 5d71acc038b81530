"""z-loss on the MFVI's Z logits (``{name: z_loss, coef, iters}``; hook: an auxiliary loss): PaLM's z-loss on the
logits l^(t) of Q_z instead of the output logits,

    coef * mean_i lse(l_i^(T))^2          (iters 'final': the logits the head reads; 'all': mean over t = 1..T)

over real tokens i. A collapse of Q_z to one-hot grows the logits' scale; lse >= max_n l_n and >= mean_n l_n +
log N, so the term pins the logits' level near 0, which bounds how far the largest can run (not their spread).
Logged as ``aux/z_loss`` (the weighted term).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ptsweep.metrics import masked_token_mean
from ptsweep.variants.base import Variant


def z_loss_value(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """mean over real tokens of logsumexp_labels(l)^2 (unweighted), in float32 or wider."""
    lse = logits.float().logsumexp(-1) if logits.dtype in (torch.float16, torch.bfloat16) else logits.logsumexp(-1)
    return masked_token_mean(lse.pow(2), mask)


@dataclass(frozen=True)
class ZLoss(Variant):
    name = "z_loss"
    coef: float
    """Coefficient of the term (> 0)."""
    iters: str = "final"
    """Which Z logits: 'final' (l^(T)) or 'all' (mean over t = 1..T)."""

    def check(self, cfg) -> None:
        self.require(self.coef > 0 and self.coef < float("inf"), f"coef must be > 0, got {self.coef}")
        self.require(self.iters in ("final", "all"), f"iters must be one of ['final', 'all'], got {self.iters!r}")

    def attach(self, model) -> None:
        model.aux_losses[self.name] = self.loss

    def loss(self, iterates: list, mask: torch.Tensor) -> torch.Tensor:
        """coef * mean of :func:`z_loss_value` over the chosen iterations' logits (``iterates``: (Q_z, l) per t)."""
        chosen = iterates if self.iters == "all" else iterates[-1:]
        return self.coef * torch.stack([z_loss_value(logits, mask) for _, logits in chosen]).mean()
