"""Does beta depend on the setting (width, corpus, a variant)? beta of two lr-horizon studies' seed optima over the
budgets both fitted, and their difference B - A with its t interval (``horizon.slope_difference``), from the
horizon.json that `make report` writes into each results folder.

    python experiments/lr-horizon/compare_beta.py experiments/lr-horizon/results/lr-horizon-shakespeare/horizon.json \
        experiments/lr-horizon/results/lr-horizon-w128/horizon.json [--model pt] [--steps 1200 4800]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ptsweep.analysis import horizon


def seed_points(doc: dict, model: str, steps: list[int] | None) -> tuple[list[float], list[float]]:
    """(budgets, optima) of every seed optimum (not on a grid edge) of ``model``'s fit, at ``steps`` (all when
    None)."""
    fit = doc["fits"][model]
    pts = [(t, e) for t, opt in zip(fit["steps"], fit["seed_optima"]) if steps is None or t in steps
           for e in opt if e is not None]
    return [float(t) for t, _ in pts], [e for _, e in pts]


def setting(doc: dict, model: str) -> str:
    """The study's model, width and corpus in words."""
    m = doc["fits"][model]["model"]
    return f"{doc.get('study')} ({m['name']} width {m.get('width')}, {doc.get('data')})"


def compare(a: dict, b: dict, model: str = "pt", steps: list[int] | None = None) -> list[str]:
    """The lines the script prints; SystemExit with one line when a study lacks the model, its seed optima or the
    budgets."""
    for doc in (a, b):
        fit = doc.get("fits", {}).get(model)
        if fit is None or "seed_optima" not in fit:
            raise SystemExit(f"compare_beta: {doc.get('study')} has no seed optima of {model} (re-render it with "
                             f"`make report STUDY=<its results folder>`)")
    common = sorted(set(a["fits"][model]["steps"]) & set(b["fits"][model]["steps"]))
    steps = sorted(steps) if steps else common
    if len(set(steps)) < 2 or not set(steps) <= set(common):
        raise SystemExit(f"compare_beta: both studies fitted the budgets {common}; compare at >= 2 of them "
                         f"(asked {steps})")
    try:
        d = horizon.slope_difference(seed_points(a, model, steps), seed_points(b, model, steps))
    except ValueError as e:
        raise SystemExit(f"compare_beta: {e}") from None
    lo, hi = d["ci"]
    verdict = ("the exponents differ" if lo > 0 or hi < 0 else
               "no difference seen; the interval bounds what these seeds can exclude")
    over = ", ".join(f"{t:,}" for t in steps)
    return [f"{model}, seed optima over {over} steps:",
            f"  A {setting(a, model)}: beta {d['beta_a']:+.3f}",
            f"  B {setting(b, model)}: beta {d['beta_b']:+.3f}",
            f"  B - A: {d['diff']:+.3f}, 95 % interval [{lo:+.3f}, {hi:+.3f}] (t, {d['df']} df): {verdict}"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path, help="horizon.json of study A")
    ap.add_argument("b", type=Path, help="horizon.json of study B")
    ap.add_argument("--model", default="pt")
    ap.add_argument("--steps", type=int, nargs="*", help="budgets to compare at (default: every budget both fitted)")
    args = ap.parse_args(argv)
    docs = []
    for path in (args.a, args.b):
        try:
            docs.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as e:
            raise SystemExit(f"compare_beta: cannot read {path} ({type(e).__name__})") from None
    print("\n".join(compare(*docs, model=args.model, steps=args.steps)))


if __name__ == "__main__":
    main()
