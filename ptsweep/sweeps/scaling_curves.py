"""scaling-curves: PT (zero-shot transferred HPs) vs BERT and UT (tuned per scale) at matched sizes ([S] §3.2, Fig. 2).

For each PT width N in sweep.scales and each paradigm in sweep.scaling (channels | rank | both):
    PT     the 7 values of transfer.yaml, no tuning, sweep.seeds runs (seed = cfg.seed + i).
For each N (matched to PT with the first paradigm) and each baseline in sweep.models (bert, ut):
    shape  models.sizing.match_shape(kind, pt_cfg(N), V, seq_len, mask_prob, sweep.match): the BERT family rule
           (d = 64 h, h <= n_layers <= 2h) / the UT rule (BERT's depth, widened), closest to PT's total parameters,
           non-embedding parameters or training FLOPs per token (sweep.match; README "Baseline shapes")
    tuning sweeps.baseline_tuning.tune: Optuna TPE + tune-small's ASHA over optim.lr and optim.warmup_frac,
           sweep.baseline_samples trials (0 = sweep.num_samples, PT's tune-small budget), chosen on the VALIDATION
           split at training seed cfg.seed + sweep.seeds (a seed no reported run uses), with the edge rule (a search
           whose best value of a key is not bracketed is repeated on a recentred range, sweep.baseline_lr_widen
           times; still unbracketed -> flagged).
           Then sweep.seeds final runs at the chosen values, seeds cfg.seed + i like PT's. No search trial is
           reported: the winning trial's own losses are biased low (it won on a validation split whose noise its
           test loss shares through the same model), so reusing it would favour the baselines.
V = data.prepare(cfg.data).vocab_size, computed once in the driver.

Reported loss: the held-out TEST split when the runs have one (``data.max_test_blocks``; the baselines' LR was
chosen on validation, so the test split is the fair comparison), else validation; every loss carries its standard
error over masked tokens (``*_loss_se``) and the unigram baseline of the same tokens.

Rules (analysis.fits): each series is fitted with L = a P^-b + c when c is identified (>= 4 distinct sizes, a
converged bounded fit, and an F-test against the pure law), else L = a P^-b; against parameters and against
training FLOPs; intervals and the drawn bands are a residual bootstrap over seeds (sweep.bootstrap resamples).
"PT beats BERT at scale N" as run (runs matched by sweep.match) is the difference of their mean losses with a
Student-t interval, the seed variance pooled over every (series, scale) cell: "yes" when the interval lies below 0,
"no" above, "undecided" otherwise. The three framings (analysis.framings: equal total parameters, equal
non-embedding parameters, equal training FLOPs) compare the fitted curves at PT's own x with bootstrap intervals.

Outputs in ``<out_dir>/<study>/`` (study = sweep.study or "scaling-curves"):
    runs.parquet / .csv      one row per run: series, scale, seed, params, flops, val_loss (+ _se), test_loss (+ _se),
                             unigram losses, status
    results.parquet / .csv   one row per series x scale: model, scaling, scale (PT width), width, params,
                             non_embedding_params, flops_per_token, tokens, loss (mean over seeds of the reported
                             split), loss_sd, loss_lo / loss_hi (t interval), loss_token_se, val_loss, val_loss_se,
                             test_loss, test_loss_se, unigram_loss, n_seeds, best_lr, best_warmup_frac, n_layers,
                             n_heads, match_ratio, tuning_trials, lr_edge, status, error
    lr_search.parquet / .csv every baseline search trial (search_round 0, 1, ... for widened ranges)
    fig2a_pt_vs_bert.png, fig2b_pt_vs_ut.png (analysis.plots.plot_scaling), loss_vs_compute.png (every family vs
                             training FLOPs), framings.png (the three framings' axes): seeds as dots, means with
                             95 % intervals, fitted law with its bootstrap band
    summary.json             fits (params, non-embedding params, FLOPs), differences PT - baseline per scale with
                             intervals, framings (+ pt_beats_bert_by_framing), tuning_trials per model, winners,
                             pt_beats_bert_at_every_scale (as run; true / false / null = undecided), edge flags
    report.md                tuning trials per model and the three framings (also printed)
Resume: final runs are a fixed list with a ledger; each LR search is a resumable Optuna experiment.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ptsweep import metric_keys
from ptsweep.analysis import fits as fits_mod
from ptsweep.analysis import plots
from ptsweep.analysis.verification import t_ppf
from ptsweep.config import RunConfig, with_overrides
from ptsweep.analysis import framings as framings_mod
from ptsweep.models.sizing import flops_per_token, match_shape, measure, param_count
from ptsweep.sweeps import baseline_tuning
from ptsweep.sweeps.baseline_tuning import search_training_seed  # noqa: F401  (re-exported: tests, docs)
from ptsweep.errors import SweepError
from ptsweep.io import write_json
from ptsweep.sweeps.outputs import log_summary, save_table, study_name, study_path, sweep_tags
from ptsweep.sweeps.ray_session import ray_session
from ptsweep.sweeps.runner import run_trials
from ptsweep.sweeps.transfer import read_transfer
from ptsweep.sweeps.verify_transfer import with_ledger_metrics

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
    scalings = ["channels", "rank"] if sw.scaling == "both" else [sw.scaling]
    # provenance is checked against the first paradigm run (with "both": channels)
    base7, provenance, tpath = (read_transfer(with_overrides(cfg, {"model.scaling": scalings[0]}))
                                if "pt" in sw.models else ({}, {}, None))
    name = study_name(cfg, SWEEP)
    group = name.replace("/", "-")
    sdir = study_path(cfg, SWEEP)
    sdir.mkdir(parents=True, exist_ok=True)
    for s in sw.scales:  # fail fast, naming the key, on a width PT cannot build
        for sc in scalings:
            with_overrides(cfg, {"model.width": s, "model.scaling": sc})
    V = int(data_mod.prepare(cfg.data).vocab_size)
    baselines = [m for m in sw.models if m in BASELINES]
    search_tokens = max(1.0, sw.baseline_search_frac * cfg.train.tokens)
    seeds = [cfg.seed + i for i in range(sw.seeds)]

    runs: list[dict] = []  # one per (series, scale, seed); "pending" = index into finals
    finals: list[dict] = []
    labels: list[str] = []
    searches: list[pd.DataFrame] = []
    lr_info: dict[str, dict] = {}
    notes: list[str] = []
    with ray_session(cfg.ray):
        # ---- baselines: match width, LR search (validation split), seeds at the best LR -----------------------
        for kind in baselines:
            for s in sw.scales:
                pt_cfg = with_overrides(cfg, {"model.width": s, "model.scaling": scalings[0]})
                row = {"model": kind, "scaling": "", "scale": s}
                try:
                    mcfg = match_shape(kind, pt_cfg.model, V, cfg.data.seq_len, cfg.data.mask_prob, sw.match)
                except ValueError as e:
                    runs += [{**row, "seed": sd, "status": "failed", "error": str(e), "val_loss": math.inf}
                             for sd in seeds]
                    continue
                mo = model_overrides(mcfg)
                bcfg = with_overrides(cfg, mo)
                row.update(_row_static(bcfg, V), n_layers=mcfg.n_layers, n_heads=mcfg.n_heads, match_ratio=(
                    measure(mcfg, sw.match, V, cfg.data.seq_len, cfg.data.mask_prob)
                    / measure(pt_cfg.model, sw.match, V, cfg.data.seq_len, cfg.data.mask_prob)))
                if abs(row["match_ratio"] - 1) > 0.05:
                    notes.append(f"{kind} w{s}: the closest rule shape (d={mcfg.width}, L={mcfg.n_layers}) has "
                                 f"{row['match_ratio']:.3f} x PT's {sw.match} count (more than 5 % off)")
                df, info = baseline_tuning.tune(cfg, kind, s, mo, sdir, group, search_tokens,
                                                sweep_tags(SWEEP, bcfg.model))
                df.insert(0, "model", kind)
                df.insert(1, "scale", s)
                searches.append(df)
                lr_info[f"{kind}-w{s}"] = info
                if not math.isfinite(info["best_lr"]):
                    runs += [{**row, "seed": sd, "status": "failed", "val_loss": math.inf, "best_lr": math.nan,
                              "error": "every search trial failed or diverged"} for sd in seeds]
                    continue
                row.update(best_lr=info["best_lr"], best_warmup_frac=info["best"]["optim.warmup_frac"],
                           lr_edge=info["edge"], lr_rounds=info["rounds"], tuning_trials=info["n_trials"])
                for key, e in info["edges"].items():
                    if e == "single":
                        notes.append(f"{kind} w{s}: only one search trial finished its budget (ASHA stopped the "
                                     f"rest): whether best {key} {info['best'][key]:.3g} is bracketed is unknown")
                    elif e:
                        notes.append(f"{kind} w{s}: best {key} {info['best'][key]:.3g} is not bracketed ({e} edge "
                                     f"of the searched values) after {info['rounds']} widening(s); the optimum may "
                                     f"lie beyond")
                for i, sd in enumerate(seeds):
                    runs.append({**row, "seed": sd, "from": "final run", "pending": len(finals)})
                    finals.append({**mo, **info["best"], "seed": sd})
                    labels.append(f"final-{kind}-w{s}-s{i}")
        # ---- PT at every scale (transferred HPs) + baseline finals: one fixed list ------------------------------
        if "pt" in sw.models:
            for sc in scalings:
                for s in sw.scales:
                    pcfg = with_overrides(cfg, {**base7, "model.width": s, "model.scaling": sc})
                    for i, sd in enumerate(seeds):
                        runs.append({"model": "pt", "scaling": sc, "scale": s, "seed": sd, **_row_static(pcfg, V),
                                     "best_lr": base7["optim.lr"], "from": "transferred (no tuning)",
                                     "pending": len(finals)})
                        finals.append({**base7, "model.width": s, "model.scaling": sc, "seed": sd})
                        labels.append(f"final-pt-{sc}-w{s}-s{i}")
        if finals:
            fdf = run_trials(cfg, finals, sdir, "final", labels=labels, tags=[f"sweep={SWEEP}"], group=group)
            for row in runs:
                if "pending" in row:
                    r = fdf.iloc[row.pop("pending")]
                    row.update({k: r[k] for k in ("val_loss", "tokens", "status", "error", "trial_key")})
                    if r.get("params") and math.isfinite(float(r["params"])):
                        row["params"] = int(r["params"])  # counted on the built model
    rt = pd.DataFrame(runs)
    rt["series"] = [series_name(m, sc, scalings) for m, sc in zip(rt["model"], rt["scaling"])]
    rt["val_loss"] = rt["val_loss"].astype(float)
    rt["tokens"] = rt["tokens"].astype(float)
    if "trial_key" not in rt.columns:
        rt["trial_key"] = ""
    rt["trial_key"] = rt["trial_key"].fillna("").astype(str)
    rt = with_ledger_metrics(rt, sdir)
    ok_runs = rt[rt["val_loss"].map(math.isfinite)]
    split = "test" if len(ok_runs) and ok_runs["test_loss"].map(math.isfinite).all() else "val"
    lcol = f"{split}_loss"
    rt["loss"] = np.where(rt["val_loss"].map(math.isfinite), rt[lcol], np.inf)
    rt["loss_token_se"] = rt[f"{lcol}_se"]
    rt["unigram"] = rt["test_unigram_loss" if split == "test" else "unigram_loss"]
    pre = "test_" if split == "test" else ""
    rt["no_context"] = rt[f"{pre}no_context_loss"]
    rt["context_gain"], rt["context_gain_se"] = rt[f"{pre}context_gain"], rt[f"{pre}context_gain_se"]
    rt["train_flops"] = rt["flops_per_token"].astype(float) * rt["tokens"].astype(float)
    rt = rt.sort_values(["series", "scale", "seed"]).reset_index(drop=True)
    run_cols = ["series", "model", "scaling", "scale", "seed", "width", "params", "non_embedding_params",
                "flops_per_token", "tokens", "train_flops", "loss", "loss_token_se", "val_loss", "val_loss_se",
                "test_loss", "test_loss_se", "unigram", "no_context", "context_gain", "context_gain_se", "best_lr",
                "best_warmup_frac", "n_layers", "n_heads",
                "match_ratio", "tuning_trials", "status", "error", "from", "trial_key"]
    rt = rt[[c for c in run_cols if c in rt.columns]]
    save_table(rt, sdir, "runs")

    # ---- per (series, scale): means over seeds, pooled-variance t intervals ---------------------------------
    cells = {key: g for key, g in rt.groupby(["series", "scale"])}
    pooled_var, pooled_df = fits_mod.pooled_seed_variance([g["loss"].tolist() for g in cells.values()])
    q = t_ppf(0.5 + 0.95 / 2, pooled_df) if pooled_df and pooled_df > 0 else math.nan  # 95 % t intervals
    rows = []
    for (series, scale), g in cells.items():
        fin = g[np.isfinite(g["loss"])]
        first = g.iloc[0]
        n = len(fin)
        mean = float(fin["loss"].mean()) if n else math.inf
        half = q * math.sqrt(pooled_var / n) if n and math.isfinite(pooled_var) else math.nan
        statuses = sorted(set(g["status"].astype(str)))
        rows.append({
            "model": first["model"], "scaling": first["scaling"], "series": series, "scale": int(scale),
            "width": first.get("width"), "params": first.get("params"),
            "non_embedding_params": first.get("non_embedding_params"),
            "flops_per_token": first.get("flops_per_token"), "tokens": float(fin["tokens"].mean()) if n else math.nan,
            "loss": mean, "loss_sd": float(fin["loss"].std(ddof=1)) if n > 1 else math.nan,
            "loss_lo": mean - half, "loss_hi": mean + half,
            "loss_token_se": float(fin["loss_token_se"].mean()) if n else math.nan,
            "val_loss": float(fin["val_loss"].mean()) if n else math.inf,
            "val_loss_se": float(fin["val_loss_se"].mean()) if n else math.nan,
            "test_loss": float(fin["test_loss"].mean()) if n else math.nan,
            "test_loss_se": float(fin["test_loss_se"].mean()) if n else math.nan,
            "unigram_loss": float(fin["unigram"].mean()) if n else math.nan,
            "no_context_loss": float(fin["no_context"].mean()) if n else math.nan,
            **dict(zip(("context_gain", "context_gain_se"),
                       metric_keys.seed_mean(fin["context_gain"], fin["context_gain_se"]))),
            "n_seeds": n, "best_lr": first.get("best_lr"), "best_warmup_frac": first.get("best_warmup_frac"),
            "n_layers": first.get("n_layers"), "n_heads": first.get("n_heads"),
            "match_ratio": first.get("match_ratio"), "tuning_trials": first.get("tuning_trials"),
            "lr_edge": lr_info.get(f"{first['model']}-w{int(scale)}", {}).get("edge", ""),
            "status": "ok" if statuses == ["ok"] else ",".join(statuses),
            "error": "; ".join(e for e in g["error"].astype(str) if e and e != "nan"),
        })
    table = pd.DataFrame(rows).sort_values(["series", "scale"]).reset_index(drop=True)
    save_table(table, sdir, "results")
    lr_table = pd.concat(searches, ignore_index=True) if searches else pd.DataFrame()
    if not lr_table.empty:
        save_table(lr_table.drop(columns=[c for c in ("good",) if c in lr_table.columns]), sdir, "lr_search")

    # ---- fits (params, non-embedding params, FLOPs), differences, framings, winners, plots ------------------------
    fits, fits_ne, fits_flops = {}, {}, {}
    for series, g in rt.groupby("series"):
        for target, xcol in ((fits, "params"), (fits_ne, "non_embedding_params"), (fits_flops, "train_flops")):
            try:
                target[series] = fits_mod.fit_scaling_law(g[xcol].astype(float), g["loss"].astype(float),
                                                          n_boot=sw.bootstrap, seed=sw.search_seed)
            except ValueError as e:
                notes.append(f"no {xcol} fit for {series}: {e}")
    pt_series = sorted(x for x in rt["series"].unique() if x.startswith("pt"))
    present = [b for b in baselines if b in set(rt["series"])]
    comp = comparisons(rt, table, pt_series, present, list(sw.scales), (pooled_var, pooled_df), sw.bootstrap,
                       sw.search_seed)
    framings, winners = comp["framings"], comp["winners"]

    images = {}
    for fig, other in (("fig2a_pt_vs_bert", "bert"), ("fig2b_pt_vs_ut", "ut")):
        pair = [*pt_series, other]
        have = rt[rt["series"].isin(pair) & np.isfinite(rt["loss"])]
        if have.empty:
            notes.append(f"{fig}.png skipped: no finite results for {pair}")
            continue
        images[fig] = plots.plot_scaling(rt.assign(model=rt["series"]), sdir / f"{fig}.png", pair=pair, fits=fits,
                                         loss_col="loss", model_col="model", summary=table.assign(model=table["series"]),
                                         ylabel=f"{split} loss (MLM)")
    if np.isfinite(rt["loss"]).any():
        images["loss_vs_compute"] = plots.plot_loss_vs_compute(rt.assign(model=rt["series"]),
                                                               sdir / "loss_vs_compute.png", loss_col="loss",
                                                               model_col="model", fits=fits_flops,
                                                               ylabel=f"{split} loss (MLM)")
        images["framings"] = plots.plot_framings(rt.assign(model=rt["series"]), sdir / "framings.png",
                                                 {"params": fits, "non_embedding_params": fits_ne,
                                                  "train_flops": fits_flops}, framings, ylabel=f"{split} loss (MLM)")
    if sw.baseline_lr_samples:
        notes.append(f"sweep.baseline_lr_samples={sw.baseline_lr_samples} is deprecated and ignored: each baseline "
                     f"search runs sweep.baseline_samples (0 = sweep.num_samples) = {baseline_tuning.budget(cfg)} trials")
    summary = {
        "study": name, "loss_split": split, "seeds": seeds, "fits": fits, "fits_non_embedding": fits_ne,
        "fits_flops": fits_flops, "match": sw.match, "framing_level": 0.95, **comp,
        "tuning_trials": baseline_tuning.trial_counts(cfg, provenance, lr_info, present),
        "baseline_search_space": {k: list(v) for k, v in baseline_tuning.search_space(cfg).items()},
        "pooled_seed_sd": math.sqrt(pooled_var) if math.isfinite(pooled_var) else None, "pooled_df": pooled_df,
        "lr_search": lr_info, "vocab_size": V,
        "scales": list(sw.scales), "models": list(sw.models), "scaling": sw.scaling, "tokens": cfg.train.tokens,
        "baseline_search_tokens": search_tokens, "transfer_file": str(tpath) if tpath else None,
        "transfer_provenance": provenance, "transfer_mismatch": provenance.get("mismatch", {}), "transferred": base7,
        "status_counts": {str(k): int(v) for k, v in rt["status"].value_counts().items()},
        "plots": sorted(Path(p).name for p in images.values()), "notes": notes, "wall_s": time.time() - t0,
    }
    note = log_summary(cfg, sdir, SWEEP, {"results": table, "runs": rt,
                                          **({"lr_search": lr_table} if len(lr_table) else {})},
                       images, {"winners": {k: v["winner"] or "undecided" for k, v in winners.items()}},
                       tags=[f"sweep={SWEEP}"])
    if note:
        summary["notes"].append(note)
    write_json(sdir / "summary.json", summary)
    report = [*context_lines(table, split), *framings_mod.report_lines(summary)]
    (sdir / "report.md").write_text("\n".join([f"# {name}: PT vs baselines, three framings", "", *report]) + "\n")
    print("\n".join(f"scaling-curves: {line}" for line in report if line))
    if summary["transfer_mismatch"]:
        print(f"scaling-curves: PROCEEDING DESPITE transfer.yaml mismatch (sweep.allow_transfer_mismatch): "
              f"{', '.join(summary['transfer_mismatch'])}")
    print("scaling-curves: winners per scale " + winners_text(winners))
    return sdir


def comparisons(rt: pd.DataFrame, table: pd.DataFrame, pt_series: list[str], baselines: list[str], scales: list,
                pooled: tuple[float, int], n_boot: int, seed: int) -> dict:
    """Every PT - baseline statement of the summary, each through ``framings.context_gate`` (no verdict from a model
    that learned nothing): ``differences`` (as run, per scale: mean difference with the pooled-seed t interval),
    the three ``framings``, the every-scale verdicts (True / False / None) with ``statements`` in words, and
    ``winners`` per scale (None with the reason when a model there did not learn context).
    ``rt``: one row per run; ``table``: one row per series x scale with the seed-mean context gain."""
    learned = framings_mod.learned_cells(table)
    differences = {}
    for pts in pt_series:
        for other in baselines:
            per = {str(s): fits_mod.difference_ci(rt[(rt["series"] == pts) & (rt["scale"] == s)]["loss"].tolist(),
                                                  rt[(rt["series"] == other) & (rt["scale"] == s)]["loss"].tolist(),
                                                  *pooled) for s in scales}
            differences[f"{pts}-{other}"] = framings_mod.context_gate(per, (pts, other), learned)
    framings = framings_mod.framings(rt, pt_series, baselines, n_boot=n_boot, seed=seed, learned=learned)
    by_framing = {f: {pair: r["every_scale"] for pair, r in res.items()} for f, res in framings.items()}
    ut_by_framing = {f: framings_mod.every_scale(res["pt-ut"]["per_scale"], win="b_lower")["every_scale"]
                     for f, res in framings.items() if "pt-ut" in res}
    verdicts, statements = {}, {}
    for key, pair, win in (("pt_beats_bert_at_every_scale", "pt-bert", "a_lower"),
                           ("ut_beats_pt_at_every_scale", "pt-ut", "b_lower")):
        per = differences.get(pair, {})
        verdicts[key] = framings_mod.every_scale(per, win=win)["every_scale"] if per else None
        statements[key] = framings_mod.verdict_text(verdicts[key], per) if per else "n/a (not run)"
    winners = {}
    for s, g in table[table["loss"].map(math.isfinite)].groupby("scale"):
        best = g.loc[g["loss"].idxmin()]
        idle = [x for x in g["series"] if (x, str(int(s))) not in learned]
        winners[str(int(s))] = {"winner": None if idle else best["series"], "loss": float(best["loss"]),
                                "losses": {r["series"]: float(r["loss"]) for _, r in g.iterrows()},
                                **({"reason": framings_mod.NO_CONTEXT.format(models=" and ".join(idle))}
                                   if idle else {})}
    return {"differences": differences, "framings": framings, "winners": winners, **verdicts,
            "statements": statements, "pt_beats_bert_by_framing": {f: v.get("pt-bert") for f, v in by_framing.items()},
            "ut_beats_pt_by_framing": ut_by_framing, "pt_beats_by_framing": by_framing}


def winners_text(winners: dict) -> str:
    """'32: pt, 64: undecided: bert learned no context at this budget': the lowest loss per scale, or why none."""
    return ", ".join(f"{k}: {v['winner'] or v.get('reason', 'undecided')}" for k, v in winners.items())


def context_lines(table: pd.DataFrame, split: str) -> list[str]:
    """One line per (series, scale): loss next to the unigram and no-context baselines and the [MASK]-target
    context gain (seed mean ± SE); a model that has not learned context is marked (its curve says nothing about
    using context)."""
    lines = [f"Losses on the {split} split with both context-free baselines; context gain = unigram - model on "
             f"[MASK] targets (> 2 SE = learned):", ""]
    for _, r in table.iterrows():
        lines.append(f"- {r['series']} at scale {int(r['scale'])}: loss {r['loss']:.4f} (unigram "
                     f"{r['unigram_loss']:.4f}, no-context {r.get('no_context_loss', math.nan):.4f}); "
                     f"{metric_keys.context_line(dict(r))}")
    return [*lines, ""]
