"""scaling-curves with ``sweep.transfer_from=grid``: PT's LR tuned on ``sweep.transfer_grid`` at the smallest scale
(at the comparison's budget, as a baseline's grid: ``baseline_tuning.grid_search``) and transferred untuned to every
wider one, the information weights the config's own (experiments/scaling/README.md).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ptsweep.config import RunConfig
from ptsweep.sweeps import baseline_tuning
from ptsweep.trials.trial_plan import PlannedTrial


def active(cfg: RunConfig) -> bool:
    """Whether this scaling-curves run tunes PT's LR on ``sweep.transfer_grid``."""
    return cfg.sweep.transfer_from == "grid" and "pt" in cfg.sweep.models


def tuning_width(cfg: RunConfig) -> int:
    """The width PT's LR is tuned at: the smallest of sweep.scales."""
    return int(min(cfg.sweep.scales))


def model_overrides(cfg: RunConfig, pt_scaling: str) -> dict:
    """PT at the tuning width in the (first) paradigm of the study."""
    return {"model.width": tuning_width(cfg), "model.scaling": pt_scaling}


def tune(cfg: RunConfig, pt_scaling: str, sdir: Path, group: str, tags: list[str]) -> tuple[pd.DataFrame, dict]:
    """The grid's trials (from the ledger when they ran, widened past an edge as a baseline's) and their result:
    (trials table with model and scale columns, info as ``baseline_tuning.grid_search``'s)."""
    width = tuning_width(cfg)
    df, info = baseline_tuning.grid_search(cfg, "pt", width, model_overrides(cfg, pt_scaling), sdir, group, tags,
                                           lrs=cfg.sweep.transfer_grid)
    return df.assign(model="pt", scale=width)[["model", "scale", *df.columns]], info


def apply(transferred: dict, provenance: dict, info: dict, cfg: RunConfig) -> None:
    """Put the grid's best LR into ``transferred`` and say where it came from in ``provenance`` (both in place);
    the LR is NaN when no grid trial finished, and PT's rows then fail with why."""
    transferred["optim.lr"] = float(info["best_lr"])
    provenance.update(source="grid", num_samples=int(info["n_trials"]), width=tuning_width(cfg),
                      grid=list(cfg.sweep.transfer_grid), edge=info.get("edge", ""),
                      note=f"optim.lr tuned on sweep.transfer_grid at width {tuning_width(cfg)} (the search seed, "
                           f"search_frac {cfg.sweep.baseline.search_frac:g} of the budget): "
                           f"{info['best_lr']:.3g}; the information weights are the config's own")
    if not math.isfinite(info["best_lr"]):
        provenance["error"] = "every PT grid trial failed or diverged"


def planned(cfg: RunConfig, sweep: str, model, pt_scaling: str) -> list[PlannedTrial]:
    """The grid's first round as planned search runs (``model``: trial_plan.shape_cache's builder)."""
    width, label = tuning_width(cfg), baseline_tuning.grid_label("pt", tuning_width(cfg))
    return [PlannedTrial(sweep, "search", model(model_overrides(cfg, pt_scaling)), baseline_tuning.search_tokens(cfg),
                         baseline_tuning.search_training_seed(cfg), cfg.train.batch_size, width, f"{label}-{i}")
            for i in range(len(cfg.sweep.transfer_grid))]
