"""Learning-rate (and information-weight) transfer study: does the optimum stay put across widths under muP (and move
under SP)? Two stages of fixed-list trials (``lr_transfer_plan``): stage 1 one seed over every group's grid, stage 2
more seeds at the best stage-1 values. Analysis (``analysis.transfer_drift``): per (parametrization, width) the
seed-averaged optimum with its plausible set, and the drift log2(x*(largest width) / x*(smallest width)) with a
bootstrap interval. Writes the trials table, optima.csv, summary.json and lr_transfer.png.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ptsweep import metric_keys
from ptsweep.trials import results
from ptsweep.analysis import basin, context_transfer
from ptsweep.analysis import transfer_drift as td
from ptsweep.config import RunConfig, compose, to_dict
from ptsweep.identity import trial_key
from ptsweep.io import write_json
from ptsweep.trials.ledger import with_ledger_metrics
from ptsweep.reports.outputs import log_summary, save_table, study_path, sweep_tags
from ptsweep.trials.ray_session import ray_session
from ptsweep.trials.runner import run_trials
from ptsweep.sweeps.lr_transfer_plan import (LR_KEY, default_weight_rows, fill_base, lr_grid, stage1_trials,
                                             stage2_trials, trial_tokens, weight_label, weight_lr,
                                             weight_parametrization, weight_widths)
from ptsweep.reports.lr_transfer_report import STUDIES, markdown, optima_table, plot

SWEEP = "lr-transfer"


def basin_and_cliff(curve: dict, unigram: float, rows, x_col: str) -> dict:
    """The 2 % basin, the [eta*/2, 2 eta*] window and two cliffs of one group's ``rows`` (``analysis.basin``): where
    the seed-mean loss exceeds the unigram, and where the seed-mean [MASK] context gain is <= 0."""
    x, y = curve["x"], curve["mean"]
    out = {"basin": basin.basin(x, y), "window": basin.window(x, y), "cliff": basin.cliff(x, y, unigram)}
    if out["basin"] and "context_gain" in rows:
        gain = rows.assign(cg=rows["context_gain"].astype(float)).groupby(x_col)["cg"].mean()
        out["context_cliff"] = basin.cliff(gain.index.to_numpy(float), -gain.to_numpy(), 0.0, out["basin"]["x_opt"])
    return out


def analyse(df, cfg: RunConfig) -> dict:
    """A ``transfer_drift.drift`` result per study in ``STUDIES`` (the gains, basin and best run at each optimum),
    the baselines, and the LR study's context-transfer checks (``"criteria"``)."""
    out: dict = td.baselines(df)
    weight_key = cfg.sweep.lr_transfer.weight_key
    for study, prefix, xc in (("lr", "lr-", LR_KEY), ("weight", weight_label(weight_key) + "-", weight_key),
                              ("control", "ctrl-", LR_KEY)):
        rows = df[df["label"].str.startswith(prefix)]
        if study == "weight" and len(rows):
            rows = pd.concat([rows, default_weight_rows(df, cfg)], ignore_index=True)
        if not len(rows):
            continue
        res = td.drift(rows, xc, width_col="model.width", param_col="model.parametrization", loss_col="val_loss",
                       seed_col="seed")
        for par, r in res.items():
            gp = rows[rows["model.parametrization"] == par]
            for w, o in r["per_width"].items():
                if o.get("x_opt") is None:
                    continue
                gw = gp[gp["model.width"] == w]
                o["gains"] = td.gains(gw, xc, o["x_opt"])
                o.update(basin_and_cliff(o["curve"], out.get("unigram_loss", math.nan), gw, xc))
                fin = gw[np.isfinite(gw["val_loss"].astype(float))]
                if len(fin):
                    b = fin.loc[fin["val_loss"].astype(float).idxmin()]
                    o["best_run"] = {k: (float(b[k]) if k in b and b[k] is not None else math.nan)
                                     for k in ("val_loss", "val_loss_se", "gain_over_unigram",
                                               "gain_over_unigram_se", "context_gain", "context_gain_se", xc,
                                               "seed")}
        out[study] = {"x_col": xc, "by_parametrization": res}
        if study == "lr":
            out["criteria"] = context_transfer.criteria(rows, res, x_col=xc)
    return out


def run(cfg: RunConfig) -> Path:
    """Run (or resume) the two-stage study and write its tables, plot and summary; returns the study folder."""
    t0 = time.perf_counter()
    sdir = study_path(cfg, SWEEP)
    sdir.mkdir(parents=True, exist_ok=True)
    tags = sweep_tags(SWEEP, cfg.model)
    with ray_session(cfg.ray):
        t1, l1 = stage1_trials(cfg)
        df1 = fill_base(run_trials(cfg, t1, sdir, "grid", labels=l1, tags=tags), cfg)
        t2, l2 = stage2_trials(cfg, df1)
        df2 = run_trials(cfg, t2, sdir, "seeds", labels=l2, tags=tags) if t2 else df1.iloc[:0]
    df1["stage"], df2["stage"] = 1, 2
    df = fill_base(pd.concat([df1, df2], ignore_index=True), cfg)
    df = with_ledger_metrics(df, sdir)
    save_table(df, sdir, "trials")
    result = analyse(df, cfg)
    opt = optima_table(result)
    if len(opt):
        opt.to_csv(sdir / "optima.csv", index=False)
    image = plot(df, result, cfg, sdir / "lr_transfer.png")
    summary = {
        "study": sdir.name,
        **{k: result.get(k) for k in ("unigram_loss", "unigram_loss_se", "unigram_loss_spread", "no_context_loss")},
        **{k: result.get(k, {}) for k in (*STUDIES, "criteria")},
        "optima": opt.to_dict("records"),
        "settings": _settings(cfg),
        "n_trials": int(len(df)),
        "n_stage1": int(len(df1)), "n_stage2": int(len(df2)),
        "status_counts": {str(k): int(v) for k, v in df["status"].value_counts().items()},
        "images": {"lr_transfer": Path(image).name} if image else {},
        "wall_s": time.perf_counter() - t0,
    }
    write_json(sdir / "summary.json", summary)
    print(markdown(result))
    log_summary(cfg, sdir, SWEEP, {"trials": df}, {"lr_transfer": image} if image else {},
                {k: v for k, v in summary.items() if k not in ("settings", "criteria", *STUDIES)},
                tags=[f"sweep={SWEEP}"])
    return sdir


def _settings(cfg: RunConfig) -> dict:
    """The study's settings as summary.json records them."""
    lt = cfg.sweep.lr_transfer
    return {"widths": list(lt.widths), "lr_grid": {p: lr_grid(cfg, p) for p in lt.parametrizations},
            "weight_key": lt.weight_key, "weight_grid": list(lt.weight_grid),
            "weight_widths": weight_widths(cfg), "weight_study_lr": weight_lr(cfg), "seeds": lt.seeds,
            "refine_top": lt.refine_top, "parametrizations": list(lt.parametrizations),
            "tokens": trial_tokens(cfg), "batch_size": cfg.train.batch_size,
            "seq_len": cfg.data.seq_len, "max_val_blocks": cfg.data.max_val_blocks,
            "schedule": cfg.optim.schedule, "warmup_frac": cfg.optim.warmup_frac,
            "scaling": lt.scaling, "data": cfg.data.name, "preset": cfg.preset,
            "weight_parametrizations": [p for p in [weight_parametrization(cfg)] if p],
            "control": dict(lt.control or {})}


def ledger_table(sdir: Path, cfg: RunConfig):
    """Every finished trial of a study folder that belongs to the study ``cfg`` describes (its trial keys), from the
    ledger: works while the study runs. Stage = 1 for seed ``cfg.seed``, else 2."""
    df = results.ledger_records(sdir)
    if df.empty:
        return df
    df = df.reindex(columns=list(dict.fromkeys([*df.columns, *metric_keys.LEDGER_KEYS])))  # a key no record has
    df["val_loss"] = pd.to_numeric(df["val_loss"], errors="coerce").fillna(math.inf)
    df[list(metric_keys.LEDGER_KEYS)] = df[list(metric_keys.LEDGER_KEYS)].apply(pd.to_numeric, errors="coerce")
    df["stage"] = np.where(df["seed"] == cfg.seed, 1, 2)
    df = fill_base(df, cfg)
    # only this configuration's trials (a folder may also hold records of another grid or model version)
    base = to_dict(cfg)
    t1, l1 = stage1_trials(cfg)
    keys = {trial_key(base, ov, lab) for ov, lab in zip(t1, l1)}
    t2, l2 = stage2_trials(cfg, df[df["trial_key"].isin(keys)])
    keys |= {trial_key(base, ov, lab) for ov, lab in zip(t2, l2)}
    return df[df["trial_key"].isin(keys)].reset_index(drop=True)


def main(argv: list[str] | None = None) -> None:
    """``python -m ptsweep.sweeps.lr_transfer STUDY_DIR [overrides]``: analyse the finished trials of a study folder
    (also while it runs) and print the markdown tables; writes ``partial_optima.csv`` and
    ``partial_lr_transfer.png``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    sdir, overrides = Path(argv[0]), argv[1:]
    cfg = compose(overrides)
    df = ledger_table(sdir, cfg)
    if df.empty:
        print(f"no finished trials in {sdir}")
        return
    result = analyse(df, cfg)
    optima_table(result).to_csv(sdir / "partial_optima.csv", index=False)
    plot(df, result, cfg, sdir / "partial_lr_transfer.png")
    counts = df.groupby(["label", "stage"]).size().to_dict()
    print(f"{len(df)} finished trials: " + ", ".join(f"{k[0]}/stage{k[1]}: {v}" for k, v in sorted(counts.items())))
    print(markdown(result))


if __name__ == "__main__":
    main()
