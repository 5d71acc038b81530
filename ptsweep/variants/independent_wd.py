"""Weight decay that does not follow eta (``{name: independent_wd, decay}``; hook: ``parametrization.wd_rule``;
Kosson et al. 2025, arXiv 2510.19093): every matrix (S, U, V, B, W_out) shrinks by

    decay x the schedule factor per step          (w <- (1 - decay x f_t) w)

whatever eta and its group's muP LR multiplier, in place of ``optim.weight_decay``; gains and biases are not decayed.
torch's AdamW shrinks a weight by lr_t x weight_decay, so the group's weight_decay is decay / its peak LR
(``parametrization.build_optimizer``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ptsweep.parametrization import Role, role_of, wd_rule
from ptsweep.variants.base import Variant


@dataclass(frozen=True)
class IndependentWD(Variant):
    name = "independent_wd"
    decay: float
    """The shrink per step at the peak of the schedule, a fraction in (0, 1)."""

    def check(self, cfg) -> None:
        self.require(0 < self.decay < 1, f"decay must be a fraction per step in (0, 1), got {self.decay}")

    def attach(self, model) -> None:
        for p in model.parameters():
            if role_of(p) not in (Role.GAIN, Role.BIAS):
                wd_rule(p, self.decay)
