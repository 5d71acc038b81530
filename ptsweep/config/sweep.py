"""Schema of the sweeps and the muP studies (SweepConfig), each field saying which sweep reads it.

tune-small, verify-transfer and scaling-curves read the top of ``sweep``; ``sweep.baseline.*``,
``sweep.coord_check.*`` and ``sweep.lr_transfer.*`` are sections. :data:`RENAMED_KEYS` maps the flat keys these
replaced to their new names, so an old override fails with a one-line "renamed to" error.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ptsweep.config.checks import increasing_lr_grid, one_of, require
from ptsweep.config.horizon import HorizonConfig, LrHorizonConfig
from ptsweep.config.model import INFO_WEIGHTS, MODEL_SCHEMAS, PARAMETRIZATIONS, SCALINGS


class Paradigm(StrEnum):
    """scaling-curves: PT's width-scaling paradigm(s) (``model.scaling``, or both side by side)."""

    channels = "channels"
    rank = "rank"
    both = "both"


class Match(StrEnum):
    """The count BERT / UT are matched to PT by (``models.sizing.match_shape``)."""

    total = "total"
    non_embedding = "non_embedding"
    flops = "flops"


class TransferSource(StrEnum):
    """Where verify-transfer / scaling-curves take PT's 7 transferred values from."""

    file = "file"
    config = "config"
    grid = "grid"


class CoordSchedule(StrEnum):
    """coord-check: a constant LR without clipping, or the training run's warm-up, decay and clipping."""

    constant = "constant"
    train = "train"


@dataclass
class BaselineSearchConfig:
    """scaling-curves: the Optuna search of BERT's and UT's optim.lr and optim.warmup_frac at each scale."""

    samples: int = 0
    """Trials of each baseline's search at each scale (0 = sweep.num_samples)."""
    lr_range: tuple[float, float] = (1e-4, 3e-3)
    """Log-uniform LR range."""
    warmup_range: tuple[float, float] = (0.01, 0.2)
    """Log-uniform range of optim.warmup_frac (widened past an edge up to 0.5)."""
    search_frac: float = 1.0
    """Fraction of the token budget used by each search trial."""
    lr_widen: int = 1
    """Times a search whose optimum is not bracketed is repeated around it (``grid``: one more LR a grid step past
    the edge optimum; 0 = only flag it)."""
    grid: list[float] = field(default_factory=list)
    """LR grid instead of the Optuna search: one trial per value at search_frac of the budget, no early stopping,
    warm-up at optim.warmup_frac ([] = the search)."""

    def __post_init__(self) -> None:  # OmegaConf hands sequences over as lists; the schema's tuples stay tuples
        self.lr_range, self.warmup_range = tuple(self.lr_range), tuple(self.warmup_range)
        self.grid = [float(v) for v in self.grid]

    def validate(self) -> None:
        require(self.samples >= 0, "sweep.baseline.samples", "must be >= 0 (0 = sweep.num_samples)")
        require(0 < self.lr_range[0] < self.lr_range[1], "sweep.baseline.lr_range", "must be 0 < low < high")
        require(0 < self.warmup_range[0] < self.warmup_range[1] <= 0.5, "sweep.baseline.warmup_range",
                "must be 0 < low < high <= 0.5")
        require(0 < self.search_frac <= 1, "sweep.baseline.search_frac", "must be in (0, 1]")
        require(self.lr_widen >= 0, "sweep.baseline.lr_widen", "must be >= 0")
        require(not self.grid or increasing_lr_grid(self.grid), "sweep.baseline.grid",
                f"must be [] or >= 3 increasing positive LRs (3 can bracket an optimum), got {self.grid}")


@dataclass
class CoordCheckConfig:
    """coord-check: activation and update sizes against width after a few steps, muP beside SP."""

    widths: list[int] = field(default_factory=lambda: [64, 128, 256, 512, 1024])
    """Widths to compare (PT with scaling=channels needs multiples of base_width / base_channels)."""
    seeds: int = 3
    """Seeds per (parametrization, width); the statistic is averaged over them before fitting."""
    steps: int = 4
    """Optimizer steps after init; sizes are measured at t = 0 (init) .. steps."""
    lr: float = 3e-2
    """Constant base LR of the steps (no warm-up, no clipping): large, so that mistakes show early."""
    batch_size: int = 0
    """Blocks per training and measurement batch (0 = train.batch_size)."""
    scaling: str = ""
    """PT's scaling paradigm in the check ('channels' | 'rank'; '' = model.scaling)."""
    schedule: CoordSchedule = CoordSchedule.constant
    """'constant' (``lr`` at every step, no clipping) or 'train' (the run's warm-up, decay and clipping)."""
    measure_steps: list[int] = field(default_factory=list)
    """Steps at which sizes are measured and checked (besides init); empty = every step."""
    tolerance: float = 0.25
    """muP passes when every checked log-log slope (size vs width) is within +-tolerance of 0."""
    parametrizations: list[str] = field(default_factory=lambda: ["mup_sp", "sp"])
    """Parametrizations measured side by side; the verdict is about the first muP one."""
    strict: bool = False
    """Exit with status 1 when the muP verdict fails (for CI / make)."""
    plots: bool = True
    """Write one PNG per (iteration, statistic)."""
    anchor: int = 0
    """PT: the width where 'mup_sp' is SP (``PTConfig.anchor_overrides``); 0 = the smallest of ``widths``."""
    equal_draws: bool = True
    """PT with scaling=channels: seeds at width N = ``seeds`` x C(widest) / C(N), so that every width averages the
    same number of independent channels."""

    def validate(self) -> None:
        require(self.anchor >= 0, "sweep.coord_check.anchor",
                f"must be >= 0 (0: the smallest width), got {self.anchor}")
        require(len(self.widths) >= 2 and _distinct_positive(self.widths), "sweep.coord_check.widths",
                f"need >= 2 distinct positive widths to fit a slope, got {self.widths}")
        require(self.seeds >= 1, "sweep.coord_check.seeds", "must be >= 1")
        require(self.steps >= 0, "sweep.coord_check.steps", "must be >= 0")
        require(math.isfinite(self.lr) and self.lr > 0, "sweep.coord_check.lr", "must be positive")
        require(self.batch_size >= 0, "sweep.coord_check.batch_size", "must be >= 0")
        one_of(self.scaling, ("", *SCALINGS), "sweep.coord_check.scaling")
        require(all(0 < t <= self.steps for t in self.measure_steps), "sweep.coord_check.measure_steps",
                f"steps must lie in 1..steps={self.steps}, got {self.measure_steps}")
        require(0 < self.tolerance < 1, "sweep.coord_check.tolerance", "must be in (0, 1)")
        _check_parametrizations(self.parametrizations, "sweep.coord_check.parametrizations")


@dataclass
class LrTransferConfig:
    """lr-transfer: a grid of base LRs per width and parametrization, then seeds near each optimum."""

    widths: list[int] = field(default_factory=lambda: [128, 256, 512, 1024])
    """PT widths (smallest and largest define the drift)."""
    grid_range: tuple[float, float] = (1e-3, 1e-1)
    """Lowest and highest base LR of the log-spaced grid."""
    grid_points: int = 9
    """Number of LR grid points (log-spaced, both ends included)."""
    sp_grid_range: list[float] = field(default_factory=list)
    """[low, high] of the SP LR grid ([] = grid_range): muP's and SP's optima can sit decades apart."""
    seeds: int = 3
    """Seeds at each of the ``refine_top`` best values per (parametrization, width) (stage 2)."""
    refine_top: int = 3
    """Best grid values per (parametrization, width) of stage 1 that get the extra seeds (0 = every grid value)."""
    parametrizations: list[str] = field(default_factory=lambda: ["mup_sp", "sp"])
    """Parametrizations compared."""
    weight_grid: list[float] = field(default_factory=lambda: [0.25, 0.5, 1.0, 2.0, 4.0])
    """Grid of the information weight ``weight_key`` (muP only) for the weight study ([] = skip it)."""
    control: dict[str, Any] | None = field(default_factory=dict)
    """Overrides of a control model run over muP's LR grid beside PT (e.g. {"model.n_iters": 0}); empty or null =
    none (``=null`` clears a preset's: Hydra merges ``{}`` into it)."""
    weight_key: str = "model.w_attn"
    """The information weight of the weight study (one of model.w_unary ... model.w_topic_g)."""
    weight_lr: float = 0.0
    """Base LR of the weight study (0 = optim.lr)."""
    weight_widths: list[int] = field(default_factory=list)
    """Widths of the weight study ([] = widths)."""
    scaling: str = "channels"
    """PT width-scaling paradigm of the study ('channels' | 'rank': model.scaling of every trial)."""
    tokens: float = 0.0
    """Token budget of every trial (0 = train.tokens)."""

    def __post_init__(self) -> None:  # OmegaConf hands sequences over as lists; the schema's tuples stay tuples
        self.grid_range = tuple(self.grid_range)

    def validate(self) -> None:
        one_of(self.scaling, SCALINGS, "sweep.lr_transfer.scaling")
        _check_parametrizations(self.parametrizations, "sweep.lr_transfer.parametrizations")
        require(len(self.widths) >= 2 and _distinct_positive(self.widths), "sweep.lr_transfer.widths",
                f"need >= 2 distinct positive widths, got {self.widths}")
        require(0 < self.grid_range[0] < self.grid_range[1], "sweep.lr_transfer.grid_range", "must be 0 < low < high")
        require(self.grid_points >= 2, "sweep.lr_transfer.grid_points", "must be >= 2")
        sp = self.sp_grid_range
        require(not sp or (len(sp) == 2 and 0 < sp[0] < sp[1]), "sweep.lr_transfer.sp_grid_range",
                f"must be [] or [low, high] with 0 < low < high, got {sp}")
        require(self.seeds >= 1, "sweep.lr_transfer.seeds", "must be >= 1")
        require(self.refine_top >= 0, "sweep.lr_transfer.refine_top", "must be >= 0 (0 = every grid value)")
        require(self.weight_key in {f"model.{w}" for w in INFO_WEIGHTS}, "sweep.lr_transfer.weight_key",
                f"must be one of {', '.join('model.' + w for w in INFO_WEIGHTS)}, got {self.weight_key!r}")
        require(math.isfinite(self.weight_lr) and self.weight_lr >= 0, "sweep.lr_transfer.weight_lr", "must be >= 0")
        require(_distinct_positive(self.weight_widths), "sweep.lr_transfer.weight_widths",
                f"must be distinct positive widths, got {self.weight_widths}")
        require(math.isfinite(self.tokens) and self.tokens >= 0, "sweep.lr_transfer.tokens", "must be >= 0")
        require(all(math.isfinite(w) and w > 0 for w in self.weight_grid), "sweep.lr_transfer.weight_grid",
                f"information weights must be positive, got {self.weight_grid}")


def _distinct_positive(widths: list[int]) -> bool:
    return all(w > 0 for w in widths) and len(set(widths)) == len(widths)


def _check_parametrizations(pars: list[str], key: str) -> None:
    require(len(pars) >= 1 and set(pars) <= set(PARAMETRIZATIONS) and len(set(pars)) == len(pars), key,
            f"must be distinct values of {' | '.join(PARAMETRIZATIONS)}, got {pars}")


@dataclass
class SweepConfig:
    """Settings of the three sweeps and the muP studies (each field says which sweep reads it)."""

    study: str = ""
    """Study name: output folder runs/<study> and W&B group ('' = the sweep's default name)."""
    # tune-small
    num_samples: int = 32
    """tune-small: trials Optuna proposes (also the default budget of each baseline search)."""
    search_seed: int = 0
    """Seed of the Optuna TPE sampler and of the perturbations."""
    lr_range: tuple[float, float] = (1e-3, 1e-1)
    """Log-uniform range of optim.lr for PT."""
    weight_range: tuple[float, float] = (0.5, 2.0)
    """Log-uniform range of each information weight not named in ``weight_ranges``."""
    weight_ranges: dict[str, list[Any]] = field(default_factory=lambda: {
        w: [0.5, 4.0] for w in ("w_attn", "w_unary", "w_head", "w_child")})
    """Per-weight log-uniform ranges that replace ``weight_range`` for the weights named (w_unary ...)."""
    asha_grace_frac: float = 0.25
    """ASHA: minimum fraction of the budget before a trial can be stopped."""
    asha_reduction: int = 3
    """ASHA reduction factor (1 disables early stopping)."""
    # verify-transfer
    transfer_file: str = ""
    """verify-transfer / scaling-curves: path to transfer.yaml ('' = runs/<tune study>/transfer.yaml)."""
    transfer_from: TransferSource = TransferSource.file
    """verify-transfer / scaling-curves: where PT's 7 values come from: 'file' (transfer.yaml) or 'config' (the
    config's own, untuned); scaling-curves also 'grid' (the best LR of ``transfer_grid`` at the smallest scale)."""
    transfer_grid: list[float] = field(default_factory=list)
    """scaling-curves with transfer_from 'grid': PT's LRs, each trained at the smallest of ``scales`` as a baseline
    grid trial is; the best is transferred untuned to every scale."""
    width: int = 1536
    """verify-transfer: the width the transferred config is checked at."""
    alpha: float = 0.05
    """verify-transfer: significance level."""
    p: float = 0.05
    """verify-transfer: top fraction the base point must lie in."""
    n: int = 0
    """verify-transfer: perturbed points to run (0 = n_required; may exceed it, e.g. the paper's 62)."""
    perturb: float = 0.2
    """verify-transfer: each coordinate is drawn uniformly in [(1-perturb) S_i, (1+perturb) S_i]."""
    seeds: int = 3
    """verify-transfer: seeds of the base point; scaling-curves: seeds of every point (seed = cfg.seed + i)."""
    model_seeds: dict[str, int] = field(default_factory=dict)
    """scaling-curves: final seeds of a model other than ``seeds`` ({model: count}); seeds past ``seeds`` skip
    cfg.seed + seeds, the seed of the baselines' search trials."""
    perturbed_seeds: int = 0
    """verify-transfer: seeds of each perturbed point, paired with the base's (0 = all base seeds)."""
    test_alpha: float = 0.05
    """verify-transfer: level of the noise-aware tests of the verdict (family-wise over the perturbed points)."""
    equivalence_margin: float = 0.01
    """verify-transfer: relative margin within which a neighbourhood counts as "flat" (equivalent to the base)."""
    regret_tolerance: float = 0.004
    """verify-transfer: relative regret (L(S) - min over the box) / L(S) the user accepts ([S] §3.1's noise)."""
    allow_transfer_mismatch: bool = False
    """verify-transfer / scaling-curves: proceed although transfer.yaml was tuned under other settings."""
    # scaling-curves
    scales: list[int] = field(default_factory=lambda: [256, 512, 768, 1024])
    """scaling-curves: PT widths; BERT/UT widths are matched by parameter count."""
    models: list[str] = field(default_factory=lambda: ["pt", "bert", "ut"])
    """scaling-curves: models to compare."""
    scaling: Paradigm = Paradigm.channels
    """scaling-curves: PT scaling paradigm(s): 'channels' | 'rank' | 'both'."""
    match: Match = Match.total
    """scaling-curves / size --table: match BERT/UT to PT by total or non-embedding parameters, or FLOPs/token."""
    baseline: BaselineSearchConfig = field(default_factory=BaselineSearchConfig)
    """scaling-curves: the BERT / UT searches at each scale."""
    bootstrap: int = 1000
    """scaling-curves: bootstrap resamples (residuals over seeds) of the fits' parameters and bands (figures)."""
    plateau_gain: float = 1.0
    """scaling-curves: the [MASK]-target context gain (nats) that marks a model off its loss plateau."""
    plateau_factor: float = 1.5
    """scaling-curves: the budget must be >= this x the step at which the slowest seed first reaches
    ``plateau_gain`` (``analysis.learning_curves.budget_check``, the plateau gate)."""
    plateau_gate: bool = True
    """scaling-curves: no verdict from a comparison with a model that reached ``plateau_gain`` only after
    budget / ``plateau_factor`` (or never) (``analysis.framings.plateau_gate``)."""
    coord_check: CoordCheckConfig = field(default_factory=CoordCheckConfig)
    """coord-check (``ptsweep.sweeps.coord_check``)."""
    lr_transfer: LrTransferConfig = field(default_factory=LrTransferConfig)
    """lr-transfer (``ptsweep.sweeps.lr_transfer``)."""
    horizon: HorizonConfig = field(default_factory=HorizonConfig)
    """verify-transfer / scaling-curves: the transferred LR at a budget other than tune-small's."""
    lr_horizon: LrHorizonConfig = field(default_factory=LrHorizonConfig)
    """lr-horizon (``ptsweep.sweeps.lr_horizon``)."""
    keep_checkpoints: bool = False
    """all sweeps: keep each finished trial's checkpoint.pt (off: deleted once the trial's ledger record is written)."""
    results: str = ""
    """all sweeps: the study's results folder in the repository ('' = none; ``ptsweep.trials.results``)."""
    report_only: bool = False
    """all sweeps: render the report from ``results`` alone (no training; ``make report`` sets it)."""

    def __post_init__(self) -> None:  # OmegaConf hands sequences over as lists; the schema's tuples stay tuples
        self.lr_range, self.weight_range = tuple(self.lr_range), tuple(self.weight_range)
        self.transfer_grid = [float(v) for v in self.transfer_grid]

    def validate(self) -> None:
        """One check per sweep key, grouped by the sweep that reads it."""
        # tune-small: the search space
        require(self.num_samples >= 1, "sweep.num_samples", "must be >= 1")
        require(0 < self.lr_range[0] < self.lr_range[1], "sweep.lr_range", "must be 0 < low < high")
        require(0 < self.weight_range[0] < self.weight_range[1], "sweep.weight_range", "must be 0 < low < high")
        require(set(self.weight_ranges) <= set(INFO_WEIGHTS), "sweep.weight_ranges",
                f"keys must be information weights {list(INFO_WEIGHTS)}, got {list(self.weight_ranges)}")
        for key, rng in self.weight_ranges.items():
            require(len(rng) == 2 and all(isinstance(x, (int, float)) for x in rng) and 0 < rng[0] < rng[1],
                    f"sweep.weight_ranges.{key}", f"must be [low, high] with 0 < low < high, got {rng}")
        # verify-transfer: the test, the perturbations, the seeds and the statistics
        require(0 < self.alpha < 1, "sweep.alpha", "must be in (0, 1)")
        require(0 < self.p < 1, "sweep.p", "must be in (0, 1)")
        require(self.n >= 0, "sweep.n", "must be >= 0")
        require(0 < self.perturb < 1, "sweep.perturb", "must be in (0, 1)")
        require(self.seeds >= 1, "sweep.seeds", "must be >= 1")
        for model, n in self.model_seeds.items():
            require(model in self.models and isinstance(n, int) and n >= 1, f"sweep.model_seeds.{model}",
                    f"must be a seed count >= 1 of a model in sweep.models {list(self.models)}, got {n}")
        require(0 <= self.perturbed_seeds <= self.seeds, "sweep.perturbed_seeds", "must be in [0, sweep.seeds]")
        require(0.0 < self.test_alpha < 1.0, "sweep.test_alpha", "must be in (0, 1)")
        require(self.equivalence_margin > 0.0, "sweep.equivalence_margin", "must be > 0")
        require(0.0 < self.regret_tolerance < 1.0, "sweep.regret_tolerance", "must be in (0, 1) (relative regret)")
        # scaling-curves: scales and models
        require(len(self.scales) >= 1 and all(s > 0 for s in self.scales), "sweep.scales", "must be positive widths")
        require(set(self.models) <= set(MODEL_SCHEMAS) and len(self.models) >= 1, "sweep.models",
                f"must be a subset of {sorted(MODEL_SCHEMAS)}, got {self.models}")
        require(self.bootstrap >= 0, "sweep.bootstrap", "must be >= 0")
        require(self.plateau_gain > 0, "sweep.plateau_gain", "must be > 0 nats")
        require(self.plateau_factor >= 1, "sweep.plateau_factor", "must be >= 1 (budget / crossing step)")
        require(self.transfer_from != "grid" or increasing_lr_grid(self.transfer_grid), "sweep.transfer_grid",
                f"must be >= 3 increasing positive LRs with sweep.transfer_from=grid, got {self.transfer_grid}")
        self.baseline.validate()
        self.coord_check.validate()
        self.lr_transfer.validate()
        self.horizon.validate()
        self.lr_horizon.validate()


_FLAT_PREFIXES = (("baseline", "baseline_", BaselineSearchConfig), ("coord_check", "coord_", CoordCheckConfig),
                  ("lr_transfer", "lr_", LrTransferConfig))
"""Each section and the prefix its keys had in the flat ``sweep`` of earlier versions (``strict`` had none)."""
RENAMED_KEYS = {f"sweep.{'' if f.name == 'strict' else prefix}{f.name}": f"sweep.{section}.{f.name}"
                for section, prefix, schema in _FLAT_PREFIXES for f in dataclasses.fields(schema)}
"""The flat sweep keys of earlier versions -> their names now (``sweep.lr_widths`` -> ``sweep.lr_transfer.widths``)."""
RENAMED_KEYS["sweep.baseline_lr_samples"] = "sweep.baseline.samples (the whole search budget)"
