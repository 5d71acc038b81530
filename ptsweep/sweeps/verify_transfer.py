"""verify-transfer: random-search check that the transferred point S is top-p at a larger width ([S] §3.1, spec §10).

    n_required = ceil(log(alpha) / log(1 - p))               (analysis.design.n_required; alpha = p = 0.05 -> 59)
    S'_j       = S * (1 + u_j), u_j ~ U[-perturb, +perturb]^7  (analysis.design.perturb), j < max(n_required, sweep.n)

Every run at sweep.width with the same budget: S at sweep.seeds seeds and each S'_j at sweep.perturbed_seeds of the
same seeds (:func:`point_seeds`: paired, the seed effect cancels), scored on the test split when the runs have one.
The regret verdict leads, the contrast rule and [S]'s strict test are secondary (docs/verdicts.md). Writes the rank
table, the runs, summary.json, report.md and Figure 1 to ``<out_dir>/<study>/``.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ptsweep import metric_keys
from ptsweep.analysis import design, plots, regret, verification
from ptsweep.config import TRANSFER_KEYS, RunConfig, with_overrides
from ptsweep.trials.ledger import with_ledger_metrics
from ptsweep.reports.outputs import (open_study, print_transfer_mismatch, publish, require_pt, save_table, score,
                                    sweep_tags)
from ptsweep.trials.ray_session import ray_session
from ptsweep.trials.runner import run_trials
from ptsweep.trials.trial_plan import PlannedTrial
from ptsweep.sweeps.transfer import config_point, read_transfer

SWEEP = "verify-transfer"
PT_ONLY = "verify-transfer checks PT's transferred hyperparameters, got {name}"


def point_seeds(cfg: RunConfig, j: int) -> list[int]:
    """Seeds of perturbed point j: cfg.seed + (j + r) mod m, r < k (k = sweep.perturbed_seeds or m)."""
    m = cfg.sweep.seeds
    k = cfg.sweep.perturbed_seeds or m
    return [cfg.seed + (j + r) % m for r in range(k)]


def plan(cfg: RunConfig, transferred: dict[str, float]) -> tuple[list[dict], list[str], int, int]:
    """(trial overrides, labels, n_required, n_run): sweep.seeds base runs first ("base-s<i>"), then every perturbed
    point at its paired seeds ("p<j>-s<seed offset>")."""
    sweep_cfg = cfg.sweep
    n_req = design.n_required(sweep_cfg.alpha, sweep_cfg.p)
    n_run = max(n_req, sweep_cfg.n)
    points = design.perturb(transferred, n_run, sweep_cfg.perturb, seed=sweep_cfg.search_seed)
    runs = [(f"base-s{i}", transferred, cfg.seed + i) for i in range(sweep_cfg.seeds)]
    runs += [(f"p{j:03d}-s{s - cfg.seed}", pt, s) for j, pt in enumerate(points) for s in point_seeds(cfg, j)]
    trials = [{**values, "model.width": sweep_cfg.width, "seed": s} for _, values, s in runs]
    return trials, [label for label, _, _ in runs], n_req, n_run


def planned_trials(cfg: RunConfig) -> list[PlannedTrial]:
    """Every run of :func:`plan` around the config's own point (the runs do not depend on the transferred values)."""
    require_pt(cfg, PT_ONLY)
    trials, labels, _, _ = plan(cfg, config_point(cfg))
    model = with_overrides(cfg, {"model.width": cfg.sweep.width}).model  # every run's shape (plan's model.width)
    return [PlannedTrial(SWEEP, "final", model, float(cfg.train.tokens), int(t["seed"]), cfg.train.batch_size,
                         int(t["model.width"]), label) for t, label in zip(trials, labels)]


def run(cfg: RunConfig) -> Path:
    """Run (or resume) the check; write the tables, summary.json and Figure 1 (a, b); return the study folder."""
    require_pt(cfg, PT_ONLY)
    t0 = time.time()
    transferred, provenance, tpath = read_transfer(cfg)
    name, sdir = open_study(cfg, SWEEP)
    wcfg = with_overrides(cfg, {"model.width": cfg.sweep.width})  # a width PT cannot build fails here, key named
    trials, labels, n_req, n_run = plan(cfg, transferred)
    with ray_session(cfg.ray):
        df = run_trials(cfg, trials, sdir, "runs", labels=labels, tags=sweep_tags(SWEEP, wcfg.model),
                        group=name.replace("/", "-"))
    df = with_ledger_metrics(df.rename(columns={"label": "trial"}), sdir)
    save_table(df, sdir, "trials")

    split = score(df)
    points = _points(df)
    table, contrast, reg, images = _compare(cfg, df, points, transferred, split, sdir)
    table = table[[c for c in RESULT_COLUMNS if c in table.columns]]
    save_table(table, sdir, "results")

    settings = {**_settings(cfg, split), "transfer_file": str(tpath), "transfer_provenance": provenance,
                "base": transferred}
    summary = _summary(contrast, reg, df, points, split, (n_req, n_run), settings)
    summary.update({"transfer_mismatch": provenance.get("mismatch", {}), "settings": settings, "study": name,
                    "status_counts": {str(k): int(c) for k, c in df["status"].value_counts().items()},
                    "plots": sorted(Path(p).name for p in images.values()), "wall_s": time.time() - t0,
                    "notes": []})
    summary["headline"] = headline(summary)
    publish(cfg, sdir, SWEEP, summary, {"results": table, "trials": df}, images,
            {"verdict": summary["verdict"], "n_required": n_req, "n_run": n_run}, report=report)
    print_transfer_mismatch(SWEEP, summary)
    print(f"verify-transfer: {summary['headline']}")
    ctx = {"context_gain": summary["base_context_gain"], "context_gain_se": summary["base_context_gain_se"]}
    print(f"verify-transfer: base point {metric_keys.context_line(ctx)}; no-context baseline "
          f"{summary['no_context_loss']:.4f}")
    return sdir


RESULT_COLUMNS = ["rank", "trial", *TRANSFER_KEYS, "distance", "val_loss", "loss", "delta", "se", "t", "rel_increase",
                  "n_seeds", "status", "error", "is_base"]
"""Columns of results.parquet / .csv, in order (those present)."""


def _points(df: pd.DataFrame) -> pd.DataFrame:
    """One row per perturbed point ("p<j>"): its 7 values, ``losses`` and ``seed`` (lists over its seeds), mean
    val_loss, loss (mean, inf unless every seed is finite), n_seeds, status and error."""
    runs = df[~df["trial"].str.startswith("base-")].copy()
    runs["point"] = runs["trial"].str.slice(0, 4)
    agg = {**{k: "first" for k in TRANSFER_KEYS}, "loss": list, "seed": list, "val_loss": "mean",
           "status": lambda x: "ok" if (x == "ok").all() else ",".join(sorted(set(x) - {"ok"})),
           "error": lambda x: "; ".join(e for e in x if e)}
    points = runs.groupby("point", sort=True).agg(agg).reset_index().rename(columns={"point": "trial",
                                                                                    "loss": "losses"})
    points["loss"] = [float(np.mean(v)) if np.all(np.isfinite(v)) else math.inf for v in points["losses"]]
    points["n_seeds"] = [len(v) for v in points["losses"]]
    return points


def _settings(cfg: RunConfig, split: str) -> dict:
    sweep_cfg = cfg.sweep
    return {"width": sweep_cfg.width, "alpha": sweep_cfg.alpha, "p": sweep_cfg.p, "n": sweep_cfg.n,
            "perturb": sweep_cfg.perturb, "seeds": sweep_cfg.seeds,
            "perturbed_seeds": sweep_cfg.perturbed_seeds or sweep_cfg.seeds, "test_alpha": sweep_cfg.test_alpha,
            "equivalence_margin": sweep_cfg.equivalence_margin, "regret_tolerance": sweep_cfg.regret_tolerance,
            "loss_split": split, "perturb_seed": sweep_cfg.search_seed, "seed": cfg.seed,
            "tokens": cfg.train.tokens}


def _compare(cfg: RunConfig, df: pd.DataFrame, points: pd.DataFrame, transferred: dict, split: str,
             sdir: Path) -> tuple[pd.DataFrame, dict, dict, dict]:
    """(rank table, contrast verdict, regret analysis with its "verdict", figures) of the perturbed points against the
    base point's seeds; when every base seed failed, an inconclusive verdict and no surface."""
    sweep_cfg = cfg.sweep
    is_base = df["trial"].str.startswith("base-")
    base_ok = df[is_base & np.isfinite(df["loss"])]
    base_losses, base_seeds = base_ok["loss"].astype(float).tolist(), base_ok["seed"].astype(int).tolist()
    if not base_losses:  # the base point failed with every seed: nothing to compare against
        table = points.drop(columns=["losses", "seed"]).assign(
            distance=[design.distance({k: r[k] for k in TRANSFER_KEYS}, transferred) for _, r in points.iterrows()],
            rel_increase=np.nan, rank=np.nan, is_base=False)
        contrast = {"verdict": "inconclusive", "statement": f"INCONCLUSIVE: the base point failed with all "
                    f"{sweep_cfg.seeds} seed(s) ({'; '.join(df[is_base]['error'].astype(str))})"}
        reg = {"available": False, "reason": "the base point failed with every seed"}
        return table, contrast, {"regret": reg, "verdict": regret.regret_verdict(None, reason=reg["reason"])}, {}
    contrast = verification.verdict(base_losses, points["losses"].tolist(), alpha=sweep_cfg.alpha, p=sweep_cfg.p,
                                    base_seeds=base_seeds, perturbed_seeds=points["seed"].tolist(),
                                    test_alpha=sweep_cfg.test_alpha, margin=sweep_cfg.equivalence_margin)
    points["delta"], points["se"], points["t"] = contrast["delta"], contrast["se"], contrast["t"]
    try:
        reg = regret.regret_analysis(transferred, points[list(TRANSFER_KEYS)].to_dict("records"),
                                     points["losses"].tolist(), base_losses, point_seeds=points["seed"].tolist(),
                                     base_seeds=base_seeds, rel=sweep_cfg.perturb,
                                     tolerance=sweep_cfg.regret_tolerance, test_alpha=sweep_cfg.test_alpha,
                                     seed=sweep_cfg.search_seed)
        regret_result = {"regret": reg, "verdict": regret.regret_verdict(reg)}
    except ValueError as e:  # too few points / no residual: said in the verdict, no surface
        regret_result = {"regret": {"available": False, "reason": str(e)},
                         "verdict": regret.regret_verdict(None, reason=str(e))}
    table = verification.rank_table(points.drop(columns=["losses", "seed"]), transferred, base_losses,
                                    keys=list(TRANSFER_KEYS), loss_col="loss")
    table.loc[table["is_base"], ["trial", "status", "val_loss"]] = [f"base (mean of {len(base_losses)} seed(s))", "ok",
                                                                   float(base_ok["val_loss"].mean())]
    table.attrs["noise_band"] = contrast["noise_band"]
    return table, contrast, regret_result, _figures(table, contrast, regret_result["regret"], split, sdir,
                                                    sweep_cfg.width)


def _figures(table: pd.DataFrame, contrast: dict, reg: dict, split: str, sdir: Path, width: int) -> dict:
    """Figure 1 (a: distance vs loss increase, b: rank of the base point) and, with a surface, 1c."""
    what = f"{split} loss"
    images = {"fig1a_distance": plots.plot_distance_vs_increase(
        table, sdir / "fig1a_distance.png",
        title=f"Width {width}: distance vs {what} increase ({contrast['verdict']})")}
    images["fig1b_rank"] = plots.plot_rank_curve(
        table, sdir / "fig1b_rank.png", title=f"Transfer to width {width}: rank of the base point ({what})")
    if "axis_curves" in reg:
        images["fig1c_surface"] = plots.plot_regret_axes(reg, sdir / "fig1c_surface.png")
    return images


def _summary(contrast: dict, regret_result: dict, df: pd.DataFrame, points: pd.DataFrame, split: str,
             n_planned: tuple[int, int], settings: dict) -> dict:
    """summary.json's verdict keys (the regret verdict first), the base point's losses and its context."""
    rv, base_df = regret_result["verdict"], df[df["trial"].str.startswith("base-")]
    return {**contrast, "verdict": rv["verdict"], "contrast_verdict": contrast["verdict"],
            "contrast_statement": contrast["statement"],
            "statement": f"{rv['statement']}. Secondary, contrast rule: {contrast['statement']}",
            "regret": regret_result["regret"], "regret_tolerance": settings["regret_tolerance"],
            "n_required": n_planned[0], "n_run": n_planned[1], "n_perturbed_run": int(len(points)),
            "base_losses": [float(x) for x in base_df["loss"]], "base_seeds": base_df["seed"].tolist(),
            "base_val_losses": [float(x) for x in base_df["val_loss"]],
            "base_val_loss_se": [float(x) for x in base_df["val_loss_se"]],
            "base_test_loss_se": [float(x) for x in base_df["test_loss_se"]],
            "unigram_loss": float(base_df["test_unigram_loss" if split == "test" else "unigram_loss"].mean()),
            **_context(base_df, df, "test_" if split == "test" else "")}


def headline(summary: dict) -> str:
    """The transfer result's first line: the regret verdict when a curved surface bounds the regret; otherwise why
    none is bounded, then the strict test's and the contrast rule's outcome, each said once."""
    no_bound = regret.missing_bound(summary, len(TRANSFER_KEYS))
    if no_bound is None:
        return summary["statement"]
    strict = summary.get("strict") or {}
    strict_why = strict.get("statement", "").split(": ", 1)[-1].rstrip(".")  # without its "strict test FAILS" label
    reasons = "; ".join(summary.get("reasons") or []) or summary.get("contrast_statement", "").rstrip(".")
    return (f"NO REGRET BOUND: {no_bound}. Instead: strict test of [S] §3.1 **{strict.get('verdict', 'n/a')}** - "
            f"{strict_why}; contrast rule **{str(summary.get('contrast_verdict', 'n/a')).upper()}** - {reasons}.")


def _context(base_df: pd.DataFrame, df: pd.DataFrame, prefix: str) -> dict:
    """The base point's no-context baseline and context gain (seed mean ± SE) on the scored split, and how many
    finished runs learned context."""
    def col(frame, key):
        return frame[prefix + key].astype(float) if prefix + key in frame else pd.Series(dtype=float)

    g, se = metric_keys.seed_mean(col(base_df, "context_gain"), col(base_df, "context_gain_se"))
    nc = col(base_df, "no_context_loss")
    ok = df[df["status"].astype(str) == "ok"]
    learned = sum(metric_keys.learned_context({prefix + "context_gain": a, prefix + "context_gain_se": b}, prefix)
                  for a, b in zip(col(ok, "context_gain"), col(ok, "context_gain_se")))
    return {"no_context_loss": float(nc.mean()) if len(nc) else math.nan, "base_context_gain": g,
            "base_context_gain_se": se, "context_learned_runs": int(learned), "finished_runs": int(len(ok))}


def report(summary: dict) -> str:
    """report.md: the regret verdict with its numbers, a row per hyperparameter, the strict test, the contrast rule."""
    reg, split = summary.get("regret", {}), summary["settings"]["loss_split"]
    ctx = {"context_gain": summary.get("base_context_gain", math.nan),
           "context_gain_se": summary.get("base_context_gain_se", math.nan)}
    out = [f"# verify-transfer at width {summary['settings']['width']}: {summary['verdict'].upper()}", "",
           headline(summary), "",
           f"Scored on the {split} split; tolerance {summary['regret_tolerance']:.2%} of the loss "
           f"(sweep.regret_tolerance).", "",
           f"- Base point: loss {np.mean(summary.get('base_losses') or [math.nan]):.4f} (unigram "
           f"{summary.get('unigram_loss', math.nan):.4f}, no-context {summary.get('no_context_loss', math.nan):.4f}); "
           f"{metric_keys.context_line(ctx)}; "
           f"{summary.get('context_learned_runs', 0)} of {summary.get('finished_runs', 0)} finished runs learned "
           f"context.", ""]
    if reg.get("available", True) and "regret_rel" in reg:
        lo, hi = reg["regret_rel_ci"]
        bf = reg["better_fraction"]
        out += [f"- **Regret** (loss S leaves on the table inside the +-{reg['rel']:.0%} box): "
                f"{reg['regret_rel']:.3%} [{lo:.3%}, {hi:.3%}] = {reg['regret']:.4g} nats; {reg['interval']}. "
                f"The fitted surface's own box minimum gives {reg['regret_rel_plugin']:.3%} (biased high: the "
                f"minimum of a noisy surface is too low), box minimum loss {reg['box_min_loss']:.4f}."
                + (f" Linear surface: this is the plane {regret.PLANE_CAVEAT}; more points allow a quadratic."
                   if reg["model"] == "linear" else ""),
                f"- Surface: {reg['model']} ({reg['model_reason']}); {reg['n_points']} points, {reg['n_runs']} runs, "
                f"df = {reg['df']}, run-noise sd {reg['sigma_rel']:.3%}; lack of fit p = {reg['lack_of_fit']['p']}.",
                "- Fraction of the box better than S: " + (f"{bf:.1%} [{reg['better_fraction_ci'][0]:.1%}, "
                                                          f"{reg['better_fraction_ci'][1]:.1%}]" if bf is not None
                                                          else "not estimable from a linear surface") + ".",
                "", "| hyperparameter | box minimum at (x S) | +{0:.0%}: loss change | -{0:.0%}: loss change |"
                .format(reg["rel"]), "|---|---|---|---|"]
        for k, a in reg["axes"].items():
            cell = lambda e: f"{e['rel_change']:+.3%} ± {(e['ci'][1] - e['ci'][0]) / 2:.3%}"  # noqa: E731
            out.append(f"| {k} | {a['min_factor']:.3g} [{a['min_factor_ci'][0]:.3g}, {a['min_factor_ci'][1]:.3g}] | "
                       f"{cell(a['up'])} | {cell(a['down'])} |")
        out += ["", f"Axis intervals: {reg['axis_interval']}. Figure: fig1c_surface.png.", ""]
    else:
        out += [f"- Regret: not estimated ({reg.get('reason')}).", ""]
    out += [f"- Regret verdict: {summary['statement'].split('. Secondary, contrast rule: ')[0]}.",
            f"- Strict test of [S] §3.1: **{summary.get('strict', {}).get('verdict', 'n/a')}** - "
            f"{summary.get('strict', {}).get('statement', '')}",
            f"- Contrast rule (secondary): **{summary['contrast_verdict']}** - {summary['contrast_statement']}", ""]
    return "\n".join(out)

