"""The learning curves of a scaling-curves study folder so far, one row per trial, while it runs or after.

Each trial's in-loop evaluations (``results.read_curve``: validation [MASK]-target context gain every
train.eval_every steps) at every ``--every``-th step, the step at which the gain first reaches +1 nat, and, for a
finished trial, its test loss and context gain ± SE (its ledger record, ``ledger.read_ledger``); an unfinished one says
how long ago it last wrote a line (a trial of an earlier plan, or of a stopped sweep, stays unfinished). Markdown on
stdout.

    python experiments/scaling/curves_table.py runs/scaling-trained [--every 2400]
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from ptsweep.analysis.learning_curves import crossing_step
from ptsweep.io import read_json
from ptsweep.trials.results import read_curve
from ptsweep.trials.ledger import read_ledger


def trial_row(trial: Path, every: int) -> dict:
    """One trial's model, LR, seed, gains by step, +1-nat crossing and final test numbers."""
    import pandas as pd

    over = read_json(trial / "trial.json")["overrides"]
    evals = pd.DataFrame(read_curve(trial / "history.jsonl"))
    idle_h = (time.time() - (trial / "history.jsonl").stat().st_mtime) / 3600
    return {"trial": trial.name, "model": over.get("model.name", "pt"), "lr": over.get("optim.lr", math.nan),
            "seed": over.get("seed"),
            "gains": {int(r.step): r.context_gain for r in evals.itertuples() if r.step % every == 0},
            "cross": crossing_step(evals, 1.0) if len(evals) else math.inf,
            "final": read_ledger(trial.parent.parent, trial.name) or {}, "idle_h": idle_h}


def markdown(rows: list[dict], every: int) -> str:
    steps = sorted({s for r in rows for s in r["gains"] if s > 0})
    head = ["trial", "LR", "seed", *(f"{s / 1000:g}k" for s in steps), "first >= +1", "test loss",
            "test gain ± SE"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        f = r["final"]
        test = (f"{f['test_loss']:.3f}", f"{f['test_context_gain']:+.3f} ± {f['test_context_gain_se']:.3f}") \
            if "test_loss" in f else (f"unfinished (last line {r['idle_h']:.1f} h ago)", "")
        cells = [r["trial"], f"{r['lr']:g}", str(r["seed"]),
                 *(f"{r['gains'][s]:+.2f}" if s in r["gains"] else "" for s in steps),
                 "never" if math.isinf(r["cross"]) else f"{r['cross']:,.0f}", *test]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study", type=Path, help="the study folder, e.g. runs/scaling-trained")
    ap.add_argument("--every", type=int, default=2400, help="print the gain at multiples of this step")
    a = ap.parse_args()
    trials = sorted(d for d in (a.study / "trials").iterdir() if (d / "history.jsonl").exists())
    print(markdown([trial_row(d, a.every) for d in trials], a.every))


if __name__ == "__main__":
    main()
