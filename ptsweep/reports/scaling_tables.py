"""scaling-curves' tables and report text: one row per run (:func:`runs_table`, scored on the test split when every
run has one), one row per series x scale with seed means and 95 % t intervals (:func:`cells`), and the report's
lines (:func:`report_lines`: each cell's loss beside the context-free baselines, the budget check, the framings, and
the full-budget tuning runs, :func:`tuning_rows`).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ptsweep import metric_keys
from ptsweep.analysis import framings as framings_mod
from ptsweep.analysis import claims, learning_curves, target_kinds
from ptsweep.analysis.verification import t_ppf
from ptsweep.trials.ledger import with_ledger_metrics
from ptsweep.reports.outputs import score


RUN_COLUMNS = ["series", "model", "scaling", "scale", "seed", "width", "params", "non_embedding_params",
               "flops_per_token", "tokens", "train_flops", "loss", "loss_token_se", "val_loss", "val_loss_se",
               "test_loss", "test_loss_se", "unigram", "no_context", "context_gain", "context_gain_se", "mask_loss",
               "visible_loss", "visible_no_context", "best_lr",
               "best_warmup_frac", "n_layers", "n_heads", "match_ratio", "tuning_trials", "status", "error", "from",
               "trial_key"]
"""Columns of runs.parquet / .csv, in order (those present)."""


def runs_table(rows: list[dict], scalings: list[str], sdir: Path) -> tuple[pd.DataFrame, str]:
    """(one row per run with its ledger metrics and the scored ``loss``, the split scored): the held-out test split
    when every finished run has one, else validation."""
    runs = pd.DataFrame([{"trial_key": "", **r} for r in rows])
    for col in ("val_loss", "tokens", "params", "non_embedding_params", "flops_per_token"):  # none in failed rows
        runs[col] = runs[col].astype(float) if col in runs else math.nan
    # plot/fit series: 'pt' (or 'pt-rank' for the second paradigm when both are run), 'bert', 'ut'
    runs["series"] = [m if m != "pt" or sc == scalings[0] else f"pt-{sc}"
                      for m, sc in zip(runs["model"], runs["scaling"])]
    runs["trial_key"] = runs["trial_key"].astype(str)
    runs = with_ledger_metrics(runs, sdir)
    split = score(runs)
    pre = "test_" if split == "test" else ""
    runs["loss_token_se"] = runs[f"{split}_loss_se"]
    runs["unigram"] = runs[f"{pre}unigram_loss"]
    runs["no_context"] = runs[f"{pre}no_context_loss"]
    runs["context_gain"], runs["context_gain_se"] = runs[f"{pre}context_gain"], runs[f"{pre}context_gain_se"]
    runs["mask_loss"] = runs[f"{pre}mask_loss"]
    visible = [metric_keys.visible_targets(r, split) for r in runs.to_dict("records")]
    runs["visible_loss"] = [v for v, _ in visible]
    runs["visible_no_context"] = [nc for _, nc in visible]
    runs["train_flops"] = runs["flops_per_token"].astype(float) * runs["tokens"]
    runs = runs.sort_values(["series", "scale", "seed"]).reset_index(drop=True)
    return runs[[c for c in RUN_COLUMNS if c in runs.columns]], split


def no_lr(search: pd.DataFrame | None, what: str, where: str = "") -> tuple[str, str]:
    """(reason, status) of a (model, scale) whose LR search (``what``: "search", "PT grid") gave no LR: its trials
    not in the results folder yet (report only: 'missing'), or every one failed or diverged ('failed')."""
    missing = int((search["status"] == "missing").sum()) if search is not None and "status" in search else 0
    if missing:
        return f"{missing} of {len(search)} {what} trials{where} are not in the results folder yet", "missing"
    return f"every {what} trial{where} failed or diverged", "failed"


def cells(runs: pd.DataFrame, lr_info: dict, spreads: dict[tuple[str, str], tuple[float, int]]) -> pd.DataFrame:
    """One row per (series, scale): means over seeds with 95 % t intervals from the cell's own seed variance
    (``spreads``, ``model_spread.cell_spreads``)."""
    cells = {key: g for key, g in runs.groupby(["series", "scale"])}
    rows = []
    for (series, scale), g in cells.items():
        var, df = spreads[(str(series), str(int(scale)))]
        q = t_ppf(0.5 + 0.95 / 2, df) if df else math.nan  # 95 % t intervals
        rows.append(cell_row(series, scale, g, q, var, lr_info))
    return pd.DataFrame(rows).sort_values(["series", "scale"]).reset_index(drop=True)


def cell_row(series: str, scale, g: pd.DataFrame, q: float, seed_var: float, lr_info: dict) -> dict:
    fin = g[np.isfinite(g["loss"])]
    first = g.iloc[0]
    n = len(fin)
    mean = float(fin["loss"].mean()) if n else math.inf
    half = q * math.sqrt(seed_var / n) if n and math.isfinite(seed_var) else math.nan
    statuses = sorted(set(g["status"].astype(str)))

    def seed_mean(col: str, empty: float = math.nan) -> float:
        return float(fin[col].mean()) if n else empty

    return {
        "model": first["model"], "scaling": first["scaling"], "series": series, "scale": int(scale),
        **{k: first.get(k) for k in ("width", "params", "non_embedding_params", "flops_per_token")},
        "tokens": seed_mean("tokens"),
        "loss": mean, "loss_sd": float(fin["loss"].std(ddof=1)) if n > 1 else math.nan,
        "loss_lo": mean - half, "loss_hi": mean + half, "loss_token_se": seed_mean("loss_token_se"),
        "val_loss": seed_mean("val_loss", math.inf), "val_loss_se": seed_mean("val_loss_se"),
        "test_loss": seed_mean("test_loss"), "test_loss_se": seed_mean("test_loss_se"),
        "unigram_loss": seed_mean("unigram"), "no_context_loss": seed_mean("no_context"),
        **{k: seed_mean(k) for k in ("mask_loss", "visible_loss", "visible_no_context")},
        **dict(zip(("context_gain", "context_gain_se"),
                   metric_keys.seed_mean(fin["context_gain"], fin["context_gain_se"]))),
        "n_seeds": n,
        **{k: first.get(k) for k in ("best_lr", "best_warmup_frac", "n_layers", "n_heads", "match_ratio",
                                     "tuning_trials")},
        "lr_edge": lr_info.get(f"{first['model']}-w{int(scale)}", {}).get("edge", ""),
        "status": "ok" if statuses == ["ok"] else ",".join(statuses),
        "error": "; ".join(dict.fromkeys(e for e in g["error"].astype(str) if e and e != "nan")),
    }


def report_lines(table: pd.DataFrame, split: str, summary: dict) -> list[str]:
    """report.md's body (also printed): [S]'s claims and the other baselines beside PT (``claims``),
    :func:`context_lines`, the differences by kind of target (``target_kinds``), the budget check, plateau gate and
    exit steps, then ``framings.report_lines``."""
    budget = [learning_curves.budget_text(summary["budget_check"]), ""] if "budget_check" in summary else []
    if "plateau_late" in summary:
        judged = len((summary.get("budget_check") or {}).get("crossings") or {})
        budget += [learning_curves.plateau_text(summary["plateau_late"], judged), ""]
    return [*claims.claim_lines(summary), *claims.others_lines(summary),
            *context_lines(table, split, summary.get("match", "total")), *target_kinds.report_lines(summary), *budget,
            *claims.exit_lines(summary), *framings_mod.report_lines(summary), *tuning_lines(summary)]


def tuning_rows(lr_table: pd.DataFrame, sdir: Path, budget_steps: int, threshold: float,
                full_searches: bool) -> list[dict]:
    """One row per LR-tuning trial that ran the whole budget (and, when ``full_searches`` says every search trial
    runs it, per trial still missing): model, scale, LR, search round, status, validation and test loss, test
    context gain ± SE, the first in-loop evaluation with ``threshold`` nats of context gain (inf: never; nan: no
    curve) and whether the last one is below it again. Shorter (early-stopped or fractional) trials are left out."""
    from ptsweep.trials.results import read_curve

    rows = []
    for _, r in lr_table.iterrows():
        if not (r.get("steps") == budget_steps or (full_searches and r["status"] == "missing")):
            continue
        curve = pd.DataFrame(read_curve(sdir / "trials" / str(r["trial_key"]) / "history.jsonl"))
        exit_step = learning_curves.crossing_step(curve, threshold) if len(curve) else math.nan
        fell = bool(math.isfinite(exit_step) and curve["context_gain"].iloc[-1] < threshold)  # lost it again
        num = pd.to_numeric(r.reindex(["search_round", "val_loss", "test_loss", "test_context_gain",
                                       "test_context_gain_se"]), errors="coerce").astype(float)  # None -> nan
        rows.append({"model": str(r["model"]), "scale": int(r["scale"]), "lr": float(r["optim.lr"]),
                     "round": int(0 if math.isnan(num["search_round"]) else num["search_round"]),
                     "status": str(r["status"]), "exit_step": exit_step, "fell_back": fell,
                     **num.drop("search_round").to_dict()})
    return sorted(rows, key=lambda x: (x["model"], x["scale"], x["lr"]))


def tuning_lines(summary: dict) -> list[str]:
    """Markdown table of :func:`tuning_rows` (``summary["tuning_runs"]``), set off by a blank line; none without
    rows."""
    rows = summary.get("tuning_runs") or []
    if not rows:
        return []
    threshold = (summary.get("budget_check") or {}).get("threshold", 1.0)
    out = ["", f"Tuning runs at the full budget (training seed {summary.get('search_training_seed')}, one run "
           f"each: they choose the LRs, they compare no models):", "", "| model at scale | LR | round | validation | "
           f"test | test context gain | {threshold:+g} nat at step |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        head = f"| {r['model']} at scale {r['scale']} | {r['lr']:g} | {r['round']} |"
        if r["status"] != "ok":
            out.append(f"{head} {r['status']} | | | |")
            continue
        step = r["exit_step"]
        shown = "no curve" if math.isnan(step) else "never" if math.isinf(step) else f"{step:,.0f}"
        shown += f" (below {threshold:+g} at the end)" if r["fell_back"] else ""
        out.append(f"{head} {r['val_loss']:.3f} | {r['test_loss']:.3f} | {r['test_context_gain']:+.3f} ± "
                   f"{r['test_context_gain_se']:.3f} | {shown} |")
    return [*out, ""]


def context_lines(table: pd.DataFrame, split: str, match: str = "total") -> list[str]:
    """One line per (series, scale): its size (:func:`size_text`), loss next to the unigram and no-context
    baselines, the [MASK]-target context gain (seed mean ± SE), marked when not learned, and the loss on the visible
    targets beside the no-context predictor's; a failed cell gives its error."""
    lines = [f"Losses on the {split} split with both context-free baselines; context gain = unigram - model on "
             f"[MASK] targets (> 2 SE = learned); visible targets = those shown as themselves or as a random token, "
             f"where the no-context predictor reads the token shown; a baseline's size is its shape's count over "
             f"PT's at the same scale (`sweep.match` = {match}: the closest shape of the sizing rule, not an exact "
             f"match):", ""]
    for _, r in table.iterrows():
        if r.get("status") in ("failed", "missing"):  # no run to score: why, not an inf loss beside nan baselines
            lines.append(f"- {r['series']} at scale {int(r['scale'])}: {r['status']}: {r.get('error')}")
            continue
        visible = r.get("visible_loss", math.nan)  # NaN for records without the target counts
        lines.append(f"- {r['series']} at scale {int(r['scale'])}{size_text(r, match)}: loss {r['loss']:.4f} "
                     f"(unigram {r['unigram_loss']:.4f}, no-context {r.get('no_context_loss', math.nan):.4f}); "
                     f"{metric_keys.context_line(dict(r))}"
                     + (f"; visible targets {visible:.3f} (no-context {r['visible_no_context']:.3f})"
                        if math.isfinite(visible) else ""))
    return [*lines, ""]


def size_text(row, match: str) -> str:
    """', 1.54M parameters (1.35x PT's total)' for a baseline cell, ', 1.14M parameters' for PT's, '' without a
    count."""
    params = float(row.get("params", math.nan) or math.nan)
    if not math.isfinite(params):
        return ""
    ratio = float(row.get("match_ratio", math.nan) or math.nan)
    return f", {params / 1e6:.2f}M parameters" + (f" ({ratio:.2f}x PT's {match})" if math.isfinite(ratio) else "")
