"""S's LR rule (``{name: unary_lr, scale, rule, cap}``; hook: ``parametrization.lr_rule``, muP family only): the
LR of the unary S is

    rule 'const':        eta x scale                                (width-free, [S] Table 2's input row)
    rule 'sqrt_capped':  min(eta x scale x sqrt(N / N0), cap)       (cap: an absolute LR)

with the warm-up and decay multiplying it as every group's. AdamW's step is scale-free, so w_unary scales both S's
logits at init and their updates; ``scale`` moves only the updates. The capped rule's updates of S grow like N^0.5
by design, so it fails the coordinate check: a diagnostic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ptsweep.parametrization import lr_rule
from ptsweep.variants.base import Variant


@dataclass(frozen=True)
class UnaryLR(Variant):
    name = "unary_lr"
    scale: float = 1.0
    """Factor on S's muP LR constant (> 0)."""
    rule: str = "const"
    """'const' or 'sqrt_capped' (module docstring)."""
    cap: float = 0.0
    """S's peak-LR cap under 'sqrt_capped' (required > 0 there; 0 under 'const')."""

    def check(self, cfg) -> None:
        self.require(0 < self.scale < math.inf, f"scale must be positive, got {self.scale}")
        self.require(self.rule in ("const", "sqrt_capped"),
                     f"rule must be one of ['const', 'sqrt_capped'], got {self.rule!r}")
        self.require(cfg.parametrization != "sp", "scales a muP LR constant, which 'sp' does not read; use a muP "
                     "parametrization")
        capped = self.rule == "sqrt_capped"
        self.require(math.isfinite(self.cap) and (self.cap > 0 if capped else self.cap == 0),
                     f"cap must be a positive LR under rule sqrt_capped and 0 under const, got {self.cap} with "
                     f"{self.rule}")

    def attach(self, model) -> None:
        if self.rule == "sqrt_capped":
            lr_rule(model.unary, self.scale * math.sqrt(model.cfg.width / model.cfg.base_width), self.cap)
        else:
            lr_rule(model.unary, self.scale)
