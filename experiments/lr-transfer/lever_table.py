"""Levers and information weights against the default, per (parametrization, width, budget): one row per variant
(the model fields and optimizer settings a run changed, ``paired_gap._variant``, plus the probe-only levers), one
column per eta, each cell the seed-mean loss (seeds) and context gain, and each row's best eta with the loss at
eta*/2 and 2 eta* in % above its best (the [eta*/2, 2 eta*] window the basin target asks for).

    python experiments/lr-transfer/lever_table.py runs/levers ../study2/runs/lr-anchored --par mup_sp --width 32
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from ptsweep.analysis.paired_gap import load_runs


def _name(variant: tuple) -> str:
    return ", ".join(f"{k}={v}" for k, v in variant) or "default"


def _pct(curve: dict, lr: float, best: float) -> str:
    if lr not in curve:
        return "-"
    return f"{100 * (curve[lr][0] / best - 1):+.1f} %"


def table(rows: list[dict], par: str, width: int, steps: int, seeds: list[int] | None = None,
          tokens_per_step: int = 16 * 64) -> list[str]:
    """Markdown lines of one (parametrization, width, budget), over ``seeds`` (all when None)."""
    cells: dict[tuple, dict[float, list]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if (r["par"] == par and int(r["width"]) == width and int(r["tokens"]) // tokens_per_step == steps
                and (seeds is None or int(r["seed"]) in seeds)):
            cells[r["variant"]][float(r["lr"])].append((r["val_loss"], r.get("context_gain", float("nan"))))
    if not cells:
        return [f"no runs of {par} at width {width}, {steps} steps"]
    lrs = sorted({lr for c in cells.values() for lr in c})
    out = [f"| variant ({par}, width {width}, {steps} steps) | " + " | ".join(f"eta {lr:g}" for lr in lrs)
           + " | eta* | eta*/2 | 2 eta* |", "|---" * (len(lrs) + 4) + "|"]
    for variant in sorted(cells, key=lambda v: (v != (), _name(v))):
        curve = {lr: (sum(x for x, _ in v) / len(v), sum(g for _, g in v) / len(v), len(v))
                 for lr, v in cells[variant].items()}
        best_lr = min(curve, key=lambda lr: curve[lr][0])
        best = curve[best_lr][0]
        row = [f"{curve[lr][0]:.3f}{f' ({curve[lr][2]})' if curve[lr][2] > 1 else ''} {curve[lr][1]:+.2f}"
               if lr in curve else "" for lr in lrs]
        out.append(f"| {_name(variant)} | " + " | ".join(row) + f" | {best_lr:g} | {_pct(curve, best_lr / 2, best)} "
                   f"| {_pct(curve, best_lr * 2, best)} |")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--par", default="mup_sp")
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--seeds", type=int, nargs="*", help="only these seeds (default: all, averaged)")
    args = ap.parse_args(argv)
    print("\n".join(table(load_runs(args.folders, variants=True), args.par, args.width, args.steps, args.seeds)))


if __name__ == "__main__":
    main()
