"""The runs a sweep will train, as data: each sweep module's ``planned_trials(cfg) -> list[PlannedTrial]``, built from
the functions its driver runs, is what the run planner (``ptsweep.planner``) counts (ASHA's early stops are not).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

STAGES = ("search", "final")
"""search: a tuning trial (its loss chooses hyperparameters, it is not reported); final: a run the sweep reports."""


@dataclass(frozen=True)
class PlannedTrial:
    """One run a sweep will train."""

    sweep: str
    """The sweep's CLI name (tune-small, verify-transfer, scaling-curves, lr-transfer, coord-check)."""
    stage: str
    """One of :data:`STAGES`."""
    model: Any = field(compare=False, repr=False)
    """The model config the run builds (PTConfig, BertConfig or UTConfig)."""
    tokens: float
    """Training tokens of the run."""
    seed: int
    """Training seed."""
    batch_size: int
    """Sequences per optimizer step."""
    scale: int = 0
    """The PT width the run belongs to (scaling-curves: the scale a baseline is matched to; else the run's width)."""
    label: str = ""
    """The driver's label of the run, where it has one."""

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"PlannedTrial.stage must be one of {STAGES}, got {self.stage!r}")

    @property
    def model_name(self) -> str:
        return self.model.name

    @property
    def width(self) -> int:
        return int(self.model.width)


def shape_cache(cfg):
    """``model(overrides)``: ``cfg.model`` with the ``model.*`` keys of ``overrides`` applied and validated (other keys
    do not change the model), built once per distinct overrides: a plan has hundreds of runs on a few shapes."""
    cache: dict[tuple, Any] = {}

    def model(overrides: dict) -> Any:
        fields = {k.split(".", 1)[1]: v for k, v in overrides.items() if k.startswith("model.")}
        if "name" in fields:
            raise ValueError("trial_plan.shape_cache: model.name overrides are not supported (match_shape builds "
                             "another model's config)")
        key = tuple(sorted(fields.items()))
        if key not in cache:
            cache[key] = dataclasses.replace(cfg.model, **fields)
            cache[key].validate()
        return cache[key]

    return model
