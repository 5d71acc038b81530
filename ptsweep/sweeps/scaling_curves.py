"""scaling-curves: PT (zero-shot transferred HPs) vs BERT and UT (tuned per scale) at matched sizes ([S] §3.2, Fig. 2).

For each PT width N in sweep.scales and each paradigm in sweep.scaling (channels | rank | both):
    PT     the 7 values of transfer.yaml, no tuning, one run.
For each N (matched to PT with the first paradigm) and each baseline in sweep.models (bert, ut):
    width  models.sizing.match_width(kind, pt_cfg(N), V): the BERT/UT width with the closest parameter count
    LR     Optuna TPE over optim.lr in sweep.baseline_lr_range, sweep.baseline_lr_samples trials, each with
           sweep.baseline_search_frac of the token budget (no early stopping), then one final run at the best LR
           (with baseline_search_frac = 1 the best search trial already is that run and is reused).
V = data.prepare(cfg.data).vocab_size, computed once in the driver.

Outputs in ``<out_dir>/<study>/`` (study = sweep.study or "scaling-curves"):
    results.parquet / .csv   model, scaling, scale (PT width), width, params, non_embedding_params, flops_per_token,
                             tokens, val_loss, best_lr, status, error (one row per model x scale [x paradigm])
    lr_search.parquet / .csv every baseline LR-search trial
    fig2a_pt_vs_bert.png, fig2b_pt_vs_ut.png (analysis.plots.plot_scaling), loss_vs_compute.png
    summary.json             power-law fits L = a P^-b per model (analysis.fits.fit_power_law on params vs loss),
                             the winner at each scale, and whether PT beats BERT / UT beats PT at every scale
Resume: final runs are a fixed list with a ledger; each LR search is a resumable Optuna experiment.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pandas as pd

from ptsweep.analysis import fits as fits_mod
from ptsweep.analysis import plots
from ptsweep.config import RunConfig, with_overrides
from ptsweep.models.sizing import flops_per_token, match_width, param_count
from ptsweep.sweeps.common import (SweepError, log_summary, ray_session, read_transfer, run_search, run_trials,
                                   save_table, study_name, study_path, sweep_tags, write_json)

SWEEP = "scaling-curves"
BASELINES = ("bert", "ut")


def model_overrides(model_cfg) -> dict:
    """Dotted overrides that rebuild a BERT/UT model config from a PT base config."""
    return {"model.name": model_cfg.name, "model.width": model_cfg.width, "model.n_layers": model_cfg.n_layers,
            "model.n_heads": model_cfg.n_heads, "model.max_positions": model_cfg.max_positions}


def series_name(model: str, scaling: str, scalings: list[str]) -> str:
    """Plot/fit series: 'pt' (or 'pt-rank' for the second paradigm when both are run), 'bert', 'ut'."""
    return model if model != "pt" or scaling == scalings[0] else f"pt-{scaling}"


def _row_static(cfg: RunConfig, V: int) -> dict:
    c = param_count(cfg.model, V)
    return {"width": int(cfg.model.width), "params": int(c["total"]), "non_embedding_params": int(c["non_embedding"]),
            "flops_per_token": float(flops_per_token(cfg.model, V, cfg.data.seq_len, cfg.data.mask_prob))}


def run(cfg: RunConfig) -> Path:
    """Run (or resume) the comparison; write the tables, fits, plots and summary.json; return the study folder."""
    if cfg.model.name != "pt":
        raise SweepError(f"model.name: scaling-curves starts from the PT config (model=pt), got {cfg.model.name}")
    t0 = time.time()
    from ptsweep import data as data_mod

    sw = cfg.sweep
    base7, provenance, tpath = read_transfer(cfg) if "pt" in sw.models else ({}, {}, None)
    name = study_name(cfg, SWEEP)
    group = name.replace("/", "-")
    sdir = study_path(cfg, SWEEP)
    sdir.mkdir(parents=True, exist_ok=True)
    scalings = ["channels", "rank"] if sw.scaling == "both" else [sw.scaling]
    for s in sw.scales:  # fail fast, naming the key, on a width PT cannot build
        for sc in scalings:
            with_overrides(cfg, {"model.width": s, "model.scaling": sc})
    V = int(data_mod.prepare(cfg.data).vocab_size)
    baselines = [m for m in sw.models if m in BASELINES]
    search_tokens = max(1.0, sw.baseline_search_frac * cfg.train.tokens)

    rows: list[dict] = []  # one per (series, scale); "overrides" set for runs still to do
    finals: list[dict] = []
    labels: list[str] = []
    searches: list[pd.DataFrame] = []
    with ray_session(cfg.ray):
        # ---- baselines: match width, LR search ----------------------------------------------------------------
        for kind in baselines:
            for s in sw.scales:
                pt_cfg = with_overrides(cfg, {"model.width": s, "model.scaling": scalings[0]})
                row = {"model": kind, "scaling": "", "scale": s}
                try:
                    mcfg = match_width(kind, pt_cfg.model, V)
                except ValueError as e:
                    rows.append({**row, "status": "failed", "error": str(e), "val_loss": math.inf})
                    continue
                mo = model_overrides(mcfg)
                bcfg = with_overrides(cfg, mo)
                row.update(_row_static(bcfg, V))
                label = f"lr-{kind}-w{s}"
                df = run_search(cfg, {"optim.lr": tuple(sw.baseline_lr_range)}, sdir, f"search-{kind}-w{s}",
                                num_samples=sw.baseline_lr_samples, seed=sw.search_seed,
                                fixed={**mo, "train.tokens": search_tokens}, label=label, asha=None,
                                tags=sweep_tags(SWEEP, bcfg.model), group=group)
                df.insert(0, "model", kind)
                df.insert(1, "scale", s)
                searches.append(df)
                good = df[df["val_loss"].map(math.isfinite) & (df["status"] == "ok")] if not df.empty else df
                if good.empty:
                    rows.append({**row, "status": "failed", "val_loss": math.inf, "best_lr": math.nan,
                                 "error": "every LR-search trial failed or diverged"})
                    continue
                best = good.loc[good["val_loss"].idxmin()]
                row["best_lr"] = float(best["optim.lr"])
                if sw.baseline_search_frac >= 1.0:  # the best search trial is the final run
                    rows.append({**row, **{k: best.get(k) for k in ("val_loss", "tokens", "status", "error",
                                                                   "trial_key")}, "from": "best search trial"})
                else:
                    rows.append({**row, "from": "final run", "pending": len(finals)})
                    finals.append({**mo, "optim.lr": row["best_lr"]})
                    labels.append(f"final-{kind}-w{s}")
        # ---- PT at every scale (transferred HPs) + baseline finals: one fixed list ------------------------------
        if "pt" in sw.models:
            for sc in scalings:
                for s in sw.scales:
                    pcfg = with_overrides(cfg, {**base7, "model.width": s, "model.scaling": sc})
                    rows.append({"model": "pt", "scaling": sc, "scale": s, **_row_static(pcfg, V),
                                 "best_lr": base7["optim.lr"], "from": "transferred (no tuning)",
                                 "pending": len(finals)})
                    finals.append({**base7, "model.width": s, "model.scaling": sc})
                    labels.append(f"final-pt-{sc}-w{s}")
        if finals:
            fdf = run_trials(cfg, finals, sdir, "final", labels=labels,
                             tags=[f"sweep={SWEEP}"], group=group)
            for row in rows:
                if "pending" in row:
                    r = fdf.iloc[row.pop("pending")]
                    row.update({k: r[k] for k in ("val_loss", "tokens", "status", "error", "trial_key")})
                    if r.get("params") and math.isfinite(float(r["params"])):
                        row["params"] = int(r["params"])  # counted on the built model
    table = pd.DataFrame(rows)
    table["series"] = [series_name(m, sc, scalings) for m, sc in zip(table["model"], table["scaling"])]
    table["val_loss"] = table["val_loss"].astype(float)
    table["tokens"] = table["tokens"].astype(float)
    cols = ["model", "scaling", "series", "scale", "width", "params", "non_embedding_params", "flops_per_token",
            "tokens", "val_loss", "best_lr", "status", "error", "from", "trial_key"]
    table = table[[c for c in cols if c in table.columns]].sort_values(["series", "scale"]).reset_index(drop=True)
    save_table(table, sdir, "results")
    lr_table = pd.concat(searches, ignore_index=True) if searches else pd.DataFrame()
    if not lr_table.empty:
        save_table(lr_table, sdir, "lr_search")

    # ---- fits, winners, plots -------------------------------------------------------------------------------
    fits, notes = {}, []
    for series, g in table.groupby("series"):
        try:
            fits[series] = fits_mod.fit_power_law(g["params"].astype(float), g["val_loss"])
        except ValueError as e:
            notes.append(f"no power-law fit for {series}: {e}")
    winners = {}
    for s, g in table[table["val_loss"].map(math.isfinite)].groupby("scale"):
        best = g.loc[g["val_loss"].idxmin()]
        winners[str(int(s))] = {"winner": best["series"], "val_loss": float(best["val_loss"]),
                                "losses": {r["series"]: float(r["val_loss"]) for _, r in g.iterrows()}}

    def beats(a: str, b: str) -> bool | None:
        pairs = [(w["losses"].get(a), w["losses"].get(b)) for w in winners.values()]
        pairs = [(x, y) for x, y in pairs if x is not None and y is not None]
        return all(x < y for x, y in pairs) if pairs else None

    plot_df = table.assign(model=table["series"])
    images = {}
    pt_series = [x for x in table["series"].unique() if x.startswith("pt")]
    for fig, other in (("fig2a_pt_vs_bert", "bert"), ("fig2b_pt_vs_ut", "ut")):
        pair = [*pt_series, other]
        have = plot_df[plot_df["model"].isin(pair) & plot_df["val_loss"].map(math.isfinite)]
        if have.empty:
            notes.append(f"{fig}.png skipped: no finite results for {pair}")
            continue
        images[fig] = plots.plot_scaling(plot_df, sdir / f"{fig}.png", pair=pair, fits=fits, loss_col="val_loss",
                                         model_col="model")
    if plot_df["val_loss"].map(math.isfinite).any():
        images["loss_vs_compute"] = plots.plot_loss_vs_compute(plot_df, sdir / "loss_vs_compute.png",
                                                               loss_col="val_loss", model_col="model")
    summary = {
        "study": name, "fits": fits, "winners": winners, "pt_beats_bert_at_every_scale": beats("pt", "bert"),
        "ut_beats_pt_at_every_scale": beats("ut", "pt"), "vocab_size": V, "scales": list(sw.scales),
        "models": list(sw.models), "scaling": sw.scaling, "tokens": cfg.train.tokens,
        "baseline_search_tokens": search_tokens, "transfer_file": str(tpath) if tpath else None,
        "transfer_provenance": provenance, "transferred": base7,
        "status_counts": {str(k): int(v) for k, v in table["status"].value_counts().items()},
        "plots": sorted(Path(p).name for p in images.values()), "notes": notes, "wall_s": time.time() - t0,
    }
    note = log_summary(cfg, sdir, SWEEP, {"results": table, **({"lr_search": lr_table} if len(lr_table) else {})},
                       images, {"winners": {k: v["winner"] for k, v in winners.items()}}, tags=[f"sweep={SWEEP}"])
    if note:
        summary["notes"].append(note)
    write_json(sdir / "summary.json", summary)
    print("scaling-curves: winners per scale " + ", ".join(f"{k}: {v['winner']}" for k, v in winners.items()))
    return sdir
