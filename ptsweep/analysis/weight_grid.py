"""The information-weight grid of one width from the study folders of single weight points: per weight, each
value's seed mean, the optimum with its plausible set (``transfer_drift.optimum``) and the best value other than 1
minus 1, seed-paired with its 95 % t interval; then the LR points (every weight 1), each eta against the study's eta.
A run with every weight 1 at the study's eta is every weight's value 1.

    python -m ptsweep.analysis.weight_grid runs/zscreen-z --width 128
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from ptsweep.analysis.paired_gap import load_runs, paired_text
from ptsweep.analysis.transfer_drift import optimum

WEIGHTS = ("w_unary", "w_attn", "w_head", "w_child", "w_topic_z", "w_topic_g")
STUDY_LR = 0.02
STEPS_TOKENS = 1228800


def points(folders: list[Path], width: int) -> pd.DataFrame:
    """One row per finished run at ``width`` and the study's budget: weight (None: every weight 1), value, lr,
    seed, val_loss, context_gain. A run that changed anything else than one weight is left out."""
    rows = []
    for r in load_runs(folders, variants=True):
        if int(r["width"]) != width or float(r["tokens"]) != STEPS_TOKENS:
            continue
        changed = dict(r["variant"])
        if len(changed) > 1 or (changed and next(iter(changed)) not in WEIGHTS):
            continue
        weight, value = next(iter(changed.items())) if changed else (None, 1.0)
        rows.append({"weight": weight, "value": float(value), "lr": float(r["lr"]), "seed": int(r["seed"]),
                     "val_loss": float(r["val_loss"]), "context_gain": r.get("context_gain", float("nan"))})
    return pd.DataFrame(rows, columns=["weight", "value", "lr", "seed", "val_loss", "context_gain"])


def _paired_text(g: pd.DataFrame, key: str, a: float, b: float, percent: bool) -> str:
    """a - b of column ``key``'s values, paired by seed (``paired_gap.paired_text``), or '-' for a == b."""
    if a == b:
        return "-"
    by = {x: {s: {"val_loss": v} for s, v in zip(gx["seed"], gx["val_loss"])} for x, gx in g.groupby(key)}
    return paired_text(by.get(a, {}), by.get(b, {}), percent=percent)


def _best_other_than_one(curve: dict) -> float | None:
    """The optimum's curve's best value other than 1: among the values != 1 with the most seeds, the lowest mean
    (the optimum itself unless 1 is the optimum); None for a curve with no other value."""
    others = [(x, n, m) for x, n, m in zip(curve["x"], curve["n"], curve["mean"]) if x != 1.0]
    if not others:
        return None
    most = max(n for _, n, _ in others)
    return min((m, x) for x, n, m in others if n == most)[1]


def _against_one(g: pd.DataFrame, curve: dict) -> str:
    """'x: x - 1' for the best value x other than 1, paired by seed: mean ± SE [95 % t] (n), or '-' without two
    shared seeds."""
    x = _best_other_than_one(curve)
    text = "-" if x is None else _paired_text(g, "value", x, 1.0, percent=False)
    return text if text == "-" else f"{x:g}: {text}"


def weight_table(df: pd.DataFrame) -> list[str]:
    """Markdown rows: weight | value: mean (seeds) ... | optimum [plausible] | best value other than 1, minus 1
    (paired), over the seeds the weight's runs have."""
    ones = df[(df["weight"].isna()) & (df["lr"] == STUDY_LR)]
    out = ["| weight | values: seed mean (seeds) | optimum [plausible set] | best value x other than 1: x - 1, "
           "seed-paired |",
           "|---|---|---|---|"]
    for w in WEIGHTS:
        gw = df[(df["weight"] == w) & (df["lr"] == STUDY_LR)]
        # value 1 on the weight's own seeds: an extra every-weight-1 seed (e.g. an LR study's) would make 1 the only
        # value with the most seeds, the only candidate of transfer_drift.optimum
        g = pd.concat([ones[ones["seed"].isin(gw["seed"])], gw])
        if g["value"].nunique() < 2:
            continue
        o = optimum(g, "value")
        cells = " / ".join(f"{x:g}: {m:.4f} ({n})" for x, n, m in zip(o["curve"]["x"], o["curve"]["n"],
                                                                       o["curve"]["mean"]))
        edge = ", edge" if o["at_edge"] else ""
        plaus = ", ".join(f"{x:g}" for x in o["plausible"])
        out.append(f"| {w} | {cells} | {o['x_opt']:g} [{plaus}]{edge} | {_against_one(g, o['curve'])} |")
    return out


def lr_table(df: pd.DataFrame) -> list[str]:
    """Markdown rows of the every-weight-1 runs per eta: seed mean (seeds), context gain, % above the best, and
    eta - the study's eta paired by seed (with its percent of the study's eta's loss over the shared seeds)."""
    g = df[df["weight"].isna()]
    if g["lr"].nunique() < 2:
        return ["(fewer than two LRs with every weight 1)"]
    o = optimum(g, "lr")
    out = [f"| eta | seed mean (seeds) | context gain | % above the best | eta - {STUDY_LR:g}, seed-paired |",
           "|---:|---|---:|---:|---|"]
    for x, n, m in zip(o["curve"]["x"], o["curve"]["n"], o["curve"]["mean"]):
        gain = g[g["lr"] == x]["context_gain"].astype(float).mean()
        vs = _paired_text(g, "lr", x, STUDY_LR, percent=True)
        out.append(f"| {x:g} | {m:.4f} ({n}) | {gain:+.3f} | {100 * (m / o['loss_opt'] - 1):+.1f} % | {vs} |")
    plaus = ", ".join(f"{x:g}" for x in o["plausible"])
    return out + ["", f"eta* = {o['x_opt']:g}, plausible set [{plaus}]"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--width", type=int, default=128)
    args = ap.parse_args()
    df = points(args.folders, args.width)
    if df.empty:
        raise SystemExit(f"no finished weight points at width {args.width} under {args.folders}")
    print(f"width {args.width}, eta {STUDY_LR} unless stated, validation loss\n")
    print("\n".join(weight_table(df)) + "\n")
    print("\n".join(lr_table(df)))


if __name__ == "__main__":
    main()
