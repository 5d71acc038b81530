"""muP coordinate check sweep (in-process, no Ray): measure with :mod:`ptsweep.sweeps.coords`, then write
``coords.csv``, ``slopes.csv``, ``summary.json`` (a verdict per muP variant; the headline one is the first of
``MUP_VARIANTS``) and the figures under ``<out_dir>/<study>/<model>/``; ``strict``: a failed verdict exits 1.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ptsweep.config import RunConfig, to_dict
from ptsweep.io import write_json
from ptsweep.parametrization import MUP_VARIANTS
from ptsweep.sweeps.coords import (anchor_of, checked_scaling, collect, run_overrides, seeds_at, slopes, sp_summary,
                                   verdict)
from ptsweep.reports.outputs import log_summary
from ptsweep.trials.trial_plan import PlannedTrial, shape_cache

SWEEP = "coord-check"


def plot(coords: pd.DataFrame, folder: Path, model_name: str) -> list[Path]:
    """One PNG per (iteration, statistic): panels rows = quantity, columns = step, SP and muP lines in each."""
    from ptsweep.analysis.plots import plot_coord_check

    paths = []
    what = "MFVI iteration" if model_name == "pt" else "layer application"
    for it in sorted(coords["iteration"].unique()):
        d = coords[coords["iteration"] == it]
        label = f"{what} {it}" if it > 0 else "embedding / head"
        deltas = d[d["step"] > 0].drop(columns=["value"]).rename(columns={"delta": "value"})
        for stat, g, size in (("value", d, "mean |x_t|"), ("delta", deltas, "mean |x_t - x_0|")):
            if g.empty:  # no steps: no deltas
                continue
            title = f"{model_name.upper()} coordinate check, {label}: {size} vs width (flat = muP-correct)"
            paths.append(plot_coord_check(g[["parametrization", "quantity", "width", "step", "value"]],
                                          folder / f"coord_{stat}_it{it}.png", title=title))
    return paths


def run(cfg: RunConfig) -> Path:
    """Run the coordinate check for ``cfg.model`` and write ``<out_dir>/<study>/<model>/`` (module docstring)."""
    sweep_cfg = cfg.sweep
    model_name = cfg.model.name
    folder = Path(cfg.out_dir) / (sweep_cfg.study or "coord-check") / model_name
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    coords = collect(cfg)
    coords.to_csv(folder / "coords.csv", index=False)
    table = slopes(coords)
    table.to_csv(folder / "slopes.csv", index=False)
    cc = sweep_cfg.coord_check
    scaling = checked_scaling(cfg)
    variants = [p for p in MUP_VARIANTS if p in cc.parametrizations]
    verdicts = {p: verdict(table, cc.tolerance, model_name, scaling, parametrization=p) for p in variants}
    headline = variants[0] if variants else None
    result = verdicts[headline] if headline else None
    images = plot(coords, folder, model_name) if cc.plots else []
    summary = {
        "model": model_name,
        "verdict": ("pass" if result["pass"] else "fail") if result else "n/a (mup not measured)",
        "verdict_of": headline,
        "mup": result,
        "verdicts": {p: ("pass" if v["pass"] else "fail") for p, v in verdicts.items()},
        **({"mup_paper": verdicts["mup_paper"]} if headline == "mup" and "mup_paper" in verdicts else {}),
        "sp_max_delta_slope_per_quantity": sp_summary(table),
        "settings": {"widths": list(cc.widths), "seeds": cc.seeds, "anchor": anchor_of(cfg).get("model.base_width"),
                     "seeds_per_width": {int(w): seeds_at(cfg, w) for w in cc.widths}, "steps": cc.steps, "lr": cc.lr,
                     "schedule": cc.schedule.value,
                     "measure_steps": list(cc.measure_steps) or "all",
                     "batch_size": cc.batch_size or cfg.train.batch_size,
                     "seq_len": cfg.data.seq_len, "parametrizations": list(cc.parametrizations),
                     "tolerance": cc.tolerance, "model": to_dict(cfg.model)},
        "slopes": table.replace({np.nan: None}).to_dict(orient="records"),
        "images": [p.name for p in images],
        "wall_s": time.perf_counter() - t0,
    }
    write_json(folder / "summary.json", summary)
    note = log_summary(cfg, folder, "coord-check", {"slopes": table}, {p.stem: p for p in images},
                       {"verdict": summary["verdict"]}, tags=["sweep=coord-check", f"model={model_name}"])
    if note and cfg.tracker.mode != "disabled":
        print(f"coord-check: {note}", file=sys.stderr)
    if result:
        w = result["worst"]
        where = f"widths {min(cc.widths)}-{max(cc.widths)}" + (f", {scaling}" if scaling else "")
        if model_name == "pt" and headline == "mup_sp":
            where += f", anchor {summary['settings']['anchor']}"
        print(f"coord-check {model_name}: {headline} {summary['verdict'].upper()} ({where}; tolerance {cc.tolerance}; "
              f"{result['n_failed']}/{result['n_checked']} slopes outside; worst {w['stat']} of {w['quantity']} "
              f"iteration {w['iteration']} step {w['step']}: slope {w['slope']:+.2f})")
    if cc.strict and result is not None and not result["pass"]:
        raise SystemExit(1)
    return folder


def planned_trials(cfg: RunConfig) -> list[PlannedTrial]:
    """Every measured run (``coords.run_overrides``; ``trial_plan``): coord_check.steps steps of
    coord_check.batch_size sequences. The check runs in-process on the CPU."""
    cc, model = cfg.sweep.coord_check, shape_cache(cfg)
    batch = cc.batch_size or cfg.train.batch_size
    return [PlannedTrial(SWEEP, "final", model({k: v for k, v in ov.items() if k != "seed"}),
                         float(cc.steps * batch * cfg.data.seq_len), int(ov["seed"]), batch, int(ov["model.width"]),
                         f"{ov['model.parametrization']}-w{ov['model.width']}-s{ov['seed']}")
            for ov in run_overrides(cfg)]
