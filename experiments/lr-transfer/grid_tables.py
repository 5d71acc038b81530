"""Every run of an lr-transfer study folder as two grid tables per parametrization (rows: the LR, columns: widths):
validation loss and [MASK]-target context gain of seed 0, with the mean over every seed in parentheses where more
than one seed ran. Reads the ledger (also while the study runs), including runs outside the configured grid.

    PYTHONPATH=. .venv/bin/python experiments/lr-transfer/grid_tables.py runs/lr-transfer-fixed [label prefix: lr]
"""

import json
import sys
from pathlib import Path

import pandas as pd


def table(df: pd.DataFrame, par: str, col: str, fmt: str) -> str:
    d = df[df["par"] == par]
    widths = sorted(d["width"].unique())
    lines = [f"| eta ({par}), {col} | " + " | ".join(f"width {w}" for w in widths) + " |",
             "|---|" + "---|" * len(widths)]
    for lr in sorted(d["lr"].unique()):
        cells = []
        for w in widths:
            g = d[(d["lr"] == lr) & (d["width"] == w)]
            s0 = g[g["seed"] == 0][col]
            cell = format(float(s0.iloc[0]), fmt) if len(s0) else "-"
            if len(g) > 1:
                cell += f" ({format(float(g[col].mean()), fmt)}, {len(g)} seeds)"
            cells.append(cell)
        lines.append(f"| {lr:.4g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(study: str, prefix: str = "lr") -> None:
    rows = []
    for f in Path(study, "trials").glob(f"{prefix}-*/final.json"):
        rec = json.loads(f.read_text())
        ov = rec.get("overrides", {})
        if rec.get("status") != "ok":
            continue
        rows.append({"par": ov.get("model.parametrization", "mup"), "width": int(ov["model.width"]),
                     "lr": float(ov["optim.lr"]), "seed": int(ov["seed"]), "val_loss": rec["val_loss"],
                     "context_gain": rec.get("context_gain")})
    df = pd.DataFrame(rows)
    for par in sorted(df["par"].unique()):
        print(table(df, par, "val_loss", ".3f") + "\n")
        print(table(df, par, "context_gain", "+.3f") + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
