"""A floor on Q_z's mean entropy (``{name: qz_entropy_floor, floor, weight}``; hook: an auxiliary loss):

    weight * mean_t relu(floor * log N - Hbar^(t))^2,    Hbar^(t) = mean_i H(Q_z,i^(t)) over real tokens i,

Q_z^(t) the distribution MFVI iteration t starts from. A hinge is 0, with 0 gradient, while Q_z keeps its entropy
(a healthy model is untouched) and pushes back only on a collapse to one-hot; squared, so the gradient is continuous
at the floor; on the mean, not per token, so confident tokens stay allowed. Logged as ``aux/qz_entropy_floor``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ptsweep.metrics import masked_token_mean, token_entropy
from ptsweep.variants.base import Variant


@dataclass(frozen=True)
class EntropyFloor(Variant):
    name = "qz_entropy_floor"
    floor: float
    """f in (0, 1): the floor as a fraction of log N."""
    weight: float = 1.0
    """w_H: weight of the hinge (nats^-1, > 0)."""

    def check(self, cfg) -> None:
        self.require(0.0 < self.floor < 1.0, f"floor must be a fraction of log N in (0, 1), got {self.floor}")
        self.require(0.0 < self.weight < float("inf"), f"weight must be positive, got {self.weight}")

    def attach(self, model) -> None:
        model.aux_losses[self.name] = self.loss

    def loss(self, iterates: list, mask: torch.Tensor) -> torch.Tensor:
        """The module docstring's term from ``iterates`` ((Q_z^(t), l^(t)) per t; N = Q_z's last axis)."""
        floor = self.floor * math.log(iterates[0][0].shape[-1])                      # nats
        hinges = [torch.relu(floor - masked_token_mean(token_entropy(q_z), mask)).pow(2) for q_z, _ in iterates]
        return self.weight * torch.stack(hinges).mean()
