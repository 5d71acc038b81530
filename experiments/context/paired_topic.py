"""Seed-paired comparison of a candidate (probe_training.py runs, runs/context/<prefix>-w<N>-s<seed>.json) with the
default muP runs of an lr-transfer study at the same width, seed and eta (ledger records trials/*/final.json).

    PYTHONPATH=. .venv/bin/python experiments/context/paired_topic.py runs/lr-transfer-fixed topic-cand 0.03125

Prints per width: candidate - default in val_loss and context_gain, per seed and as mean ± seed-paired SE."""

import json
import math
import sys
from pathlib import Path

import numpy as np

from ptsweep.analysis.context_transfer import paired_difference


def main(study: str, prefix: str, lr: float) -> None:
    default = {}
    for f in Path(study, "trials").glob("lr-mup-*/final.json"):
        rec = json.loads(f.read_text())
        ov = rec.get("overrides", {})
        if rec.get("status") == "ok" and math.isclose(float(ov.get("optim.lr", -1)), lr, rel_tol=1e-3):
            default[(int(ov["model.width"]), int(ov["seed"]))] = rec
    cand = {}
    for f in Path("runs/context").glob(f"{prefix}-w*-s*.json"):
        w, s = f.stem[len(prefix) + 2:].split("-s")
        cand[(int(w), int(s))] = json.loads(f.read_text())["final"]
    print("| width | seeds | val loss default | val loss candidate | cand - default ± paired SE "
          "| context gain default | context gain candidate | cand - default ± paired SE |")
    print("|---|---|---|---|---|---|---|---|")
    for w in sorted({w for w, _ in cand}):
        seeds = sorted(s for (ww, s) in cand if ww == w and (w, s) in default)
        if not seeds:
            continue
        row = [f"{w}", ",".join(map(str, seeds))]
        for key in ("val_loss", "context_gain"):
            a = {s: default[(w, s)][key] for s in seeds}
            b = {s: cand[(w, s)][key] for s in seeds}
            d = paired_difference(b, a)
            row += [f"{np.mean(list(a.values())):.3f}", f"{np.mean(list(b.values())):.3f}",
                    f"{d['diff']:+.3f} ± {d['se']:.3f}"]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
