"""How scaling-curves chooses each baseline's learning rate at each scale (``sweep.baseline.rule``), and the search
trials that takes per (baseline, scale).

- ``search`` ([S] §3.2): every scale gets its own search (``baseline_tuning``).
- ``extrapolate``: that search at the ``sweep.baseline.search_scales`` smallest scales only; their best LRs are fitted
  by a power law in the baseline's non-embedding parameter count P (DeepSeek LLM, Bi et al. 2024, §3.1),

      eta*(P) = a P^(-b),   least squares of log eta* on log P   (``analysis.fits.fit_power_law``),

  and each larger scale runs ``local_points`` LRs  eta_hat f^k,  k = -(n-1)/2 .. (n-1)/2  (f = ``local_factor``) at
  the warm-up of the largest searched scale; without 2 finished searched scales to fit, it gets failed rows.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, MutableMapping

import pandas as pd

from ptsweep.analysis import fits
from ptsweep.config import RunConfig
from ptsweep.models.sizing import param_count
from ptsweep.sweeps import baseline_tuning
from ptsweep.trials.trial_plan import PlannedTrial


class NoExtrapolation(ValueError):
    """A larger scale's LR cannot be extrapolated (fewer than 2 finished searched scales, or a non-positive fit)."""


def searched_scales(cfg: RunConfig) -> list[int]:
    """The scales with a full search: all under rule 'search', the ``search_scales`` smallest under 'extrapolate'."""
    scales = sorted(int(s) for s in cfg.sweep.scales)
    return scales if cfg.sweep.baseline.rule == "search" else scales[: cfg.sweep.baseline.search_scales]


def search_runs(cfg: RunConfig, scale: int) -> int:
    """Search trials of one baseline at ``scale``: the first round of a search (the edge rule may add up to
    :func:`edge_runs`), or a larger scale's ``local_points`` LRs."""
    return baseline_tuning.budget(cfg) if scale in searched_scales(cfg) else cfg.sweep.baseline.local_points


def edge_runs(cfg: RunConfig, scale: int) -> int:
    """The most search trials the edge rule adds to one baseline at ``scale``: ``sweep.baseline.lr_widen`` rounds of
    the TPE budget, or of one LR under ``sweep.baseline.grid``; none at a scale that runs local LRs."""
    if scale not in searched_scales(cfg):
        return 0
    return cfg.sweep.baseline.lr_widen * (1 if cfg.sweep.baseline.grid else baseline_tuning.budget(cfg))


def planned_search(cfg: RunConfig, sweep: str, kind: str, scale: int, model_cfg) -> list[PlannedTrial]:
    """The search trials of baseline ``kind`` at ``scale`` (its matched shape ``model_cfg``) as planned runs."""
    mode = "local" if scale not in searched_scales(cfg) else "grid" if cfg.sweep.baseline.grid else "hp"
    return [PlannedTrial(sweep, "search", model_cfg, baseline_tuning.search_tokens(cfg),
                         baseline_tuning.search_training_seed(cfg), cfg.train.batch_size, int(scale),
                         f"{mode}-{kind}-w{scale}-{i}") for i in range(search_runs(cfg, scale))]


def size(model_cfg, vocab: int) -> float:
    """The rule's x: the baseline's non-embedding parameter count."""
    return float(param_count(model_cfg, vocab)["non_embedding"])


def local_lrs(center: float, points: int, factor: float) -> list[float]:
    """``points`` LRs center f^k, k = -(points-1)/2 .. (points-1)/2 (ascending)."""
    if not (center > 0 and math.isfinite(center)):
        raise ValueError(f"baseline rule: the extrapolated LR must be positive and finite, got {center}")
    return [center * factor ** (k - (points - 1) / 2) for k in range(points)]


def local_search(cfg: RunConfig, searched: Mapping[float, Mapping[str, float]], size_: float) -> dict:
    """What a larger scale of size ``size_`` runs under rule 'extrapolate', from ``searched`` (size of each searched
    scale -> its best values, ``baseline_tuning.tune``'s info["best"]): {"fit", "lr_hat", "lrs", "warmup_frac"
    (of the largest searched scale)}."""
    fit = fits.fit_power_law(list(searched), [float(v["optim.lr"]) for v in searched.values()])
    lr_hat = float(fits.predict(fit, size_))
    b = cfg.sweep.baseline
    return {"fit": fit, "lr_hat": lr_hat, "lrs": local_lrs(lr_hat, b.local_points, b.local_factor),
            "warmup_frac": float(searched[max(searched)]["optim.warmup_frac"])}


def describe(cfg: RunConfig) -> str:
    """One line: the rule and which scales it searches."""
    b, searched = cfg.sweep.baseline, searched_scales(cfg)
    first = f"{len(b.grid)} grid LRs" if b.grid else f"{baseline_tuning.budget(cfg)} TPE trials"
    if b.rule == "search":
        return f"rule 'search': {first} per (baseline, scale) at every scale"
    rest = [s for s in sorted(cfg.sweep.scales) if s not in searched]
    return (f"rule 'extrapolate': {first} at scales {', '.join(map(str, searched))}; a power law of the best LR in "
            f"non-embedding params, checked by {b.local_points} LRs x{b.local_factor:g} apart at "
            f"{', '.join(map(str, rest)) or 'no other scale'}")


def search_lr(cfg: RunConfig, kind: str, scale: int, model_over: dict, size_: float,
              searched: MutableMapping[float, dict], sdir: Path, group: str,
              tags: list[str]) -> tuple[pd.DataFrame, dict]:
    """The LR search of baseline ``kind`` at ``scale`` (matched shape ``model_over``, non-embedding params ``size_``)
    under the rule, called for the scales in ascending order: a searched scale runs ``baseline_tuning.tune`` and adds
    its best to ``searched``; a larger one runs :func:`local_search`'s LRs (:class:`NoExtrapolation` without a fit).
    (every trial, info as ``baseline_tuning.tune``'s plus "rule" and, when extrapolated, "fit", "lr_hat", ...)."""
    if scale in searched_scales(cfg):
        df, info = baseline_tuning.tune(cfg, kind, scale, model_over, sdir, group, tags)
        if math.isfinite(info["best_lr"]):
            searched[size_] = info["best"]
        return df, {**info, "rule": "searched"}
    try:
        loc = local_search(cfg, searched, size_)
    except ValueError as e:
        raise NoExtrapolation(f"rule 'extrapolate': no LR for {kind} at scale {scale}: {e}") from None
    df, info = baseline_tuning.grid_search(cfg, kind, scale, model_over, sdir, group, tags, lrs=loc["lrs"],
                                           warmup_frac=loc["warmup_frac"], mode="local")
    return df, {**info, "rule": "extrapolated", "size": size_, "fit": {k: loc["fit"][k] for k in ("a", "b", "r2")},
                "lr_hat": loc["lr_hat"], "local_lrs": loc["lrs"]}


def scale_line(scale: int, info: Mapping) -> str:
    """report.md's line of one extrapolated scale: the fit, the extrapolated LR, the local LRs and the best (or why
    it has none)."""
    if "fit" not in info:
        return f"N={scale}: no LR - {info.get('error', 'not run')}"
    f = info["fit"]
    best = f"best {info['best_lr']:.3g}" if math.isfinite(info["best_lr"]) else "every local trial failed or diverged"
    return (f"N={scale}: LR extrapolated to {info['lr_hat']:.3g} at P = {info['size']:.4g} non-embedding params "
            f"(eta* = {f['a']:.3g} P^-{f['b']:.3f}, r2 {f['r2']:.3f}); local LRs "
            f"{', '.join(f'{v:.3g}' for v in info['local_lrs'])}; {best}")
