"""muP vs SP at a doubled budget (600 steps), seed-paired: probe_training.py runs named
runs/context/budget600-<par>-w<N>-s<seed>.json (commands in experiments/context/README.md, "Budget").

    PYTHONPATH=. .venv/bin/python experiments/context/budget_pairs.py 32 64
"""

import json
import sys

import numpy as np

from ptsweep.analysis.context_transfer import paired_difference

KEYS = ("val_loss", "context_gain", "gain_over_no_context")


def main(widths: list[int]) -> None:
    print("| width | seeds | " + " | ".join(f"{k} muP | {k} SP | muP - SP ± paired SE" for k in KEYS) + " |")
    print("|---|---|" + "---|---|---|" * len(KEYS))
    for w in widths:
        runs = {p: [json.load(open(f"runs/context/budget600-{p}-w{w}-s{s}.json"))["final"] for s in range(3)]
                for p in ("mup", "sp")}
        cells = []
        for k in KEYS:
            m = np.array([r[k] for r in runs["mup"]])
            s = np.array([r[k] for r in runs["sp"]])
            d = paired_difference(dict(enumerate(m)), dict(enumerate(s)))
            cells += [f"{m.mean():+.3f}" if k != "val_loss" else f"{m.mean():.3f}",
                      f"{s.mean():+.3f}" if k != "val_loss" else f"{s.mean():.3f}",
                      f"{d['diff']:+.3f} ± {d['se']:.3f}"]
        print(f"| {w} | 0,1,2 | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main([int(w) for w in sys.argv[1:]])
