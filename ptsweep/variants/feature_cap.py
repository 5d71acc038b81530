"""A bound on the Z features (``{name: feature_cap, cap}``; hook: ``feature_transform``):

    P^ -> cap * tanh(P^ / cap)          (linear near 0, |P^| < cap)

in every MFVI iteration (the features q, v and the topic logits read) and where the head reads features
(``model.head_input=probs``). Under muP P^ = N Q_z - 1 grows N-fold as Q_z sharpens; under SP it is Q_z (<= 1). The
topic features G^ are left as they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ptsweep.variants.base import Variant


@dataclass(frozen=True)
class FeatureCap(Variant):
    name = "feature_cap"
    cap: float
    """The bound on |P^| (> 0)."""

    def check(self, cfg) -> None:
        self.require(0 < self.cap < math.inf, f"cap must be positive, got {self.cap}")

    def attach(self, model) -> None:
        model.feature_transform = lambda p_hat: self.cap * torch.tanh(p_hat / self.cap)
