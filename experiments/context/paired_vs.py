"""Seed-paired comparison of candidates (probe_training.py runs, <dir>/<prefix>-w<N>-s<seed>.json) with reference
runs, width by width: the runs of an lr-transfer study's ledger at one parametrization and eta (its ledger records),
or other probe runs (``--ref-probe DIR PREFIX``).

    .venv/bin/python experiments/context/paired_vs.py --ref-ledger runs/lr-transfer-fixed sp 0.01 \
        runs/ctx32 cand-a cand-b
    .venv/bin/python experiments/context/paired_vs.py --ref-probe runs/context budget600-sp \
        runs/ctx32 b600-cand

Prints one row per (candidate, width): mean val_loss, context_gain and gain over the no-context baseline of the
candidate and the reference, and candidate - reference ± seed-paired SE (``ptsweep.analysis.paired_gap.paired``)."""

import json
import math
import sys
from pathlib import Path

import numpy as np

from ptsweep.analysis.paired_gap import paired
from ptsweep.trials.results import ledger_records

KEYS = ("val_loss", "context_gain", "gain_over_no_context")


def reference_runs(study: str, param: str, lr: float) -> dict:
    """(width, seed) -> final record of the study's ok trials of ``param`` at ``lr``."""
    out = {}
    for rec in ledger_records(Path(study)).to_dict("records"):
        if rec["trial_key"].startswith(f"lr-{param}-") and rec.get("status") == "ok" and \
                math.isclose(float(rec.get("optim.lr", -1)), lr, rel_tol=1e-3):
            out[(int(rec["model.width"]), int(rec["seed"]))] = rec
    return out


def candidate_runs(folder: str, prefix: str) -> dict:
    """(width, seed) -> final metrics of the probe runs ``<prefix>-w<N>-s<seed>.json`` in ``folder``."""
    out = {}
    for f in Path(folder).glob(f"{prefix}-w*-s*.json"):
        w, s = f.stem[len(prefix) + 2:].split("-s")
        if w.isdigit() and s.isdigit():
            out[(int(w), int(s))] = json.loads(f.read_text())["final"]
    return out


def main(ref: dict, ref_name: str, folder: str, prefixes: list[str]) -> None:
    head = ["candidate", "width", "seeds"]
    for key in KEYS:
        head += [f"{key} cand", f"{key} {ref_name}", "cand - ref ± paired SE"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for prefix in prefixes:
        cand = candidate_runs(folder, prefix)
        for w in sorted({w for w, _ in cand}):
            seeds = sorted(s for (ww, s) in cand if ww == w and (w, s) in ref)
            if not seeds:
                continue
            row = [prefix, f"{w}", ",".join(map(str, seeds))]
            for key in KEYS:
                a = {s: ref[(w, s)] for s in seeds}
                b = {s: cand[(w, s)] for s in seeds}
                diff, se, _, n = paired(b, a, key)
                se_text = f"{se:.3f}" if n > 1 else "-"
                row += [f"{np.mean([r[key] for r in b.values()]):.3f}",
                        f"{np.mean([r[key] for r in a.values()]):.3f}", f"{diff:+.3f} ± {se_text}"]
            print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) >= 6 and args[0] == "--ref-ledger":
        main(reference_runs(args[1], args[2], float(args[3])), args[2], args[4], args[5:])
    elif len(args) >= 5 and args[0] == "--ref-probe":
        main(candidate_runs(args[1], args[2]), args[2], args[3], args[4:])
    else:
        sys.exit(__doc__)
