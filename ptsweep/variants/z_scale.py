"""A width rule on the Z logits (``{name: z_scale}``; hook: the factor on Z): the weighted sum of the messages into
Z times sigma_Z(N) = sqrt(log N / log N0) (N0 = ``model.base_width``; 1 at N0). Logits of std sigma over N labels
lose about sigma^2 / 2 nats of entropy, so Q_z's entropy as a fraction of log N holds only if sigma^2 grows like
log N.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ptsweep.variants.base import Variant


@dataclass(frozen=True)
class ZScale(Variant):
    name = "z_scale"

    def check(self, cfg) -> None:
        self.require(cfg.base_width >= 2 and cfg.width >= 2, f"needs model.width and model.base_width >= 2 "
                     f"(log N0 > 0), got {cfg.width} and {cfg.base_width}")

    def attach(self, model) -> None:
        model.z_factor = math.sqrt(math.log(model.cfg.width) / math.log(model.cfg.base_width))
