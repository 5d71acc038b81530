"""Transfer over training length: eta* at each budget side by side per (parametrization, width),
and its drift between the shortest and the longest budget in factors of 2, with intervals.

Reads the same runs as ``paired_gap.py`` (sweep trials and probes of the default model under the given folders) and
runs ``ptsweep.analysis.transfer_drift.drift`` with the budget (steps of 16 x 64 tokens) in place of the width:
eta* is the argmin of the seed-mean loss, its plausible set the grid points within ``K_SE`` paired SE of it, the
drift's plausible range the difference of the two sets' ends, and the fitted drift's interval the Welch-t interval of
the quadratic vertices (None where a budget's curvature is not significant).

    python experiments/lr-transfer/budget_drift.py ../study2/runs/lr-anchored ../study2/runs/lr-anchored-300 --par mup_sp
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

from ptsweep.analysis.paired_gap import load_runs
from ptsweep.analysis import transfer_drift as td


def _fmt_set(o: dict) -> str:
    p = o.get("plausible") or []
    return f"{o['x_opt']:g} [{p[0]:g}, {p[-1]:g}]" if p else f"{o['x_opt']:g}"


def table(rows: list[dict], par: str, tokens_per_step: int = 16 * 64) -> list[str]:
    """Markdown lines: per width, eta* [plausible set] and seeds at each budget, and the drift from the shortest to
    the longest budget (grid argmin, plausible range, fitted vertex with its 90 % interval)."""
    df = pd.DataFrame([r for r in rows if r["par"] == par])
    if df.empty:
        return [f"no runs of {par!r}"]
    df["steps"] = (df["tokens"].astype(float) // tokens_per_step).astype(int)
    budgets = sorted(df["steps"].unique())
    head = " | ".join(f"eta* at {b} steps [plausible] (seeds at eta*)" for b in budgets)
    out = [f"| width | {head} | drift {budgets[0]} -> {budgets[-1]} (log2) | plausible range | fitted (90 % CI) |",
           "|---" * (4 + len(budgets)) + "|"]
    for width, g in df.groupby("width", sort=True):
        res = td.drift(g, "lr", width_col="steps", param_col="par", loss_col="val_loss", seed_col="seed")
        r = res.get(par)
        if r is None:
            continue
        cells = []
        for b in budgets:
            o = r["per_width"].get(int(b))
            if o is None or o.get("x_opt") is None:
                cells.append("-")
                continue
            seeds = g[(g["steps"] == b) & (g["lr"].astype(float) == o["x_opt"])]["seed"].nunique()
            cells.append(f"{_fmt_set(o)} ({seeds}){' edge' if o.get('at_edge') else ''}")
        rng, fit, ci = r["drift_plausible_range"], r.get("drift_fit_log2"), r.get("drift_fit_ci")
        fit_s = (f"{fit:+.2f} [{ci[0]:+.2f}, {ci[1]:+.2f}]" if fit is not None and ci else
                 f"{fit:+.2f} (no interval)" if fit is not None else "no fit")
        bound = " (bound: an optimum on its grid's edge)" if r["drift_is_bound"] else ""
        drift = r["drift_log2"] if len(r["per_width"]) > 1 else math.nan
        out.append(f"| {width} | {' | '.join(cells)} | {drift:+.0f}{bound} | [{rng[0]:+.0f}, {rng[1]:+.0f}] | {fit_s} |")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--par", default="mup_sp", help="parametrization (default mup_sp)")
    args = ap.parse_args(argv)
    print("\n".join(table(load_runs(args.folders), args.par)))


if __name__ == "__main__":
    main()
