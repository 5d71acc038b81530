"""Single BERT / UT runs at the demo's settings, one lever at a time: which budget, LR, warm-up or vocabulary makes a
baseline learn context (test [MASK]-target gain > 2 SE)? One line per run, appended to ``--out`` (a finished run is
not run again), then a table of every run in that file (only the table when no run is given).

    python experiments/demo/probe_baselines.py --out runs/s18/baselines.jsonl \
        --grid 'optim.lr=1e-3,3e-3,1e-2' --grid 'optim.warmup_frac=0.05,0.25' -- model=bert model.width=64 \
        model.n_layers=1 model.n_heads=1
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_one(overrides: list[str], out_dir: Path) -> dict:
    """``python -m ptsweep train preset=demo tracker=disabled <overrides>``: its final metrics (the JSON line)."""
    cmd = [sys.executable, "-m", "ptsweep", "train", "preset=demo", "tracker=disabled", "train.progress=false",
           f"out_dir={out_dir}", *overrides]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    line = next((ln for ln in reversed(r.stdout.splitlines()) if ln.startswith("{")), None)
    if r.returncode or line is None:
        return {"status": "failed", "error": (r.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(line)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--grid", action="append", default=[], help="key=v1,v2,...: one axis of the grid")
    ap.add_argument("fixed", nargs="*", help="overrides of every run")
    args = ap.parse_args(argv)
    axes = [[f"{k}={v}" for v in vs.split(",")] for k, vs in (g.split("=", 1) for g in args.grid)]
    done = {}
    if args.out.exists():
        done = {tuple(r["overrides"]): r for r in map(json.loads, args.out.read_text().splitlines())}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for combo in itertools.product(*axes) if axes or args.fixed else ():  # neither: only the table
        overrides = [*args.fixed, *combo]
        if tuple(overrides) in done:
            continue
        m = run_one(overrides, args.out.parent / "probe_runs")
        rec = {"overrides": overrides, **{k: m.get(k) for k in (
            "status", "error", "test_loss", "test_unigram_loss", "test_no_context_loss", "test_context_gain",
            "test_context_gain_se", "params", "steps", "wall_s")}}
        with args.out.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        done[tuple(overrides)] = rec
    print("| overrides | test loss | unigram | no-context | context gain ± SE | learned | wall s |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for r in done.values():
        if r.get("status") != "ok":
            print(f"| {' '.join(r['overrides'])} | {r.get('status')}: {r.get('error')} | | | | | |")
            continue
        g, se = r["test_context_gain"], r["test_context_gain_se"]
        print(f"| {' '.join(r['overrides'])} | {r['test_loss']:.3f} | {r['test_unigram_loss']:.3f} | "
              f"{r['test_no_context_loss']:.3f} | {g:+.3f} ± {se:.3f} | {'yes' if g > 2 * se else 'no'} | "
              f"{r['wall_s']:.0f} |")


if __name__ == "__main__":
    main()
