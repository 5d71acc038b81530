"""A width rule on the topic logits (``{name: topic_scale}``; hook: the factor on the topic logits): E times
sqrt(N0 / N) (N0 = ``model.base_width``; 1 at N0), against topic logits that grow with width in training although
muP's eta / N on B predicts no growth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ptsweep.variants.base import Variant


@dataclass(frozen=True)
class TopicScale(Variant):
    name = "topic_scale"

    def attach(self, model) -> None:
        model.topic_factor = math.sqrt(model.cfg.base_width / model.cfg.width)
