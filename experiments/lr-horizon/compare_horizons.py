"""Does the horizon's drift depend on the setting (width, corpus, a variant), and what does the setting cost? Two
lr-horizon studies over the budgets both fitted: beta of their seed optima and the difference B - A with its t
interval (``horizon.slope_difference``), then per budget each study's eta* and validation loss there, B - A paired
by seed with its t interval (``paired_gap.paired_text``; a price only where both studies score the same validation
set: another width or a variant, not another corpus), from the horizon.json that `make report` writes into each
results folder.

    R=experiments/lr-horizon/results
    python experiments/lr-horizon/compare_horizons.py $R/lr-horizon-shakespeare/horizon.json \
        $R/lr-horizon-w128/horizon.json [--model pt] [--steps 1200 4800]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ptsweep.analysis import horizon
from ptsweep.analysis.paired_gap import paired_text
from ptsweep.reports.lr_horizon_report import anchored, with_variants

NEEDS = ("seed_optima", "seed_loss_at_opt")
"""What a study's fit must hold; horizon.json rendered before these keys existed lacks them."""


def seed_points(doc: dict, model: str, steps: list[int] | None) -> tuple[list[float], list[float]]:
    """(budgets, optima) of every seed optimum (not on a grid edge nor against a collapse) of ``model``'s fit, at
    ``steps`` (all when None)."""
    fit = doc["fits"][model]
    pts = [(t, e) for t, opt in zip(fit["steps"], fit["seed_optima"]) if steps is None or t in steps
           for e in opt if e is not None]
    return [float(t) for t, _ in pts], [e for _, e in pts]


def setting(doc: dict, model: str) -> str:
    """The study's model, width and corpus in words."""
    m = doc["fits"][model]["model"]
    return f"{doc.get('study')} ({m['name']} width {m['width']}{anchored(m)}{with_variants(m)}, {doc.get('data')})"


def common_steps(a: dict, b: dict, model: str, steps: list[int] | None) -> list[int]:
    """``steps`` (default: every budget both studies fitted); SystemExit with one line when a study lacks the model
    or what :data:`NEEDS` names, or when fewer than 2 of the budgets asked were fitted by both."""
    for doc in (a, b):
        fit = doc.get("fits", {}).get(model)
        if fit is None or any(k not in fit for k in NEEDS):
            raise SystemExit(f"compare_horizons: {doc.get('study')} has no seed optima and losses of {model} "
                             f"(re-render it with `make report STUDY=<its results folder>`)")
    common = sorted(set(a["fits"][model]["steps"]) & set(b["fits"][model]["steps"]))
    steps = sorted(steps) if steps else common
    if len(set(steps)) < 2 or not set(steps) <= set(common):
        raise SystemExit(f"compare_horizons: both studies fitted the budgets {common}; compare at >= 2 of them "
                         f"(asked {steps})")
    return steps


def beta_lines(a: dict, b: dict, model: str, steps: list[int]) -> list[str]:
    """beta of each study's seed optima over ``steps`` and B - A with its 95 % t interval, or why there is none (too
    few seed optima: those on a grid edge or against a collapse are left out of horizon.json)."""
    over = ", ".join(f"{t:,}" for t in steps)
    try:
        d = horizon.slope_difference(seed_points(a, model, steps), seed_points(b, model, steps))
    except ValueError as e:
        counts = "; ".join(f"{k} {_per_budget(doc, model, steps)}" for k, doc in (("A", a), ("B", b)))
        return [f"{model}, seed optima over {over} steps: no beta to compare ({e}; seed optima per budget: {counts};"
                f" a seed whose best LR sits on a grid edge or just under a collapse has none)"]
    lo, hi = d["ci"]
    verdict = ("the exponents differ" if lo > 0 or hi < 0 else
               "no difference seen; the interval bounds what these seeds can exclude")
    return [f"{model}, seed optima over {over} steps:",
            f"  A {setting(a, model)}: beta {d['beta_a']:+.3f}",
            f"  B {setting(b, model)}: beta {d['beta_b']:+.3f}",
            f"  B - A: {d['diff']:+.3f}, 95 % interval [{lo:+.3f}, {hi:+.3f}] (t, {d['df']} df): {verdict}"]


def _per_budget(doc: dict, model: str, steps: list[int]) -> str:
    """'1,200: 2 of 2, 4,800: 0 of 2': the seed optima a study has at each of ``steps``."""
    fit = doc["fits"][model]
    return ", ".join(f"{t:,}: {sum(e is not None for e in opt)} of {len(opt)}"
                     for t, opt in zip(fit["steps"], fit["seed_optima"]) if t in steps)


def _at_opt(doc: dict, model: str, t: int) -> tuple[float, dict[int, dict]]:
    """eta* of ``model`` at budget ``t`` and seed -> {"val_loss"} there."""
    fit = doc["fits"][model]
    i = fit["steps"].index(t)
    return fit["eta_opt"][i], {int(s): {"val_loss": v} for s, v in fit["seed_loss_at_opt"][i].items()}


def loss_lines(a: dict, b: dict, model: str, steps: list[int]) -> list[str]:
    """Per budget: each study's eta* and seed-mean validation loss there, and B - A paired by seed ('mean ± SE
    [95 % t] (seeds), percent of A')."""
    lines = [f"{model}, validation loss at each study's eta* (B - A paired by seed, mean ± SE [95 % t] (seeds)):"]
    for t in steps:
        (eta_a, la), (eta_b, lb) = _at_opt(a, model, t), _at_opt(b, model, t)
        mean = [sum(r["val_loss"] for r in x.values()) / len(x) for x in (la, lb)]
        lines.append(f"  {t:,} steps: A {eta_a:g} {mean[0]:.3f}, B {eta_b:g} {mean[1]:.3f}; "
                     f"B - A {paired_text(lb, la)}")
    return lines


def compare(a: dict, b: dict, model: str = "pt", steps: list[int] | None = None) -> list[str]:
    """The lines the script prints (:func:`beta_lines`, then :func:`loss_lines`)."""
    steps = common_steps(a, b, model, steps)
    return beta_lines(a, b, model, steps) + loss_lines(a, b, model, steps)


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
            raise SystemExit(f"compare_horizons: cannot read {path} ({type(e).__name__})") from None
    print("\n".join(compare(*docs, model=args.model, steps=args.steps)))


if __name__ == "__main__":
    main()
