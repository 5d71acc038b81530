"""lr-horizon: does the optimal LR move with the training budget? An LR grid x budgets x seeds at the tuning width for
PT and one baseline matched to it (``sweep.lr_horizon``), with the baselines' grid edge rule per (model, budget), all
groups' edge rounds trained together. Analysis and report: ``reports.lr_horizon_report`` (the fit eta*(T) = eta0 (T /
T0)^-beta); writes the trials table, summary.json, horizon.json (read by ``sweep.horizon.results``) and report.md.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pandas as pd

from ptsweep.config import RunConfig, anchor_at, with_overrides
from ptsweep.io import write_json
from ptsweep.sweeps import baseline_tuning
from ptsweep.trials.ledger import with_ledger_metrics
from ptsweep.reports.outputs import open_study, publish, require_pt, save_table
from ptsweep.trials.runner import run_trials, sweep_session, warm_data

SWEEP = "lr-horizon"
PREDICTED = "-predicted"
PT_ONLY = "lr-horizon starts from the PT config (model=pt) and adds its baseline, got {name}"


def tuning_width(cfg: RunConfig) -> int:
    """PT's width in the study: sweep.lr_horizon.width, 0 = model.width."""
    return int(cfg.sweep.lr_horizon.width or cfg.model.width)


def anchor_width(cfg: RunConfig) -> int:
    """Where 'mup_sp' is anchored in the study: sweep.lr_horizon.anchor, 0 = the study's width (SP there)."""
    return int(cfg.sweep.lr_horizon.anchor or tuning_width(cfg))


def pt_shape(cfg: RunConfig) -> dict:
    """PT's overrides: the study's width and paradigm, and 'mup_sp''s base shape moved to sweep.lr_horizon.anchor
    (0: the study's width, SP there)."""
    shape = {"model.width": tuning_width(cfg), "model.scaling": cfg.sweep.lr_horizon.scaling or cfg.model.scaling}
    if cfg.model.parametrization == "mup_sp":
        shape.update(anchor_at(cfg, anchor_width(cfg), shape))
    return shape


def shapes(cfg: RunConfig, vocab: int) -> dict[str, dict]:
    """Model -> its shape overrides: "pt", and the baseline matched to PT at the tuning width (when one is set)."""
    from ptsweep.models.sizing import match_shape
    from ptsweep.sweeps.scaling_curves import model_overrides

    out = {"pt": pt_shape(cfg)}
    kind = cfg.sweep.lr_horizon.baseline
    if kind:
        d = cfg.data
        mcfg = match_shape(kind, with_overrides(cfg, out["pt"]).model, vocab, d.seq_len, d.mask_prob,
                           cfg.sweep.match)
        out[kind] = model_overrides(mcfg)
    return out


def grid(cfg: RunConfig, model: str) -> list[float]:
    """The LR grid of ``model`` before any edge round."""
    lh = cfg.sweep.lr_horizon
    return list(lh.grid if model == "pt" else lh.baseline_grid)


def label(model: str, steps: int, predicted: bool = False) -> str:
    """The label of one (model, budget)'s grid trials, or of PT's runs at the LRs ``sweep.lr_horizon.predict``."""
    return f"{model}-T{steps}{PREDICTED if predicted else ''}"


def with_label_parts(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the columns model, steps and predicted that its labels (:func:`label`) carry."""
    parts = df["label"].str.extract(rf"^(?P<model>.+?)-T(?P<steps>\d+)(?P<predicted>{PREDICTED})?$")
    return df.assign(model=parts["model"], steps=parts["steps"].astype(int), predicted=parts["predicted"].notna())


def plan(cfg: RunConfig, model_shapes: dict[str, dict], lrs: dict[tuple[str, int], list[float]]) \
        -> tuple[list[dict], list[str]]:
    """(overrides, labels) of every trial: each (model, budget) of ``lrs`` at each of its LRs and every seed, PT's
    first, then PT at the longest budget at each of :func:`predicted_lrs`, then the baseline's."""
    long = max(steps for _, steps in lrs)
    grids = [(model, steps, values, False) for (model, steps), values in lrs.items()]
    groups = ([g for g in grids if g[0] == "pt"] + [("pt", long, predicted_lrs(cfg, lrs[("pt", long)]), True)]
              + [g for g in grids if g[0] != "pt"])
    trials, labels = [], []
    for model, steps, values, predicted in groups:
        tokens = float(steps * cfg.train.batch_size * cfg.data.seq_len)  # steps of train.batch_size blocks
        for lr in values:
            for s in range(cfg.sweep.lr_horizon.seeds):
                trials.append({**model_shapes[model], "train.tokens": tokens, "seed": cfg.seed + s,
                               "optim.lr": float(lr)})
                labels.append(label(model, steps, predicted))
    return trials, labels


def predicted_lrs(cfg: RunConfig, grid_lrs: list[float]) -> list[float]:
    """``sweep.lr_horizon.predict``'s LRs that the longest budget's grid does not run (those it does are read there)."""
    return [float(x) for x in cfg.sweep.lr_horizon.predict if not any(math.isclose(x, g) for g in grid_lrs)]


def seed_means(g: pd.DataFrame) -> pd.DataFrame:
    """One row per LR of one group's trials for ``baseline_tuning.lr_edge``: the seed-mean val_loss (inf unless every
    seed is ok), status "ok" (every seed ok), "diverged" (ok or diverged), "missing" (a seed not in the results
    folder yet) or "failed"."""
    rows = []
    for lr, gl in g.groupby("optim.lr", sort=True):
        st = set(gl["status"])
        status = ("ok" if st == {"ok"} else "diverged" if st <= {"ok", "diverged"} else
                  "missing" if "missing" in st else "failed")
        v = gl["val_loss"].astype(float)
        rows.append({"optim.lr": float(lr), "status": status,
                     "val_loss": float(v.mean()) if status == "ok" else float("inf")})
    return pd.DataFrame(rows, columns=["optim.lr", "status", "val_loss"])


def run_grids(cfg: RunConfig, model_shapes: dict[str, dict], sdir: Path, tags: list[str]) \
        -> tuple[pd.DataFrame, dict[tuple[str, int], list[float]]]:
    """Every group's grid, then the edge rounds (module docstring): (every trial, the LRs run per group)."""
    lh = cfg.sweep.lr_horizon
    lrs = {(m, int(t)): grid(cfg, m) for m in model_shapes for t in sorted(lh.steps)}
    for rnd in range(lh.lr_widen + 1):
        trials, labels = plan(cfg, model_shapes, lrs)
        df = run_trials(cfg, trials, sdir, "grid" if rnd == 0 else f"edge{rnd}", labels=labels, tags=tags)
        added = False
        for (m, t), run in lrs.items():
            edge = baseline_tuning.lr_edge(seed_means(df[df["label"] == label(m, t)]))
            nxt = baseline_tuning.next_edge_lr(edge, run, len(run) - len(grid(cfg, m)), lh.lr_widen)
            if nxt is not None:
                run.append(nxt)
                added = True
        if not added:
            break
    return df, lrs


def run(cfg: RunConfig) -> Path:
    """Run (or resume) the study and write its tables, summary.json, horizon.json and report.md; returns the study
    folder."""
    from ptsweep.reports import lr_horizon_report as rep

    require_pt(cfg, PT_ONLY)
    t0 = time.time()
    name, sdir = open_study(cfg, SWEEP)
    tags = [f"sweep={SWEEP}", f"width={tuning_width(cfg)}"]
    vocab = warm_data(cfg)
    with sweep_session(cfg, name, SWEEP, vocab):  # records kept in sweep.results, when set
        model_shapes = shapes(cfg, vocab)
        df, lrs = run_grids(cfg, model_shapes, sdir, tags)
    df = with_ledger_metrics(df, sdir)
    df = with_label_parts(df)
    save_table(df, sdir, "trials")
    result = rep.analyse(df, cfg, model_shapes)
    write_json(sdir / "horizon.json", rep.horizon_doc(result, cfg, name))
    summary = {"study": name, **result, "settings": settings(cfg, model_shapes, lrs), "n_trials": int(len(df)),
               "status_counts": {str(k): int(v) for k, v in df["status"].value_counts().items()},
               "wall_s": time.time() - t0, "notes": []}
    publish(cfg, sdir, SWEEP, summary, {"trials": df}, {}, {"n_trials": int(len(df))}, report=rep.markdown)
    print(rep.markdown(summary), end="")
    return sdir


def settings(cfg: RunConfig, model_shapes: dict[str, dict], lrs: dict[tuple[str, int], list[float]]) -> dict:
    """The study's settings as summary.json records them."""
    lh = cfg.sweep.lr_horizon
    return {"steps": sorted(lh.steps), "grid": list(lh.grid), "baseline": lh.baseline,
            "baseline_grid": list(lh.baseline_grid), "seeds": lh.seeds, "width": tuning_width(cfg),
            "anchor": anchor_width(cfg),
            "lr_widen": lh.lr_widen, "predict": list(lh.predict), "collapse_frac": lh.collapse_frac,
            "shapes": model_shapes,
            "lrs_run": {label(m, t): sorted(v) for (m, t), v in lrs.items()},
            "batch_size": cfg.train.batch_size, "seq_len": cfg.data.seq_len, "data": cfg.data.label,
            "schedule": cfg.optim.schedule, "warmup_frac": cfg.optim.warmup_frac, "match": str(cfg.sweep.match),
            "preset": cfg.preset}
