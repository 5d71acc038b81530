"""Schema of the sweeps and the muP studies (SweepConfig): one flat section, each field saying which sweep reads it.

The field names keep their prefixes (``coord_``, ``lr_``, ``baseline_``): they are the command-line overrides
(``sweep.coord_widths=[64,128]``) of every documented command.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ptsweep.config.checks import one_of, require
from ptsweep.config.model import INFO_WEIGHTS, MODEL_SCHEMAS, PARAMETRIZATIONS, SCALINGS


@dataclass
class SweepConfig:
    """Settings of the three sweeps and the muP studies (each field says which sweep reads it)."""

    study: str = ""
    """Study name: output folder runs/<study> and W&B group ('' = the sweep's default name)."""
    # tune-small
    num_samples: int = 32
    """tune-small: trials Optuna proposes (also the default budget of each baseline search, ``baseline_samples``)."""
    search_seed: int = 0
    """Seed of the Optuna TPE sampler and of the perturbations."""
    lr_range: tuple[float, float] = (1e-3, 1e-1)
    """Log-uniform range of optim.lr for PT."""
    weight_range: tuple[float, float] = (0.5, 2.0)
    """Log-uniform range of each information weight not named in ``weight_ranges`` (by default w_topic_z and
    w_topic_g: optimum 1 or flat at both widths measured; experiments/lr-transfer/README.md, "The default where
    models are trained")."""
    weight_ranges: dict[str, list[Any]] = field(default_factory=lambda: {
        w: [0.5, 4.0] for w in ("w_attn", "w_unary", "w_head", "w_child")})
    """Per-weight log-uniform ranges that replace ``weight_range`` for the weights named (keys: w_unary, w_child,
    w_head, w_topic_z, w_attn, w_topic_g). Default: w_unary, w_attn, w_head and w_child in [0.5, 4]: their optima at
    width 128 sit at 2 or above, the edge of their 0.5 / 1 / 2 grids (experiments/lr-transfer/README.md)."""
    asha_grace_frac: float = 0.25
    """ASHA: minimum fraction of the budget before a trial can be stopped."""
    asha_reduction: int = 3
    """ASHA reduction factor (1 disables early stopping)."""
    # verify-transfer
    transfer_file: str = ""
    """verify-transfer / scaling-curves: path to transfer.yaml ('' = runs/<tune study>/transfer.yaml)."""
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
    perturbed_seeds: int = 0
    """verify-transfer: seeds of each perturbed point, paired with the base's (point j at base seeds (j + r) mod
    seeds, r < perturbed_seeds; 0 = all base seeds, the complete paired design)."""
    test_alpha: float = 0.05
    """verify-transfer: level of the noise-aware tests of the verdict (family-wise over the perturbed points)."""
    equivalence_margin: float = 0.01
    """verify-transfer: relative margin within which a neighbourhood counts as "flat" (equivalent to the base)."""
    regret_tolerance: float = 0.004
    """verify-transfer: relative regret the user accepts (0.004 = 0.4 %, the gap [S] §3.1 called noise): the
    regret verdict passes when the upper bound of (L(S) - min over the box) / L(S) is below it, fails when the
    lower bound is above it (analysis.regret)."""
    allow_transfer_mismatch: bool = False
    """verify-transfer / scaling-curves: proceed although transfer.yaml was tuned under other settings (the
    summary records the mismatched keys)."""
    # scaling-curves
    scales: list[int] = field(default_factory=lambda: [256, 512, 768, 1024])
    """scaling-curves: PT widths; BERT/UT widths are matched by parameter count."""
    models: list[str] = field(default_factory=lambda: ["pt", "bert", "ut"])
    """scaling-curves: models to compare."""
    scaling: str = "channels"
    """scaling-curves: PT scaling paradigm(s): 'channels' | 'rank' | 'both'."""
    match: str = "total"
    """scaling-curves / size --table: the count BERT/UT are matched to PT by (``models.sizing.match_shape``): total
    parameters ([S]'s framing), non-embedding parameters, or training FLOPs per token."""
    baseline_samples: int = 0
    """scaling-curves: Optuna trials of each baseline's search at each scale (0 = sweep.num_samples, the budget of
    PT's tune-small: equal tuning effort). Searched: optim.lr and optim.warmup_frac, with tune-small's ASHA."""
    baseline_lr_samples: int = 0
    """Deprecated (the former LR-only trial count per baseline scale); ignored - the summary notes a value > 0.
    The budget is ``baseline_samples``."""
    baseline_lr_range: tuple[float, float] = (1e-4, 3e-3)
    """scaling-curves: log-uniform LR range for BERT/UT."""
    baseline_warmup_range: tuple[float, float] = (0.01, 0.2)
    """scaling-curves: log-uniform range of optim.warmup_frac for BERT/UT (widened past an edge up to 0.5)."""
    baseline_search_frac: float = 1.0
    """scaling-curves: fraction of the token budget used by each baseline LR-search trial."""
    baseline_lr_widen: int = 1
    """scaling-curves: times a baseline LR search whose best LR sits on an edge of its range (lowest / highest
    sixth in log space) is repeated on a range shifted one range-width past that edge (0 = only flag it)."""
    bootstrap: int = 1000
    """scaling-curves: bootstrap resamples (over seeds) of the fits and of the PT - baseline differences."""
    # coord-check (ptsweep.sweeps.coord_check)
    coord_widths: list[int] = field(default_factory=lambda: [64, 128, 256, 512, 1024])
    """coord-check: widths to compare (PT with scaling=channels needs multiples of base_width / base_channels)."""
    coord_seeds: int = 3
    """coord-check: seeds per (parametrization, width); the statistic is averaged over them before fitting."""
    coord_steps: int = 4
    """coord-check: optimizer steps after init; sizes are measured at t = 0 (init) .. coord_steps."""
    coord_lr: float = 3e-2
    """coord-check: constant base LR of the steps (no warm-up, no clipping): large, so that mistakes show early."""
    coord_batch_size: int = 0
    """coord-check: blocks per training and measurement batch (0 = train.batch_size)."""
    coord_scaling: str = ""
    """coord-check: PT's scaling paradigm in the check ('channels' | 'rank'; '' = model.scaling)."""
    coord_schedule: str = "constant"
    """coord-check: 'constant' (coord_lr at every step, no clipping: mistakes show early) or 'train' (the run's
    warm-up and decay over coord_steps and its gradient clipping: the check of a real training run at the tuned
    eta = coord_lr)."""
    coord_measure_steps: list[int] = field(default_factory=list)
    """coord-check: steps at which sizes are measured and checked (besides init); empty = every step."""
    coord_tolerance: float = 0.25
    """coord-check: muP passes when every checked log-log slope (size vs width) is within +-tolerance of 0."""
    coord_parametrizations: list[str] = field(default_factory=lambda: ["mup_sp", "sp"])
    """coord-check: parametrizations measured side by side; the verdict is about the first muP variant measured
    (``parametrization.MUP_VARIANTS`` order: mup_sp, mup, mup_paper)."""
    strict: bool = False
    """coord-check: exit with status 1 when the muP verdict fails (for CI / make)."""
    # lr-transfer (ptsweep.sweeps.lr_transfer)
    lr_widths: list[int] = field(default_factory=lambda: [128, 256, 512, 1024])
    """lr-transfer: PT widths (smallest and largest define the drift)."""
    lr_grid_range: tuple[float, float] = (1e-3, 1e-1)
    """lr-transfer: lowest and highest base LR of the log-spaced grid."""
    lr_grid_points: int = 9
    """lr-transfer: number of LR grid points (log-spaced, both ends included)."""
    lr_sp_grid_range: list[float] = field(default_factory=list)
    """lr-transfer: [low, high] of the SP LR grid ([] = lr_grid_range). muP's eta multiplies the hidden LR by 1/N,
    SP's does not, so the two optima can sit decades apart."""
    lr_seeds: int = 3
    """lr-transfer: seeds at each of the ``lr_refine_top`` best values per (parametrization, width); stage 1 runs the
    whole grid with seed ``seed``, stage 2 adds seeds ``seed+1 .. seed+lr_seeds-1`` near the optimum."""
    lr_refine_top: int = 3
    """lr-transfer: grid values per (parametrization, width) that get the extra seeds, chosen from stage 1's losses
    (0 = every grid value: the full grid with every seed)."""
    lr_parametrizations: list[str] = field(default_factory=lambda: ["mup_sp", "sp"])
    """lr-transfer: parametrizations compared."""
    lr_weight_grid: list[float] = field(default_factory=lambda: [0.25, 0.5, 1.0, 2.0, 4.0])
    """lr-transfer: grid of the information weight ``lr_weight_key`` (muP only) for the weight study ([] = skip it)."""
    lr_control: dict[str, Any] = field(default_factory=dict)
    """lr-transfer: overrides of a control model run over muP's LR grid beside PT (e.g. {"model.n_iters": 0}: PT
    without inference, the head reads the unary alone); empty = no control. Reported as study "control"."""
    lr_weight_key: str = "model.w_attn"
    """lr-transfer: the information weight of the weight study (one of model.w_unary ... model.w_topic_g)."""
    lr_weight_lr: float = 0.0
    """lr-transfer: base LR of the weight study (0 = optim.lr)."""
    lr_weight_widths: list[int] = field(default_factory=list)
    """lr-transfer: widths of the weight study ([] = lr_widths)."""
    lr_scaling: str = "channels"
    """lr-transfer: PT width-scaling paradigm of the study ('channels' | 'rank': model.scaling of every trial)."""
    lr_tokens: float = 0.0
    """lr-transfer: token budget of every trial (0 = train.tokens)."""
    keep_checkpoints: bool = False
    """all sweeps: keep each finished trial's checkpoint.pt (off: deleted once the trial's ledger record is written)."""

    def __post_init__(self) -> None:  # OmegaConf hands sequences over as lists; the schema's tuples stay tuples
        for name in ("lr_range", "weight_range", "baseline_lr_range", "baseline_warmup_range", "lr_grid_range"):
            setattr(self, name, tuple(getattr(self, name)))

    def validate(self) -> None:
        """One check per sweep key, grouped by the sweep that reads it."""
        self._check_tuning()
        self._check_verification()
        self._check_scaling_curves()
        self._check_coord_check()
        self._check_lr_transfer()

    def _check_tuning(self) -> None:
        """tune-small: the search space, and the closed choices of the paradigm and matching."""
        one_of(self.scaling, (*SCALINGS, "both"), "sweep.scaling")
        one_of(self.match, ("total", "non_embedding", "flops"), "sweep.match")
        one_of(self.lr_scaling, SCALINGS, "sweep.lr_scaling")
        require(self.num_samples >= 1, "sweep.num_samples", "must be >= 1")
        require(0 < self.lr_range[0] < self.lr_range[1], "sweep.lr_range", "must be 0 < low < high")
        require(0 < self.weight_range[0] < self.weight_range[1], "sweep.weight_range", "must be 0 < low < high")
        require(isinstance(self.weight_ranges, dict) and set(self.weight_ranges) <= set(INFO_WEIGHTS),
                 "sweep.weight_ranges", f"keys must be information weights {list(INFO_WEIGHTS)}, got "
                                        f"{list(self.weight_ranges) if isinstance(self.weight_ranges, dict) else self.weight_ranges}")
        for key, rng in self.weight_ranges.items():
            require(isinstance(rng, (list, tuple)) and len(rng) == 2 and all(isinstance(x, (int, float)) for x in rng)
                     and 0 < rng[0] < rng[1], f"sweep.weight_ranges.{key}", f"must be [low, high] with 0 < low < high, got {rng}")

    def _check_verification(self) -> None:
        """verify-transfer: the test, the perturbations, the seeds and the statistics."""
        require(0 < self.alpha < 1, "sweep.alpha", "must be in (0, 1)")
        require(0 < self.p < 1, "sweep.p", "must be in (0, 1)")
        require(self.n >= 0, "sweep.n", "must be >= 0")
        require(0 < self.perturb < 1, "sweep.perturb", "must be in (0, 1)")
        require(self.seeds >= 1, "sweep.seeds", "must be >= 1")
        require(0 <= self.perturbed_seeds <= self.seeds, "sweep.perturbed_seeds", "must be in [0, sweep.seeds]")
        require(0.0 < self.test_alpha < 1.0, "sweep.test_alpha", "must be in (0, 1)")
        require(self.equivalence_margin > 0.0, "sweep.equivalence_margin", "must be > 0")
        require(0.0 < self.regret_tolerance < 1.0, "sweep.regret_tolerance", "must be in (0, 1) (relative regret)")
        require(self.baseline_lr_widen >= 0, "sweep.baseline_lr_widen", "must be >= 0")
        require(self.bootstrap >= 0, "sweep.bootstrap", "must be >= 0")

    def _check_scaling_curves(self) -> None:
        """scaling-curves: scales, models and the baselines' searches."""
        require(len(self.scales) >= 1 and all(s > 0 for s in self.scales), "sweep.scales", "must be positive widths")
        require(set(self.models) <= set(MODEL_SCHEMAS) and len(self.models) >= 1, "sweep.models",
                 f"must be a subset of {sorted(MODEL_SCHEMAS)}, got {self.models}")
        require(self.baseline_samples >= 0, "sweep.baseline_samples", "must be >= 0 (0 = sweep.num_samples)")
        require(self.baseline_lr_samples >= 0, "sweep.baseline_lr_samples", "must be >= 0 (deprecated, ignored)")
        require(0 < self.baseline_lr_range[0] < self.baseline_lr_range[1], "sweep.baseline_lr_range",
                 "must be 0 < low < high")
        require(0 < self.baseline_warmup_range[0] < self.baseline_warmup_range[1] <= 0.5,
                 "sweep.baseline_warmup_range", "must be 0 < low < high <= 0.5")
        require(0 < self.baseline_search_frac <= 1, "sweep.baseline_search_frac", "must be in (0, 1]")

    def _check_coord_check(self) -> None:
        """coord-check: widths, steps, LR, schedule and tolerance."""
        require(len(self.coord_widths) >= 2 and all(w > 0 for w in self.coord_widths)
                 and len(set(self.coord_widths)) == len(self.coord_widths), "sweep.coord_widths",
                 f"need >= 2 distinct positive widths to fit a slope, got {self.coord_widths}")
        require(self.coord_seeds >= 1, "sweep.coord_seeds", "must be >= 1")
        require(self.coord_steps >= 0, "sweep.coord_steps", "must be >= 0")
        require(math.isfinite(self.coord_lr) and self.coord_lr > 0, "sweep.coord_lr", "must be positive")
        require(self.coord_batch_size >= 0, "sweep.coord_batch_size", "must be >= 0")
        require(self.coord_scaling in ("", "channels", "rank"), "sweep.coord_scaling",
                 f"must be '', 'channels' or 'rank', got {self.coord_scaling!r}")
        require(self.coord_schedule in ("constant", "train"), "sweep.coord_schedule",
                 f"must be 'constant' or 'train', got {self.coord_schedule!r}")
        require(all(0 < t <= self.coord_steps for t in self.coord_measure_steps), "sweep.coord_measure_steps",
                 f"steps must lie in 1..coord_steps={self.coord_steps}, got {self.coord_measure_steps}")
        require(0 < self.coord_tolerance < 1, "sweep.coord_tolerance", "must be in (0, 1)")

    def _check_lr_transfer(self) -> None:
        """lr-transfer: parametrizations, widths, grids, seeds and the weight study."""
        for key, pars in (("sweep.coord_parametrizations", self.coord_parametrizations),
                          ("sweep.lr_parametrizations", self.lr_parametrizations)):
            require(len(pars) >= 1 and set(pars) <= set(PARAMETRIZATIONS) and len(set(pars)) == len(pars), key,
                     f"must be distinct values of {' | '.join(PARAMETRIZATIONS)}, got {pars}")
        require(len(self.lr_widths) >= 2 and all(w > 0 for w in self.lr_widths)
                 and len(set(self.lr_widths)) == len(self.lr_widths), "sweep.lr_widths",
                 f"need >= 2 distinct positive widths, got {self.lr_widths}")
        require(0 < self.lr_grid_range[0] < self.lr_grid_range[1], "sweep.lr_grid_range", "must be 0 < low < high")
        require(self.lr_grid_points >= 2, "sweep.lr_grid_points", "must be >= 2")
        require(not self.lr_sp_grid_range or (len(self.lr_sp_grid_range) == 2
                                                and 0 < self.lr_sp_grid_range[0] < self.lr_sp_grid_range[1]),
                 "sweep.lr_sp_grid_range", f"must be [] or [low, high] with 0 < low < high, got {self.lr_sp_grid_range}")
        require(self.lr_seeds >= 1, "sweep.lr_seeds", "must be >= 1")
        require(self.lr_refine_top >= 0, "sweep.lr_refine_top", "must be >= 0 (0 = every grid value)")
        require(self.lr_weight_key in {f"model.{w}" for w in INFO_WEIGHTS}, "sweep.lr_weight_key",
                 f"must be one of {', '.join('model.' + w for w in INFO_WEIGHTS)}, got {self.lr_weight_key!r}")
        require(math.isfinite(self.lr_weight_lr) and self.lr_weight_lr >= 0, "sweep.lr_weight_lr", "must be >= 0")
        require(all(w > 0 for w in self.lr_weight_widths) and len(set(self.lr_weight_widths)) == len(self.lr_weight_widths),
                 "sweep.lr_weight_widths", f"must be distinct positive widths, got {self.lr_weight_widths}")
        require(math.isfinite(self.lr_tokens) and self.lr_tokens >= 0, "sweep.lr_tokens", "must be >= 0")
        require(all(math.isfinite(w) and w > 0 for w in self.lr_weight_grid), "sweep.lr_weight_grid",
                 f"information weights must be positive, got {self.lr_weight_grid}")
