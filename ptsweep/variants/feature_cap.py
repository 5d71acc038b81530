"""A bound on the Z features (``{name: feature_cap, cap}``; hook: the model's ``features`` on the Z distribution):

    P^ -> cap * tanh(P^ / cap)          (linear near 0, |P^| < cap)

in every MFVI iteration (the features q, v and the topic logits read) and where the head reads features
(``model.head_input=probs``). Under muP P^ = N Q_z - 1 grows N-fold as Q_z sharpens; under SP it is Q_z (<= 1). The
topic features G^ (``topic_features``: the same method called with their own scale) are left as they are.
``models/pt.py`` has no named hook here: the variant wraps the model instance's ``features`` method, as the
experiments/context probe script did before it was a variant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ptsweep.variants.base import Variant


def capped(features, cap: float):
    """``features`` (the model's bound method) with its Z features (no ``scale`` given) bounded by ``cap``."""
    def z_capped(q: torch.Tensor, scale: float | None = None) -> torch.Tensor:
        return features(q, scale) if scale is not None else cap * torch.tanh(features(q) / cap)
    return z_capped


@dataclass(frozen=True)
class FeatureCap(Variant):
    name = "feature_cap"
    cap: float
    """The bound on |P^| (> 0)."""

    def check(self, cfg) -> None:
        self.require(0 < self.cap < math.inf, f"cap must be positive, got {self.cap}")

    def attach(self, model) -> None:
        model.features = capped(model.features, self.cap)
