"""The lr-transfer study's trial plan (``sweeps.lr_transfer`` runs it): the LR and weight grids, the trials of stages
1 and 2, and which LR-study runs double as the weight study's point at the default weight."""

from __future__ import annotations

import numpy as np

from ptsweep.config import RunConfig, anchor_at, with_overrides
from ptsweep.parametrization import MUP_VARIANTS
from ptsweep.trials.trial_plan import PlannedTrial, shape_cache

LR_KEY = "optim.lr"
SWEEP = "lr-transfer"
NOT_SHAPE = (LR_KEY, "seed", "train.tokens")
"""Overrides of a trial that leave its model config as it is."""


def weight_label(key: str) -> str:
    """Label prefix of the weight study's trials: model.w_attn -> "wattn" (the notebook reads "wattn-" rows)."""
    return key.split(".", 1)[1].replace("_", "")


def lr_grid(cfg: RunConfig, parametrization: str) -> list[float]:
    """The log-spaced LR grid of a parametrization (``lr_transfer.sp_grid_range`` for SP and 'mup_sp' when set),
    rounded to 4 significant digits for readable trial keys."""
    lt = cfg.sweep.lr_transfer
    lo, hi = lt.sp_grid_range if parametrization in ("sp", "mup_sp") and lt.sp_grid_range else lt.grid_range
    return [float(f"{x:.4g}") for x in np.geomspace(lo, hi, lt.grid_points)]


def weight_lr(cfg: RunConfig) -> float:
    return float(cfg.sweep.lr_transfer.weight_lr or cfg.optim.lr)


def trial_tokens(cfg: RunConfig) -> float:
    """Token budget of every trial: sweep.lr_transfer.tokens, 0 = train.tokens."""
    return float(cfg.sweep.lr_transfer.tokens or cfg.train.tokens)


def weight_widths(cfg: RunConfig) -> list[int]:
    """Widths of the weight study: sweep.lr_transfer.weight_widths, [] = the study's widths."""
    lt = cfg.sweep.lr_transfer
    return list(lt.weight_widths or lt.widths)


def _common(cfg: RunConfig) -> dict:
    return {"model.scaling": cfg.sweep.lr_transfer.scaling, "train.tokens": trial_tokens(cfg)}


def _label(cfg: RunConfig, study: str, par: str, width: int) -> str:
    """The label of a group's trials (every value and seed of one (study, parametrization, width))."""
    prefix = {"lr": "lr", "control": "ctrl"}.get(study) or weight_label(cfg.sweep.lr_transfer.weight_key)
    return f"{prefix}-{par}-w{width}"


def _anchor(cfg: RunConfig) -> dict:
    """'mup_sp''s anchor: SP at the study's smallest width (its tuning width), muP beyond ({} without 'mup_sp')."""
    lt = cfg.sweep.lr_transfer
    return anchor_at(cfg, min(lt.widths), {"model.scaling": lt.scaling}) if "mup_sp" in lt.parametrizations else {}


def _trial(cfg: RunConfig, study: str, par: str, width: int, x: float, seed: int, anchor: dict) -> tuple[dict, str]:
    """(overrides, label) of one trial; study "lr" varies optim.lr, "control" the same for the control model
    (``sweep.lr_transfer.control`` overrides), "weight" varies sweep.lr_transfer.weight_key; ``anchor``:
    :func:`_anchor`, composed once per stage."""
    ov = {**_common(cfg), "model.parametrization": par, "model.width": int(width), "seed": int(seed)}
    if par == "mup_sp":
        ov.update(anchor)
    if study == "lr":
        ov[LR_KEY] = float(x)
    elif study == "control":
        ov.update(cfg.sweep.lr_transfer.control, **{LR_KEY: float(x)})
    else:
        ov[LR_KEY] = weight_lr(cfg)
        ov[cfg.sweep.lr_transfer.weight_key] = float(x)
    return ov, _label(cfg, study, par, width)


def _groups(cfg: RunConfig) -> list[tuple[str, str, int, list[float]]]:
    """(study, parametrization, width, grid) of every group of the study, narrowest first."""
    lt = cfg.sweep.lr_transfer
    wpar = weight_parametrization(cfg)
    out = []
    for width in sorted(lt.widths):
        for par in lt.parametrizations:
            out.append(("lr", par, int(width), lr_grid(cfg, par)))
        if lt.control and wpar:  # the control beside muP PT (the first muP variant), over its LR grid
            out.append(("control", wpar, int(width), lr_grid(cfg, wpar)))
        if lt.weight_grid and wpar and width in weight_widths(cfg):
            grid = [float(v) for v in lt.weight_grid]
            if weight_lr(cfg) in lr_grid(cfg, wpar):  # the default weight's run is the LR study's: not run twice
                grid = [v for v in grid if v != default_weight(cfg)]
            out.append(("weight", wpar, int(width), grid))
    return out


def weight_parametrization(cfg: RunConfig) -> str | None:
    """The parametrization of the weight study: the first muP variant of the study (information weights are muP
    hyperparameters; :data:`~ptsweep.parametrization.MUP_VARIANTS` order), None without one."""
    return next((p for p in MUP_VARIANTS if p in cfg.sweep.lr_transfer.parametrizations), None)


def default_weight(cfg: RunConfig) -> float:
    """The model's value of the weight study's weight (``sweep.lr_transfer.weight_key``)."""
    return float(getattr(cfg.model, cfg.sweep.lr_transfer.weight_key.split(".", 1)[1]))


def stage1_trials(cfg: RunConfig) -> tuple[list[dict], list[str]]:
    """Stage 1: every grid value of every group, seed ``cfg.seed``. Every plan starts here, so an invalid key of the
    control's overrides is the schema's one-line error here, before any trial runs."""
    if cfg.sweep.lr_transfer.control:
        with_overrides(cfg, dict(cfg.sweep.lr_transfer.control))
    anchor = _anchor(cfg)
    return _unzip(_trial(cfg, study, par, width, x, cfg.seed, anchor) for study, par, width, grid in _groups(cfg)
                  for x in grid)


def _unzip(pairs) -> tuple[list[dict], list[str]]:
    """(overrides of every trial, their labels) of (overrides, label) pairs."""
    pairs = list(pairs)
    return [ov for ov, _ in pairs], [lab for _, lab in pairs]


def refine_values(cfg: RunConfig, df1) -> dict[tuple[str, str, int], list[float]]:
    """Stage 2's values per (study, parametrization, width): the ``lr_transfer.refine_top`` lowest finite stage-1
    losses (ties broken by the smaller value; every value when ``lr_transfer.refine_top`` = 0; the weight study's
    default weight counts through :func:`default_weight_rows`)."""
    import pandas as pd

    out = {}
    for study, par, width, grid in _groups(cfg):
        if cfg.sweep.lr_transfer.refine_top == 0:
            out[(study, par, width)] = list(grid)
            continue
        g = df1[df1["label"] == _label(cfg, study, par, width)]
        if study == "weight":
            g = pd.concat([g, default_weight_rows(df1[df1["model.width"] == width], cfg)], ignore_index=True)
        xc = cfg.sweep.lr_transfer.weight_key if study == "weight" else LR_KEY
        g = pd.DataFrame({"loss": g["val_loss"].astype(float), "x": g[xc].astype(float)})
        best = g[np.isfinite(g["loss"])].sort_values(["loss", "x"]).head(cfg.sweep.lr_transfer.refine_top)
        out[(study, par, width)] = sorted(best["x"].tolist())
    return out


def point_trial(cfg: RunConfig, study: str, par: str, width: int, x: float, seed: int) -> tuple[dict, str]:
    """(overrides, label) of one trial of the plan outside a plan (study "lr", "control" or "weight" at value
    ``x``), anchored as the plan's are: experiments/lr-transfer/weight_points.py runs single weight points this way."""
    return _trial(cfg, study, par, width, x, seed, _anchor(cfg))


def stage2_trials(cfg: RunConfig, df1) -> tuple[list[dict], list[str]]:
    """Stage 2: seeds ``seed+1 .. seed+lr_transfer.seeds-1`` at the values chosen by :func:`refine_values`."""
    pairs, anchor = [], _anchor(cfg)
    values = refine_values(cfg, df1)
    for study, par, width, _ in _groups(cfg):
        xs = values[(study, par, width)]
        if study == "weight" and weight_lr(cfg) in values.get(("lr", par, width), []):
            xs = [x for x in xs if x != default_weight(cfg)]  # the LR study's seeds at weight_lr are these
        pairs += [_trial(cfg, study, par, width, x, cfg.seed + s, anchor)
                  for s in range(1, cfg.sweep.lr_transfer.seeds) for x in xs]
    return _unzip(pairs)


def fill_base(df, cfg: RunConfig):
    """The LR study's rows ran at the model's default weight: fill that column (and the LR where absent)."""
    wk = cfg.sweep.lr_transfer.weight_key
    df[wk] = df[wk].fillna(default_weight(cfg)) if wk in df else default_weight(cfg)
    df[LR_KEY] = df[LR_KEY].fillna(weight_lr(cfg)) if LR_KEY in df else weight_lr(cfg)
    return df


def default_weight_rows(df, cfg: RunConfig):
    """The LR study's runs that are the weight study's point at the default weight: the weight study's
    parametrization, at its widths, at LR ``weight_lr`` (their weight column filled by :func:`fill_base`)."""
    if LR_KEY not in df:
        return df.iloc[:0]
    pick = (df["label"].str.startswith("lr-") & (df["model.parametrization"] == weight_parametrization(cfg))
            & df["model.width"].isin(weight_widths(cfg))
            & np.isclose(df[LR_KEY].astype(float), weight_lr(cfg), rtol=1e-9, atol=0))
    return df[pick]


def planned_trials(cfg: RunConfig) -> list[PlannedTrial]:
    """Every run of both stages (``trial_plan``): stage 1 ("search") exactly; stage 2 ("final") as
    :func:`stage2_trials` chooses it when the values nearest the config's own are the best (its count depends on
    stage 1 only through failed trials and the reuse of the default weight's runs)."""
    import pandas as pd

    t1, l1 = stage1_trials(cfg)
    key = cfg.sweep.lr_transfer.weight_key
    df1 = fill_base(pd.DataFrame([{**ov, "label": lab} for ov, lab in zip(t1, l1)]), cfg)
    df1["val_loss"] = [abs(np.log(r[key] / default_weight(cfg))) if not lab.startswith(("lr-", "ctrl-"))
                       else abs(np.log(r[LR_KEY] / weight_lr(cfg))) for lab, (_, r) in zip(l1, df1.iterrows())]
    t2, l2 = stage2_trials(cfg, df1)
    model, tokens = shape_cache(cfg), trial_tokens(cfg)
    return [PlannedTrial(SWEEP, stage, model({k: v for k, v in ov.items() if k not in NOT_SHAPE}), tokens,
                         int(ov["seed"]), cfg.train.batch_size, int(ov["model.width"]), lab)
            for stage, trials, labels in (("search", t1, l1), ("final", t2, l2)) for ov, lab in zip(trials, labels)]
