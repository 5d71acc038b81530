"""The learning curves of a scaling-curves study folder so far, one row per trial, while it runs or after.

Each trial's in-loop evaluations (``history.jsonl``: validation [MASK]-target context gain every train.eval_every
steps) at every ``--every``-th step, the step at which the gain first reaches +1 nat, the last training throughput,
and, for a finished trial, its test loss and context gain ± SE (``final.json``); an unfinished one says how long ago
it last wrote a line (a trial of an earlier plan, or of a stopped sweep, stays unfinished). Markdown on stdout.

    python experiments/scaling/curves_table.py runs/scaling-trained [--every 2400]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from ptsweep.analysis.learning_curves import crossing_step


def trial_row(trial: Path, every: int) -> dict:
    """One trial's model, LR, seed, gains by step, +1-nat crossing, throughput and final test numbers."""
    import pandas as pd

    over = json.loads((trial / "trial.json").read_text())["overrides"]
    rows = [json.loads(x) for x in (trial / "history.jsonl").read_text().splitlines()]
    evals = pd.DataFrame([r for r in rows if "context_gain" in r])
    speed = [r["tokens_per_s"] for r in rows if "train_loss" in r]
    final = json.loads((trial / "final.json").read_text()) if (trial / "final.json").exists() else {}
    idle_h = (time.time() - (trial / "history.jsonl").stat().st_mtime) / 3600
    return {"trial": trial.name, "model": over.get("model.name", "pt"), "lr": over.get("optim.lr", math.nan),
            "seed": over.get("seed"),
            "gains": {int(r.step): r.context_gain for r in evals.itertuples() if r.step % every == 0},
            "cross": crossing_step(evals, 1.0) if len(evals) else math.inf,
            "tok_s": speed[-1] if speed else math.nan, "final": final, "idle_h": idle_h}


def markdown(rows: list[dict], every: int) -> str:
    steps = sorted({s for r in rows for s in r["gains"] if s > 0})
    head = ["trial", "LR", "seed", *(f"{s / 1000:g}k" for s in steps), "first >= +1", "tokens/s", "test loss",
            "test gain ± SE"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        f = r["final"]
        test = (f"{f['test_loss']:.3f}", f"{f['test_context_gain']:+.3f} ± {f['test_context_gain_se']:.3f}") \
            if "test_loss" in f else (f"unfinished (last line {r['idle_h']:.1f} h ago)", "")
        cells = [r["trial"], f"{r['lr']:g}", str(r["seed"]),
                 *(f"{r['gains'][s]:+.2f}" if s in r["gains"] else "" for s in steps),
                 "never" if math.isinf(r["cross"]) else f"{r['cross']:,.0f}", f"{r['tok_s']:,.0f}", *test]
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
