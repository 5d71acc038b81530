"""Schema of the training-horizon settings: ``sweep.horizon`` (a transferred LR at another budget) and
``sweep.lr_horizon`` (the lr-horizon study: the optimal LR at several budgets, eta*(T) = eta0 (T / T0)^-beta)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

from ptsweep.config.checks import increasing_lr_grid, one_of, require
from ptsweep.config.model import MODEL_SCHEMAS, SCALINGS


class BetaEstimate(StrEnum):
    """Which of an lr-horizon study's fits gives beta: the grid optima's least squares, or the seeds' optima between
    grid points (a finer estimate with a t interval; a factor-2 grid over two budgets 4x apart gives beta in 0, 0.5,
    1 only)."""

    grid = "grid"
    seeds = "seeds"


class HorizonRule(StrEnum):
    """How a transferred LR follows a budget other than the one it was tuned at."""

    off = "off"
    power = "power"


@dataclass
class HorizonConfig:
    """verify-transfer / scaling-curves: the LR of transfer.yaml at another training budget (``sweeps.horizon_rule``).
    'off': another budget is a mismatch; 'power': lr_tuned (T / T_tuned)^-beta."""

    rule: HorizonRule = HorizonRule.off
    """'off' | 'power'."""
    beta: float | None = None
    """The exponent beta >= 0 of the power rule (null: read it from ``results``)."""
    results: str = ""
    """An lr-horizon study's horizon.json: its fit of this config's model gives beta."""
    extrapolate: float = 1.0
    """How far (a factor) the tuned or target budget may lie outside the budgets ``results`` measured (1 = inside)."""
    estimate: BetaEstimate = BetaEstimate.seeds
    """Which fit of ``results`` gives beta: 'seeds' (the seeds' optima between grid points) | 'grid' (the grid
    optima)."""

    def validate(self) -> None:
        one_of(self.rule, tuple(HorizonRule), "sweep.horizon.rule")
        one_of(self.estimate, tuple(BetaEstimate), "sweep.horizon.estimate")
        require(self.beta is None or (math.isfinite(self.beta) and self.beta >= 0), "sweep.horizon.beta",
                f"must be a number >= 0 (the LR falls as the budget grows, or stays), got {self.beta}")
        require(self.extrapolate >= 1, "sweep.horizon.extrapolate", f"must be >= 1, got {self.extrapolate}")
        if self.rule == HorizonRule.power:
            require((self.beta is None) != (not self.results), "sweep.horizon",
                    "rule=power needs exactly one of sweep.horizon.beta=<number> and "
                    "sweep.horizon.results=<an lr-horizon study's horizon.json>")


@dataclass
class LrHorizonConfig:
    """lr-horizon: an LR grid x budgets x seeds at the tuning width, for PT and one baseline."""

    steps: list[int] = field(default_factory=lambda: [1200, 4800, 19200])
    """Training budgets in optimizer steps (>= 3, spanning >= 16x); each run's warm-up and decay follow its own."""
    grid: list[float] = field(default_factory=lambda: [2.5e-3, 5e-3, 1e-2, 2e-2, 4e-2])
    """PT's LR grid (increasing; an optimum on an edge gets one more LR a grid step past it, ``lr_widen`` times)."""
    baseline: str = "bert"
    """The baseline run beside PT, matched to PT at the tuning width by sweep.match ('' = PT only)."""
    baseline_grid: list[float] = field(default_factory=lambda: [5e-4, 1e-3, 2e-3, 4e-3])
    """The baseline's LR grid."""
    seeds: int = 2
    """Seeds of every (budget, LR): cfg.seed .. cfg.seed + seeds - 1."""
    width: int = 0
    """PT's width, where 'mup_sp' is anchored (SP: the tuning width; 0 = model.width)."""
    scaling: str = ""
    """PT's width-scaling paradigm ('' = model.scaling)."""
    anchor: int = 0
    """The width where 'mup_sp' is anchored: 0 = the study's width (SP there: a study at its tuning width); a smaller
    one (the tuning width) makes the study's model the muP model that a transfer from there trains at this width."""
    lr_widen: int = 2
    """Rounds of the edge rule per (model, budget): one more LR a grid step past an optimum on an edge."""
    predict: list[float] = field(default_factory=list)
    """PT LRs that a horizon rule fitted on the shorter budgets gives for the longest one, written down before its
    runs: each trains there at every seed (unless that grid has it), and the report gives its regret against the
    grid's best LR there, paired by seed."""
    collapse_frac: float = 0.5
    """A point past its budget's optimum is collapsed when it diverged, ends above the unigram loss, or keeps less than
    this fraction of the optimum's context gain (below the optimum the same is marked too slow)."""

    def validate(self) -> None:
        key = "sweep.lr_horizon"
        steps = sorted(self.steps)
        require(len(set(steps)) >= 3 and steps[0] >= 1 and steps[-1] >= 16 * steps[0], f"{key}.steps",
                f"need >= 3 distinct budgets spanning >= 16x (e.g. [1200, 4800, 19200]), got {self.steps}")
        for name, grid in (("grid", self.grid), ("baseline_grid", self.baseline_grid)):
            require(increasing_lr_grid(grid), f"{key}.{name}", f"must be >= 3 increasing positive LRs, got {grid}")
        one_of(self.baseline, ("", *(m for m in MODEL_SCHEMAS if m != "pt")), f"{key}.baseline")
        require(self.seeds >= 1, f"{key}.seeds", "must be >= 1")
        require(self.width >= 0, f"{key}.width", "must be >= 0 (0 = model.width)")
        require(self.anchor >= 0, f"{key}.anchor", "must be >= 0 (0 = the study's width)")
        one_of(self.scaling, ("", *SCALINGS), f"{key}.scaling")
        require(all(math.isfinite(x) and x > 0 for x in self.predict), f"{key}.predict",
                f"must be positive LRs, got {self.predict}")
        require(self.lr_widen >= 0, f"{key}.lr_widen", "must be >= 0")
        require(0 < self.collapse_frac < 1, f"{key}.collapse_frac", "must be in (0, 1)")
