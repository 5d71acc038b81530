"""verify-transfer: random-search check that the transferred point S is top-p at a larger width ([S] §3.1, spec §10).

    S          = the 7 values of transfer.yaml (sweep.transfer_file, default <out_dir>/tune-small/transfer.yaml)
    n_required = ceil(log(alpha) / log(1 - p))               (analysis.stats.n_required; alpha = p = 0.05 -> 59)
    n_run      = max(n_required, sweep.n)
    S'_j       = S * (1 + u_j), u_j ~ U[-perturb, +perturb]^7  (analysis.stats.perturb, seeded by sweep.search_seed)

Runs, all at model.width = sweep.width with the same budget, no early stopping: S with sweep.seeds seeds
(seed = cfg.seed + i: the seed-noise band) and the n_run perturbed points (seed = cfg.seed, the same data order and
init seed as S's first run). Outputs in ``<out_dir>/<study>/`` (study = sweep.study or "verify-transfer"):

    results.parquet / .csv   analysis.stats.rank_table: trial, the 7 values, distance D, val_loss, rel_increase,
                             rank, status, error (base = mean of its seeds, is_base = true)
    trials.parquet / .csv    every run (base seeds included) as run
    summary.json             analysis.stats.verdict(...) + n_required, n_run, settings, transfer provenance
    fig1a_distance.png, fig1b_rank.png   (analysis.plots, [S] Figure 1)
Resume: a fixed list of trials with a ledger (``sweeps.common.run_trials``): re-running skips finished trials.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ptsweep.analysis import plots, stats
from ptsweep.config import TRANSFER_KEYS, RunConfig, with_overrides
from ptsweep.sweeps.common import (SweepError, log_summary, ray_session, read_transfer, run_trials, save_table,
                                   study_name, study_path, sweep_tags, write_json)

SWEEP = "verify-transfer"


def plan(cfg: RunConfig, base7: dict[str, float]) -> tuple[list[dict], list[str], int, int]:
    """(trial overrides, labels, n_required, n_run): sweep.seeds base runs first, then the n_run perturbed points."""
    sw = cfg.sweep
    n_req = stats.n_required(sw.alpha, sw.p)
    n_run = max(n_req, sw.n)
    points = stats.perturb(base7, n_run, sw.perturb, seed=sw.search_seed)
    trials, labels = [], []
    for i in range(sw.seeds):
        trials.append({**base7, "model.width": sw.width, "seed": cfg.seed + i})
        labels.append(f"base-s{i}")
    for j, pt in enumerate(points):
        trials.append({**pt, "model.width": sw.width, "seed": cfg.seed})
        labels.append(f"p{j:03d}")
    return trials, labels, n_req, n_run


def run(cfg: RunConfig) -> Path:
    """Run (or resume) the check; write the tables, summary.json and Figure 1 (a, b); return the study folder."""
    if cfg.model.name != "pt":
        raise SweepError(f"model.name: verify-transfer checks PT's transferred hyperparameters, got {cfg.model.name}")
    t0 = time.time()
    base7, provenance, tpath = read_transfer(cfg)
    name = study_name(cfg, SWEEP)
    sdir = study_path(cfg, SWEEP)
    sdir.mkdir(parents=True, exist_ok=True)
    sw = cfg.sweep
    with_overrides(cfg, {"model.width": sw.width})  # a width PT cannot build fails here, with the key named
    trials, labels, n_req, n_run = plan(cfg, base7)
    tags = sweep_tags(SWEEP, with_overrides(cfg, {"model.width": sw.width}).model)
    with ray_session(cfg.ray):
        df = run_trials(cfg, trials, sdir, "runs", labels=labels, tags=tags, group=name.replace("/", "-"))
    df = df.rename(columns={"label": "trial"})
    save_table(df, sdir, "trials")

    is_base = df["trial"].str.startswith("base-")
    base_df, pert = df[is_base], df[~is_base].reset_index(drop=True)
    base_losses = [x for x in base_df["val_loss"] if math.isfinite(x)]
    settings = {"width": sw.width, "alpha": sw.alpha, "p": sw.p, "n": sw.n, "perturb": sw.perturb, "seeds": sw.seeds,
                "perturb_seed": sw.search_seed, "seed": cfg.seed, "tokens": cfg.train.tokens,
                "transfer_file": str(tpath), "transfer_provenance": provenance, "base": base7}
    images = {}
    if base_losses:
        table = stats.rank_table(pert, base7, base_losses, keys=list(TRANSFER_KEYS), loss_col="val_loss")
        table.loc[table["is_base"], "trial"] = f"base (mean of {len(base_losses)} seed(s))"
        table.loc[table["is_base"], "status"] = "ok"
        v = stats.verdict(base_losses, pert["val_loss"].tolist(), alpha=sw.alpha, p=sw.p)
        images["fig1a_distance"] = plots.plot_distance_vs_increase(
            table, sdir / "fig1a_distance.png", title=f"Transfer to width {sw.width}: distance vs loss increase")
        images["fig1b_rank"] = plots.plot_rank_curve(
            table, sdir / "fig1b_rank.png", title=f"Transfer to width {sw.width}: rank of the base point")
    else:  # the base point failed with every seed: nothing to compare against
        table = pert.assign(distance=[stats.distance({k: r[k] for k in TRANSFER_KEYS}, base7)
                                      for _, r in pert.iterrows()],
                            rel_increase=np.nan, rank=np.nan, is_base=False)
        v = {"verdict": "fail", "statement": f"FAIL: the base point failed with all {sw.seeds} seed(s) "
                                              f"({'; '.join(base_df['error'].astype(str))})"}
    cols = ["rank", "trial", *TRANSFER_KEYS, "distance", "val_loss", "rel_increase", "status", "error", "is_base",
            "seed", "steps", "tokens", "trial_key"]
    table = table[[c for c in cols if c in table.columns]]
    save_table(table, sdir, "results")

    summary = {**v, "n_required": n_req, "n_run": n_run, "n_perturbed_run": int(len(pert)),
               "base_losses": [float(x) for x in base_df["val_loss"]], "settings": settings, "study": name,
               "status_counts": {str(k): int(c) for k, c in df["status"].value_counts().items()},
               "plots": sorted(Path(p).name for p in images.values()), "wall_s": time.time() - t0}
    note = log_summary(cfg, sdir, SWEEP, {"results": table, "trials": df}, images,
                       {"verdict": summary["verdict"], "n_required": n_req, "n_run": n_run}, tags=[f"sweep={SWEEP}"])
    summary["notes"] = [note] if note else []
    write_json(sdir / "summary.json", summary)
    print(f"verify-transfer: {summary['statement']}")
    return sdir


def results_frame(study_dir: Path) -> pd.DataFrame:
    """The results table of a finished study (for reports/notebooks)."""
    return pd.read_parquet(Path(study_dir) / "results.parquet")
