"""Error rates of the verification verdicts and coverage of the regret intervals on simulated misplaced optima.

Writes ``runs/regret_error_rates/{rates.json,table.md}`` (the table of docs/verdicts.md). Designs: demo
(n = 8, m = 2, every point at both seeds, alpha = p = 0.2) and paper (n = 59, m = 3, each point at 2 seeds,
alpha = p = 0.05); run noise and seed sd 0.2 % of the loss; curvatures measured in the lr-transfer study
(``regret_sim.CURVATURE``); tolerance 0.4 %. Usage (~15 minutes on one core):

    nice -n 10 .venv/bin/python bench/regret_error_rates.py [n_sims_paper] [n_sims_demo] [demo,paper]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from regret_sim import simulate_verdicts

DESIGNS = {"demo": dict(n=8, m=2, k=2, alpha=0.2, p=0.2), "paper": dict(n=59, m=3, k=2, alpha=0.05, p=0.05)}
SHIFTS = {"S optimal": [1.0] * 7, "lr x1.2": [1.2] + [1.0] * 6, "lr x1.3": [1.3] + [1.0] * 6,
          "lr x1.5": [1.5] + [1.0] * 6, "w_attn x1.3": [1.0, 1.0, 1.3, 1.0, 1.0, 1.0, 1.0],
          "lr x1.2 & w_attn x1.2": [1.2, 1.0, 1.2, 1.0, 1.0, 1.0, 1.0],
          "lr x1.3 & w_attn x1.3": [1.3, 1.0, 1.3, 1.0, 1.0, 1.0, 1.0]}
NOISE = 0.002


def main(n_paper: int = 400, n_demo: int = 1000, designs: str = "demo,paper") -> None:
    """Simulate ``designs`` (comma-separated); rows of the other designs are kept from an earlier rates.json."""
    out = Path("runs/regret_error_rates")
    out.mkdir(parents=True, exist_ok=True)
    todo = designs.split(",")
    old = json.loads((out / "rates.json").read_text()) if (out / "rates.json").exists() else []
    rows = [r for r in old if r["design"] not in todo]
    for design, kw in DESIGNS.items():
        if design not in todo:
            continue
        for i, (name, shift) in enumerate(SHIFTS.items()):
            t0 = time.time()
            r = simulate_verdicts("bowl", NOISE, n_sims=n_paper if design == "paper" else n_demo, shift=shift,
                                  rng_seed=1000 * i + len(design), **kw)
            rows.append({"design": design, "alternative": name, "shift": shift, **r, "wall_s": time.time() - t0})
            print(design, name, {k: round(v, 4) for k, v in r.items()}, f"{time.time() - t0:.0f}s", flush=True)
            (out / "rates.json").write_text(json.dumps(rows, indent=1))
    pct = lambda x, k=1: "n/a" if x != x else f"{100 * x:.{k}f}"  # noqa: E731
    lines = ["| design | optimum at | true regret | regret pass / fail / inc. | regret interval covers (hi, lo) "
             "| mean upper bound | true / est. better fraction (covers) | contrast rule pass / fail | strict pass |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["design"], list(SHIFTS).index(r["alternative"]))):
        lines.append(f"| {r['design']} | {r['alternative']} | {pct(r['true_regret_rel'], 2)} % | "
                     f"{pct(r['regret_pass'])} / {pct(r['regret_fail'])} / {pct(r['regret_inconclusive'])} % | "
                     f"{pct(r['regret_covers'])} % ({pct(r['regret_hi_covers'])}, {pct(r['regret_lo_covers'])}) | "
                     f"{pct(r['mean_regret_hi'], 2)} % | {pct(r['true_better_fraction'])} / "
                     f"{pct(r['mean_better_fraction'])} % ({pct(r['fraction_covers'])} %) | "
                     f"{pct(r['pass'])} / {pct(r['fail'])} % | {pct(r['strict_pass'])} % |")
    (out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]), *sys.argv[3:4])
