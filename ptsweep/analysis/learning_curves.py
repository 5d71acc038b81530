"""Learning curves of scaling-curves' reported runs (the in-loop evaluations of each trial's ``history.jsonl``: loss,
baselines, [MASK]-target context gain), their figures, and whether the budget outlasts the baselines' plateau: a
comparison at a budget shorter than a plateau measures who leaves it first (``framings.plateau_gate``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ptsweep.analysis.plots import COLORS, MODEL_LABELS, new_figure, save_figure

CURVE_KEYS = ("val_loss", "val_loss_se", "unigram_loss", "no_context_loss", "context_gain", "context_gain_se")
"""The in-loop evaluation numbers a curve keeps."""


def read_curves(runs: pd.DataFrame, study_dir: Path) -> pd.DataFrame:
    """One row per (run, in-loop evaluation): series, scale, seed, trial_key, step, tokens and :data:`CURVE_KEYS`,
    from ``<study_dir>/trials/<trial_key>/history.jsonl``. ``runs``: scaling-curves' runs table (one row per
    reported run); runs without a history (failed before training) add no row."""
    from ptsweep.trials.results import read_curve

    rows = []
    for _, r in runs.iterrows():
        if not r["trial_key"]:
            continue
        for rec in read_curve(Path(study_dir) / "trials" / str(r["trial_key"]) / "history.jsonl"):
            rows.append({"series": r["series"], "scale": int(r["scale"]), "seed": int(r["seed"]),
                         "trial_key": r["trial_key"], "step": int(rec["step"]), "tokens": float(rec["tokens"]),
                         **{k: float(rec.get(k, math.nan)) for k in CURVE_KEYS}})
    return pd.DataFrame(rows, columns=["series", "scale", "seed", "trial_key", "step", "tokens", *CURVE_KEYS])


def crossing_step(curve: pd.DataFrame, threshold: float) -> float:
    """The first evaluated step of one run whose context gain is >= ``threshold`` (inf if it never is)."""
    hit = curve[curve["context_gain"] >= threshold]
    return float(hit["step"].min()) if len(hit) else math.inf


def interpolated_crossing(curve: pd.DataFrame, threshold: float) -> float:
    """Where the straight line from the evaluation before :func:`crossing_step` to that step meets ``threshold``
    (the step itself if it is the first evaluation; inf if it never is)."""
    first = crossing_step(curve, threshold)
    before = curve[curve["step"] < first].sort_values("step")
    if math.isinf(first) or before.empty:
        return first
    s0, g0 = float(before["step"].iloc[-1]), float(before["context_gain"].iloc[-1])  # the last evaluation below
    g1 = float(curve.loc[curve["step"] == first, "context_gain"].iloc[0])
    return s0 + (first - s0) * (threshold - g0) / (g1 - g0)


def seed_crossings(curves: pd.DataFrame, threshold: float) -> dict[tuple, list[tuple[pd.DataFrame, float]]]:
    """{(series, scale): [(curve, step), one per seed]}: each seed's :func:`crossing_step`, which the budget check
    and the plateau gate judge."""
    return {(series, scale): [(g, crossing_step(g, threshold)) for _, g in cell.groupby("seed")]
            for (series, scale), cell in curves.groupby(["series", "scale"])}


def budget_check(curves: pd.DataFrame, budget_steps: int, threshold: float = 1.0, factor: float = 1.5) -> dict:
    """Does the budget cover ``factor`` x the step at which the slowest baseline (a series not starting with 'pt'; a
    cell's step is its slowest seed's) first reaches ``threshold`` nats of context gain? ``covered`` None without
    baseline curves; ``crossings``: "<series> at scale <s>" -> each seed's step (inf: never); ``slowest_interpolated``:
    the slowest seed's :func:`interpolated_crossing`."""
    cells = {f"{s} at scale {sc}": runs for (s, sc), runs in seed_crossings(curves, threshold).items()}
    crossings = {k: [step for _, step in runs] for k, runs in cells.items()}
    baselines = {k: max(v) for k, v in crossings.items() if not k.startswith("pt")}
    out = {"threshold": threshold, "factor": factor, "budget_steps": int(budget_steps), "crossings": crossings,
           "slowest": None, "slowest_step": None, "slowest_interpolated": None, "covered": None}
    if baselines:
        slowest = max(baselines, key=baselines.get)
        slowest_curve = max(cells[slowest], key=lambda run: run[1])[0]
        out.update(slowest=slowest, slowest_step=baselines[slowest],
                   slowest_interpolated=interpolated_crossing(slowest_curve, threshold),
                   covered=bool(budget_steps >= factor * baselines[slowest]))
    return out


def plateau_cells(curves: pd.DataFrame, budget_steps: int, threshold: float = 1.0,
                  factor: float = 1.5) -> dict[tuple[str, str], str]:
    """{(series, scale): why} of every cell, PT's included, whose slowest seed first reaches ``threshold`` nats of
    context gain (:func:`seed_crossings`) after ``budget_steps`` / ``factor``, or never (``framings.plateau_gate``);
    cells without curves are not judged."""
    out, limit = {}, budget_steps / factor
    for (series, scale), runs in seed_crossings(curves, threshold).items():
        step = max(s for _, s in runs)
        if step > limit:
            when = (f"never reached {threshold:+g} nat of context gain in {budget_steps:,} steps" if math.isinf(step)
                    else f"first reached {threshold:+g} nat of context gain at step {step:,.0f}, after "
                         f"{budget_steps:,} / {factor:g} steps")
            out[(str(series), str(int(scale)))] = f"{series} {when}"
    return out


def plateau_text(late: dict[str, str] | None, judged: int) -> str:
    """The plateau gate in one sentence; ``late``: "<series> at scale <s>" -> why (:func:`plateau_cells`), None: off;
    ``judged``: how many (series, scale) cells have learning curves (the others are not judged)."""
    if late is None:
        return "Plateau gate: off (sweep.plateau_gate=false): comparisons with a model still leaving its plateau count."
    if not judged:
        return "Plateau gate: no reported run has a learning curve yet, so it has judged nothing."
    if not late:
        return (f"Plateau gate: all {judged} (model, scale) cells with learning curves reached the threshold in time; "
                "no comparison is withheld for it.")
    return ("Plateau gate: no verdict from the comparisons of " + "; ".join(f"{cell} ({why})" for cell, why in
                                                                        late.items()) + ".")


def budget_text(check: dict) -> str:
    """The budget check in one sentence."""
    t, f, b = check["threshold"], check["factor"], check["budget_steps"]
    if check["covered"] is None:
        return f"Budget check: no baseline learning curves, so nothing says whether {b:,} steps outlast a plateau."
    step = check["slowest_step"]
    seeds = ", ".join("never" if math.isinf(s) else f"{s:,.0f}" for s in check["crossings"][check["slowest"]])
    if math.isinf(step):
        return (f"Budget check: NOT COVERED - {check['slowest']} never reached {t:+g} nat of context gain in "
                f"{b:,} steps (seeds: {seeds}); a longer budget is needed before its comparisons mean anything.")
    verdict = f"covered (>= {f:g}x)" if check["covered"] else f"NOT COVERED (< {f:g}x): train longer"
    between = check.get("slowest_interpolated") or step
    return (f"Budget check: the slowest baseline, {check['slowest']}, first reaches {t:+g} nat of context gain at "
            f"step {step:,.0f} (seeds: {seeds}); the budget of {b:,} steps is {b / step:.2f}x that: {verdict}. "
            f"Between evaluations it crosses at ~{between:,.0f} ({b / between:.3f}x).")


def plot_scale(curves: pd.DataFrame, scale: int, path: Path) -> Path:
    """One scale's figure: validation loss (left) and [MASK]-target context gain (right) against tokens, each
    model's seed mean as a line and its seeds faint, with the unigram and no-context baselines (their mean over
    the evaluations: they depend on the targets, not the model)."""
    g = curves[curves["scale"] == scale]
    fig, [[ax_loss, ax_gain]] = new_figure(1, 2, size=(12.0, 4.5))
    for i, (series, s) in enumerate(g.groupby("series")):
        color = COLORS.get(str(series).split("-")[0], f"C{i}")
        label = MODEL_LABELS.get(str(series), str(series))
        for _, run in s.groupby("seed"):
            ax_loss.plot(run["tokens"], run["val_loss"], color=color, alpha=0.25, lw=0.8)
            ax_gain.plot(run["tokens"], run["context_gain"], color=color, alpha=0.25, lw=0.8)
        mean = s.groupby("tokens")[["val_loss", "context_gain"]].mean()
        n = s["seed"].nunique()
        ax_loss.plot(mean.index, mean["val_loss"], color=color, lw=1.8, label=f"{label} (mean of {n} seed(s))")
        ax_gain.plot(mean.index, mean["context_gain"], color=color, lw=1.8, label=label)
    for key, style, name in (("unigram_loss", ":", "unigram (no context)"),
                             ("no_context_loss", "--", "no-context predictor (visible tokens)")):
        level = float(np.nanmean(g[key])) if len(g) else math.nan
        if math.isfinite(level):
            ax_loss.axhline(level, color="0.4", ls=style, lw=1.0, label=f"{name}: {level:.3f}")
    ax_gain.axhline(0.0, color="0.4", ls=":", lw=1.0, label="0: no context learned")
    ax_loss.set(xlabel="training tokens", ylabel="validation loss (MLM)", title=f"Loss, PT width {scale}")
    ax_gain.set(xlabel="training tokens", ylabel="context gain on [MASK] targets (nats)",
                title=f"Context gain, PT width {scale}")
    for ax in (ax_loss, ax_gain):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    return save_figure(fig, path)


def plot_all(curves: pd.DataFrame, study_dir: Path) -> dict[str, Path]:
    """``learning_curves_w<scale>.png`` for every scale with curves: {image name: path}."""
    return {f"learning_curves_w{s}": plot_scale(curves, int(s), Path(study_dir) / f"learning_curves_w{s}.png")
            for s in sorted(curves["scale"].unique())}
