"""scaling-curves: PT (zero-shot transferred HPs) vs BERT and UT (tuned per scale) at matched sizes ([S] §3.2, Fig. 2).

PT runs at every width of sweep.scales and paradigm of sweep.scaling with the 7 values of transfer.yaml, untuned.
Each baseline gets, at each scale, the rule shape closest to PT's (``models.sizing.match_shape``), its own LR search
(``baseline_tuning``) and fresh runs at the chosen values; every point runs at sweep.seeds seeds (a model's own
count under sweep.model_seeds), scored on the test split when the runs have one (docs/verdicts.md, "Scaling fits").
Writes the runs, results and LR search tables (``reports.scaling_tables``), Figure 2, summary.json and report.md to
``<out_dir>/<study>/``.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ptsweep.analysis import fits as fits_mod
from ptsweep.analysis import learning_curves, model_spread
from ptsweep.analysis import plots
from ptsweep.config import RunConfig, with_overrides
from ptsweep.analysis import framings as framings_mod
from ptsweep.models.sizing import flops_per_token, match_shape, measure, param_count
from ptsweep.reports import scaling_tables
from ptsweep.sweeps import baseline_tuning, pt_grid
from ptsweep.reports.outputs import (open_study, print_transfer_mismatch, publish, require_pt, save_table,
                                    study_name, sweep_tags)
from ptsweep.trials.runner import run_trials, sweep_session, warm_data
from ptsweep.sweeps.transfer import config_transfer, read_transfer
from ptsweep.trials.trial_plan import PlannedTrial, shape_cache

SWEEP = "scaling-curves"
PT_ONLY = "scaling-curves starts from the PT config (model=pt), got {name}"
BASELINES = ("bert", "ut", "modernbert")


def model_overrides(model_cfg) -> dict:
    """Dotted overrides that rebuild a BERT/UT model config from a PT base config."""
    return {"model.name": model_cfg.name, "model.width": model_cfg.width, "model.n_layers": model_cfg.n_layers,
            "model.n_heads": model_cfg.n_heads, "model.max_positions": model_cfg.max_positions}


def paradigms(sweep_cfg) -> list[str]:
    """PT's scaling paradigms of sweep.scaling ('both' = channels, then rank)."""
    return ["channels", "rank"] if sweep_cfg.scaling == "both" else [sweep_cfg.scaling]


def pt_finals(cfg: RunConfig, transferred: dict) -> list[tuple[str, dict]]:
    """(label, overrides) of PT's final runs: every paradigm x scale x seed at the transferred values."""
    return [(f"final-pt-{sc}-w{s}-s{sd - cfg.seed}", {**transferred, "model.width": s, "model.scaling": sc, "seed": sd})
            for sc in paradigms(cfg.sweep) for s in cfg.sweep.scales for sd in final_seeds(cfg, "pt")]


def _row_static(cfg: RunConfig, V: int) -> dict:
    c = param_count(cfg.model, V)
    return {"width": int(cfg.model.width), "params": int(c["total"]), "non_embedding_params": int(c["non_embedding"]),
            "flops_per_token": float(flops_per_token(cfg.model, V, cfg.data.seq_len, cfg.data.mask_prob))}


@dataclass
class _Plan:
    """What the driver collects before and while running: one ``runs`` row per (series, scale, seed) ("pending":
    index into ``finals``, the fixed list of final trials, with their ``labels``), the baseline searches' tables and
    results (``lr_info`` by "<model>-w<scale>") and the notes of the summary; ``seeds``: each model's final seeds."""
    seeds: dict[str, list[int]]
    runs: list[dict] = field(default_factory=list)
    finals: list[dict] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    searches: list[pd.DataFrame] = field(default_factory=list)
    lr_info: dict[str, dict] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def run(cfg: RunConfig) -> Path:
    """Run (or resume) the comparison; write the tables, fits, plots and summary.json; return the study folder."""
    from ptsweep.train import num_steps  # torch: not at import time of the driver module
    require_pt(cfg, PT_ONLY)
    t0 = time.time()
    sweep_cfg = cfg.sweep
    scalings = paradigms(sweep_cfg)
    # provenance is checked against the first paradigm run (with "both": channels)
    transferred, provenance, tpath = _pt_values(cfg, scalings)
    name, sdir = open_study(cfg, SWEEP)
    for s, sc in itertools.product(sweep_cfg.scales, scalings):  # fail fast, naming the key, on a width PT lacks
        with_overrides(cfg, {"model.width": s, "model.scaling": sc})
    vocab = warm_data(cfg)
    baselines = [m for m in sweep_cfg.models if m in BASELINES]
    plan = _Plan(seeds={m: final_seeds(cfg, m) for m in sweep_cfg.models})
    _train(cfg, plan, baselines, scalings[0], (transferred, provenance), vocab, sdir)
    runs, split = scaling_tables.runs_table(plan.runs, scalings, sdir)
    save_table(runs, sdir, "runs")
    spreads = model_spread.cell_spreads(runs)  # each cell's seed variance: the table's intervals, the comparisons
    table = scaling_tables.cells(runs, plan.lr_info, spreads)
    save_table(table, sdir, "results")
    lr_table = pd.concat(plan.searches, ignore_index=True) if plan.searches else pd.DataFrame()
    if len(lr_table):  # every baseline search trial
        save_table(lr_table.drop(columns=["good"], errors="ignore"), sdir, "lr_search")

    fits = _fits(runs, sweep_cfg, plan.notes)
    pt_series = sorted(x for x in runs["series"].unique() if x.startswith("pt"))
    present = [b for b in baselines if b in set(runs["series"])]
    curves = learning_curves.read_curves(runs, sdir)  # the in-loop evaluations of every reported run
    save_table(curves, sdir, "learning_curves")
    plateau = (sweep_cfg.plateau_gain, sweep_cfg.plateau_factor)
    late = learning_curves.plateau_cells(curves, num_steps(cfg), *plateau) if sweep_cfg.plateau_gate else None
    comp = framings_mod.comparisons(runs, table, spreads, pt_series, present, list(sweep_cfg.scales), late)
    images = _figures(runs, table, pt_series, fits, comp["framings"], sdir, split, plan.notes)
    images.update(learning_curves.plot_all(curves, sdir))
    summary = {"study": name, "loss_split": split, "seeds": final_seeds(cfg), "model_seeds": plan.seeds,
               "fits": fits["params"],
               "fits_non_embedding": fits["non_embedding_params"], "fits_flops": fits["train_flops"],
               "match": sweep_cfg.match, "framing_level": 0.95, **comp,
               "budget_check": learning_curves.budget_check(curves, num_steps(cfg), *plateau),
               "plateau_late": None if late is None else {f"{m} at scale {s}": w for (m, s), w in late.items()},
               "missing_runs": {f"{m} at scale {s}": int(n) for (m, s), n in  # final runs not in the results folder
                                runs[runs["status"] == "missing"].groupby(["series", "scale"]).size().items()},
               "tuning_runs": scaling_tables.tuning_rows(lr_table, sdir, num_steps(cfg), plateau[0],
                                                         sweep_cfg.baseline.search_frac == 1.0),
               **_settings(cfg, plan, provenance, present, vocab),
               "transfer_file": str(tpath) if tpath else None, "transfer_provenance": provenance,
               "transfer_mismatch": provenance.get("mismatch", {}), "transferred": transferred,
               "status_counts": {str(k): int(v) for k, v in runs["status"].value_counts().items()},
               "plots": sorted(Path(p).name for p in images.values()), "notes": plan.notes,
               "wall_s": time.time() - t0}
    publish(cfg, sdir, SWEEP, summary, {"results": table, "runs": runs, **({"lr_search": lr_table} if len(lr_table)
                                                                          else {})}, images,
            {"winners": {k: v["winner"] or "undecided" for k, v in comp["winners"].items()}},
            report=lambda s: "\n".join([f"# {name}: PT vs baselines, three framings", "",
                                         *scaling_tables.report_lines(table, split, s)]) + "\n")
    print("\n".join(f"scaling-curves: {line}" for line in scaling_tables.report_lines(table, split, summary) if line))
    print_transfer_mismatch(SWEEP, summary)
    print("scaling-curves: winners per scale " + framings_mod.winners_text(comp["winners"]))
    return sdir


def _pt_values(cfg: RunConfig, scalings: list[str]) -> tuple[dict, dict, Path | None]:
    """(PT's 7 values, provenance, transfer.yaml path): transfer.yaml, the config's own values, or under
    transfer_from 'grid' the config's own until :func:`_tune_pt` puts the grid's best LR in."""
    if "pt" not in cfg.sweep.models:
        return {}, {}, None
    if pt_grid.active(cfg):
        return config_transfer(cfg)
    return read_transfer(with_overrides(cfg, {"model.scaling": scalings[0]}))


def _train(cfg: RunConfig, plan: _Plan, baselines: list[str], pt_scaling: str, pt_values: tuple[dict, dict],
           vocab: int, sdir: Path) -> None:
    """On Ray: each baseline's search and final runs, then PT's (under sweep.baseline.grid, every trial that waits on
    no other's result first); fills ``plan``, and ``pt_values`` (transferred, provenance) under transfer_from 'grid'."""
    transferred, provenance = pt_values
    with sweep_session(cfg, study_name(cfg, SWEEP), SWEEP, vocab):
        if cfg.sweep.baseline.grid:  # fixed lists: every grid trial and PT run of a scale at once, smallest first
            searches = _grid_searches(cfg, baselines, pt_scaling, vocab)
            _run_independent(cfg, searches, pt_scaling, transferred, sdir)
            baseline_tuning.grid_edges_together(cfg, searches, sdir, study_name(cfg, SWEEP).replace("/", "-"),
                                                [f"sweep={SWEEP}"])  # every search's edge round at once
        for kind in baselines:  # match width, LR search (validation split), seeds at the best LR
            for s in sorted(cfg.sweep.scales):
                _plan_baseline(cfg, plan, kind, s, pt_scaling, vocab, sdir)
        if pt_grid.active(cfg):  # PT's LR: the grid's best at the smallest scale
            _tune_pt(cfg, plan, pt_scaling, transferred, provenance, sdir)
        if "pt" in cfg.sweep.models:  # PT at every scale with the transferred values, no tuning
            _plan_pt(cfg, plan, transferred, vocab)
        if plan.finals:
            _run_finals(cfg, plan, sdir, study_name(cfg, SWEEP).replace("/", "-"))


def _plan_baseline(cfg: RunConfig, plan: _Plan, kind: str, scale: int, pt_scaling: str, vocab: int,
                   sdir: Path) -> None:
    """One baseline at one scale: its matched shape, its LR search (``baseline_tuning.tune``), its final runs (or
    failed rows)."""
    sweep_cfg, data_cfg = cfg.sweep, cfg.data
    pt_cfg = with_overrides(cfg, {"model.width": scale, "model.scaling": pt_scaling})
    row = {"model": kind, "scaling": "", "scale": scale}
    try:
        mcfg = match_shape(kind, pt_cfg.model, vocab, data_cfg.seq_len, data_cfg.mask_prob, sweep_cfg.match)
    except ValueError as e:
        return _failed(plan, row, str(e))
    shape_overrides = model_overrides(mcfg)
    bcfg = with_overrides(cfg, shape_overrides)
    row.update(_row_static(bcfg, vocab), n_layers=mcfg.n_layers, n_heads=mcfg.n_heads, match_ratio=(
        measure(mcfg, sweep_cfg.match, vocab, data_cfg.seq_len, data_cfg.mask_prob)
        / measure(pt_cfg.model, sweep_cfg.match, vocab, data_cfg.seq_len, data_cfg.mask_prob)))
    if abs(row["match_ratio"] - 1) > 0.05:
        plan.notes.append(f"{kind} w{scale}: the closest rule shape (d={mcfg.width}, L={mcfg.n_layers}) has "
                          f"{row['match_ratio']:.3f} x PT's {sweep_cfg.match} count (more than 5 % off)")
    df, info = baseline_tuning.tune(cfg, kind, scale, shape_overrides, sdir, study_name(cfg, SWEEP).replace("/", "-"),
                                    sweep_tags(SWEEP, bcfg.model))
    df.insert(0, "model", kind)
    df.insert(1, "scale", scale)
    plan.searches.append(df)
    plan.lr_info[f"{kind}-w{scale}"] = info
    if not math.isfinite(info["best_lr"]):
        return _failed(plan, row, *scaling_tables.no_lr(df, "search"))
    row.update(best_lr=info["best_lr"], best_warmup_frac=info["best"]["optim.warmup_frac"],
               lr_edge=info["edge"], lr_rounds=info["rounds"], tuning_trials=info["n_trials"])
    plan.notes += _edge_notes(kind, scale, info)
    for sd in plan.seeds[kind]:
        plan.runs.append({**row, "seed": sd, "from": "final run", "pending": len(plan.finals)})
        plan.finals.append({**shape_overrides, **info["best"], "seed": sd})
        plan.labels.append(f"final-{kind}-w{scale}-s{sd - cfg.seed}")


def _failed(plan: _Plan, row: dict, reason: str, status: str = "failed") -> None:
    """A failed (or missing) row per seed of one (model, scale) that has no final runs, with the one-line reason."""
    plan.runs += [{**row, "seed": sd, "status": status, "val_loss": math.inf, "best_lr": math.nan, "error": reason}
                  for sd in plan.seeds[row["model"]]]


def _grid_searches(cfg: RunConfig, baselines: list[str], pt_scaling: str,
                   vocab: int) -> list[tuple[str, int, dict, list[float]]]:
    """The fixed-list searches under sweep.baseline.grid as (kind, scale, shape overrides, grid LRs): PT's LR grid at
    the smallest scale (transfer_from 'grid'), then every baseline at every scale, by scale."""
    out = [("pt", pt_grid.tuning_width(cfg), pt_grid.model_overrides(cfg, pt_scaling),
            list(cfg.sweep.transfer_grid))] if pt_grid.active(cfg) else []
    for scale in cfg.sweep.scales:
        pt_cfg = with_overrides(cfg, {"model.width": scale, "model.scaling": pt_scaling})
        for kind in baselines:  # the baselines first: their learning curves say whether the budget is long enough
            try:
                mcfg = match_shape(kind, pt_cfg.model, vocab, cfg.data.seq_len, cfg.data.mask_prob, cfg.sweep.match)
            except ValueError:
                continue  # recorded as failed rows by _plan_baseline
            out.append((kind, scale, model_overrides(mcfg), list(cfg.sweep.baseline.grid)))
    return out


def _run_independent(cfg: RunConfig, searches: list[tuple[str, int, dict, list[float]]], pt_scaling: str,
                     transferred: dict, sdir: Path) -> None:
    """Under sweep.baseline.grid, the trials that depend on no other's result (every search's first round, and PT's
    final runs unless PT's grid sets their LR) in one fixed list, PT's grid first, then by scale: Ray keeps every
    slot busy. The per-model steps that follow find them in the ledger."""
    items = [(-1 if kind == "pt" else scale, over, baseline_tuning.grid_label(kind, scale))
             for kind, scale, model_over, lrs in searches for over in baseline_tuning.grid_trials(cfg, model_over, lrs)]
    if "pt" in cfg.sweep.models and not pt_grid.active(cfg):
        items += [(over["model.width"], over, lab) for lab, over in pt_finals(cfg, transferred)]
    items.sort(key=lambda item: item[0])  # stable
    run_trials(cfg, [over for _, over, _ in items], sdir, "independent", labels=[lab for _, _, lab in items],
               tags=[f"sweep={SWEEP}"], group=study_name(cfg, SWEEP).replace("/", "-"))


def _tune_pt(cfg: RunConfig, plan: _Plan, pt_scaling: str, transferred: dict, provenance: dict, sdir: Path) -> None:
    """PT's LR grid at the smallest scale (``pt_grid``): its trials join the search table, its best LR the
    transferred values."""
    df, info = pt_grid.tune(cfg, pt_scaling, sdir, study_name(cfg, SWEEP).replace("/", "-"), [f"sweep={SWEEP}"])
    plan.searches.append(df)
    for scale in cfg.sweep.scales:  # every scale runs the LR tuned at the smallest: its edge flag holds there too
        plan.lr_info[f"pt-w{scale}"] = info
    plan.notes += _edge_notes("pt", pt_grid.tuning_width(cfg), info)
    pt_grid.apply(transferred, provenance, info, cfg)


def _edge_notes(kind: str, scale: int, info: dict) -> list[str]:
    """A note per searched key whose best value is not bracketed by the search (or cannot be told)."""
    notes = []
    for key, e in info["edges"].items():
        if e == "single":
            notes.append(f"{kind} w{scale}: only one search trial finished its budget (ASHA stopped the "
                         f"rest): whether best {key} {info['best'][key]:.3g} is bracketed is unknown")
        elif e:
            notes.append(f"{kind} w{scale}: best {key} {info['best'][key]:.3g} is not bracketed ({e} edge "
                         f"of the searched values) after {info['rounds']} widening(s); the optimum may "
                         f"lie beyond")
    return notes


def _plan_pt(cfg: RunConfig, plan: _Plan, transferred: dict, vocab: int) -> None:
    """PT's final runs (:func:`pt_finals`) and their pending rows (failed rows when PT's LR grid found no LR)."""
    tuned = (f"transferred (LR tuned at width {pt_grid.tuning_width(cfg)})" if pt_grid.active(cfg)
             else "transferred (no tuning)")
    if not math.isfinite(transferred["optim.lr"]):
        grid = next((d for d in plan.searches if (d["model"] == "pt").all()), None)
        why = scaling_tables.no_lr(grid, "PT grid", " at the smallest scale")
        for sc, s in itertools.product(paradigms(cfg.sweep), cfg.sweep.scales):
            _failed(plan, {"model": "pt", "scaling": sc, "scale": s}, *why)
        return
    for label, over in pt_finals(cfg, transferred):
        plan.runs.append({"model": "pt", "scaling": over["model.scaling"], "scale": over["model.width"],
                          "seed": over["seed"], **_row_static(with_overrides(cfg, over), vocab),
                          "best_lr": transferred["optim.lr"], "from": tuned, "pending": len(plan.finals)})
        plan.finals.append(over)
        plan.labels.append(label)


def _run_finals(cfg: RunConfig, plan: _Plan, sdir: Path, group: str) -> None:
    """Run the fixed list of final trials (resumable: a ledger) seed by seed - every cell's first seed before any
    cell's second, so a study stopped part-way has every cell at about the same seed count - and fill each pending
    row with its result."""
    order = sorted(range(len(plan.finals)), key=lambda i: plan.finals[i]["seed"])  # stable: as planned within a seed
    finals = run_trials(cfg, [plan.finals[i] for i in order], sdir, "final", labels=[plan.labels[i] for i in order],
                        tags=[f"sweep={SWEEP}"], group=group)
    position = {i: pos for pos, i in enumerate(order)}
    for row in plan.runs:
        if "pending" in row:
            r = finals.iloc[position[row.pop("pending")]]
            row.update({k: r[k] for k in ("val_loss", "tokens", "status", "error", "trial_key")})
            if r.get("params") and math.isfinite(float(r["params"])):
                row["params"] = int(r["params"])  # counted on the built model


def _fits(runs: pd.DataFrame, sweep_cfg, notes: list[str]) -> dict[str, dict]:
    """x column ("params", "non_embedding_params", "train_flops") -> series -> ``fits.fit_scaling_law`` of loss."""
    fits = {"params": {}, "non_embedding_params": {}, "train_flops": {}}
    for series, g in runs.groupby("series"):
        for xcol, target in fits.items():
            try:
                target[series] = fits_mod.fit_scaling_law(g[xcol].astype(float), g["loss"].astype(float),
                                                          n_boot=sweep_cfg.bootstrap, seed=sweep_cfg.search_seed)
            except ValueError as e:
                notes.append(f"no {xcol} fit for {series}: {e}")
    return fits


def _figures(runs: pd.DataFrame, table: pd.DataFrame, pt_series: list[str], fits: dict, framings: dict, sdir: Path,
             split: str, notes: list[str]) -> dict[str, Path]:
    """Figure 2 (a: PT vs BERT, b: PT vs UT), loss vs training compute and the three framings' axes."""
    images, ylabel, by_series = {}, f"{split} loss (MLM)", runs.assign(model=runs["series"])
    for fig, other in (("fig2a_pt_vs_bert", "bert"), ("fig2b_pt_vs_ut", "ut")):
        pair = [*pt_series, other]
        if runs[runs["series"].isin(pair) & np.isfinite(runs["loss"])].empty:
            notes.append(f"{fig}.png skipped: no finite results for {pair}")
            continue
        images[fig] = plots.plot_scaling(by_series, sdir / f"{fig}.png", pair=pair, fits=fits["params"],
                                         loss_col="loss", model_col="model",
                                         summary=table.assign(model=table["series"]), ylabel=ylabel)
    if np.isfinite(runs["loss"]).any():
        images["loss_vs_compute"] = plots.plot_loss_vs_compute(by_series, sdir / "loss_vs_compute.png",
                                                               loss_col="loss", model_col="model",
                                                               fits=fits["train_flops"], ylabel=ylabel)
        images["framings"] = plots.plot_framings(by_series, sdir / "framings.png", fits, framings, ylabel=ylabel)
    return images


def _settings(cfg: RunConfig, plan: _Plan, provenance: dict, present: list[str], vocab: int) -> dict:
    """summary.json: the tuning effort per model, the baseline search space and the settings."""
    sweep_cfg = cfg.sweep
    return {"tuning_trials": baseline_tuning.trial_counts(cfg, provenance, plan.lr_info, present),
            "baseline_search_space": {k: list(v) for k, v in baseline_tuning.search_space(cfg).items()},
            "lr_search": plan.lr_info, "vocab_size": vocab, "scales": list(sweep_cfg.scales),
            "models": list(sweep_cfg.models), "scaling": sweep_cfg.scaling, "tokens": cfg.train.tokens,
            "baseline_search_tokens": baseline_tuning.search_tokens(cfg),
            "search_training_seed": baseline_tuning.search_training_seed(cfg)}


def final_seeds(cfg: RunConfig, model: str | None = None) -> list[int]:
    """Seeds of a model's final runs (None: the common ones): cfg.seed + i for sweep.model_seeds[model] (else
    sweep.seeds) runs, those past sweep.seeds one further on (cfg.seed + sweep.seeds trains the baselines' search
    trials)."""
    n, common = cfg.sweep.model_seeds.get(model, cfg.sweep.seeds), cfg.sweep.seeds
    return [cfg.seed + (i if i < common else i + 1) for i in range(n)]


def planned_trials(cfg: RunConfig) -> list[PlannedTrial]:
    """Every run of the sweep (``trial_plan``): per baseline and scale its search trials and final runs, then PT's
    grid and :func:`pt_finals`."""
    require_pt(cfg, PT_ONLY)
    sweep_cfg, data, model = cfg.sweep, cfg.data, shape_cache(cfg)
    tokens, batch = float(cfg.train.tokens), cfg.train.batch_size
    out = []
    for kind in (m for m in sweep_cfg.models if m in BASELINES):
        for s in sweep_cfg.scales:
            pt = model({"model.width": s, "model.scaling": paradigms(sweep_cfg)[0]})
            mcfg = match_shape(kind, pt, data.vocab_size, data.seq_len, data.mask_prob, sweep_cfg.match)
            out += baseline_tuning.planned_search(cfg, SWEEP, kind, s, mcfg)
            out += [PlannedTrial(SWEEP, "final", mcfg, tokens, sd, batch, s, f"final-{kind}-w{s}-s{sd - cfg.seed}")
                    for sd in final_seeds(cfg, kind)]
    pt = pt_finals(cfg, {}) if "pt" in sweep_cfg.models else []  # as the driver: no PT runs without model pt
    out += pt_grid.planned(cfg, SWEEP, model, paradigms(sweep_cfg)[0]) if pt_grid.active(cfg) else []
    return out + [PlannedTrial(SWEEP, "final", model({k: over[k] for k in ("model.width", "model.scaling")}), tokens,
                               over["seed"], batch, over["model.width"], label) for label, over in pt]
