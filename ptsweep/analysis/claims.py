"""[S]'s two claims as a scaling-curves summary decides them (the opening of its report.md): each as run
(``model_spread``) and per framing (``framings``); then every other baseline beside PT per scale, and each model's
exit step from the plateau per seed (``learning_curves.budget_check``'s crossings)."""

from __future__ import annotations

import math
from typing import Mapping

from ptsweep.analysis import framings

def _pair(summary: Mapping, suffix: str) -> str | None:
    """The differences key of PT (its first series) against a baseline ("pt-bert", "pt-rank-bert", ...)."""
    return next((k for k in summary.get("differences", {}) if k.endswith(f"-{suffix}")), None)


def claim_lines(summary: Mapping) -> list[str]:
    """Markdown: each claim as run and per framing, yes / no / undecided with why and the seeds that would decide."""
    out = ["## [S]'s claims", ""]
    for _, words, pair, win in framings.CLAIMS:
        name = _pair(summary, pair.split("-")[1])
        if name is None:
            out.append(f"- **{words}**: not tested (no {pair.split('-')[1].upper()} runs in this study)")
            continue
        per = summary["differences"][name]
        verdict = framings.every_scale(per, win=win)["every_scale"]
        out.append(f"- **{words}** - as run: **{framings.verdict_text(verdict, per)}**")
        out += [f"  - N={s}: {_difference(d, name.rsplit('-', 1)[1])}" for s, d in per.items()]
        for fname, res in summary.get("framings", {}).items():
            r = res.get(name)
            if r is not None:
                v = framings.every_scale(r["per_scale"], win=win)["every_scale"]
                out.append(f"  - {framings.LABELS.get(fname, fname)}: {framings.verdict_text(v, r['per_scale'])}")
    return out + [""]


def _difference(d: Mapping, other: str) -> str:
    """'PT - BERT -0.057 [-0.469, +0.354] (SD 0.007 / 0.329): undecided; 9 seeds per model would decide it', and the
    seeds of one side alone that would (``other``: the baseline's name, side b)."""
    if not math.isfinite(d.get("diff", math.nan)):  # a side without runs
        return f"no difference ({framings.decision_text(d)})"
    if not math.isfinite(d.get("lo", math.nan)):
        return f"{d.get('diff', math.nan):+.3f}, no interval ({framings.decision_text(d)})"
    text = (f"{d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}], seed SD {d.get('sd_a', math.nan):.3f} / "
            f"{d.get('sd_b', math.nan):.3f}, {d.get('n_a')} / {d.get('n_b')} seeds: {framings.decision_text(d)}")
    if d.get("decided") != "undecided" or "seeds_to_decide" not in d or d.get("reason"):  # decided, or not by noise
        return text
    n, one = d["seeds_to_decide"], d.get("one_side")
    text += (f"; {n} seeds per model would decide this difference at these spreads{_odds(d)}" if n
             else "; no seed count decides a difference this small at these spreads")
    if one:  # the cheaper side to add seeds to
        name, kept = ("pt", d.get("n_b")) if one["side"] == "a" else (other, d.get("n_a"))
        text += (f"; or {one['seeds']} seeds of {name} alone, the other side's {kept} kept"
                 + (f" ({one['seeds_80']} for 80 %)" if one.get("seeds_80") else " (no count of it alone for 80 %)"))
    return text


def _odds(d: Mapping) -> str:
    """' (an even chance if it is the true difference; 12 for 80 %)' after a seed count, '' without one."""
    n80 = d.get("seeds_80")
    return (f" (an even chance if it is the true difference; {n80} for 80 %)" if n80
            else " (an even chance if it is the true difference)")


def others_lines(summary: Mapping, claimed: tuple[str, ...] = ("bert", "ut")) -> list[str]:
    """Markdown: every other baseline's difference from PT per scale (e.g. ModernBERT), as run."""
    out = []
    for name, per in summary.get("differences", {}).items():
        other = name.rsplit("-", 1)[1]
        if other in claimed:
            continue
        out += [f"- PT - {other} (beside the claims): " + "; ".join(f"N={s}: {_difference(d, other)}"
                                                                    for s, d in per.items())]
    return out + [""] if out else []


def exit_lines(summary: Mapping) -> list[str]:
    """Markdown table: each (model, scale)'s exit step per seed (first evaluation at the threshold; never = not
    within the budget) and their spread (latest - earliest); a cell with fewer curves than seeds says how many."""
    check = summary.get("budget_check") or {}
    crossings, seeds = check.get("crossings") or {}, summary.get("seeds", [])
    if not crossings:
        return []
    own = {m: s for m, s in (summary.get("model_seeds") or {}).items() if s != seeds}  # sweep.model_seeds
    out = [f"Exit from the plateau (first evaluation with context gain >= {check['threshold']:+g} nat), per seed "
           f"{', '.join(map(str, seeds))}" + "".join(f"; {m} per seed {', '.join(map(str, s))}"
                                                    for m, s in sorted(own.items())) + ":",
           "", "| model at scale | exit steps | spread |", "|---|---|---:|"]
    def order(cell: str) -> tuple[str, int]:  # "bert at scale 64" -> ("bert", 64)
        series, _, scale = cell.rpartition(" at scale ")
        return series, int(scale) if scale.isdigit() else 0

    for cell, steps in sorted(crossings.items(), key=lambda kv: order(kv[0])):
        shown = ", ".join("never" if math.isinf(s) else f"{s:,.0f}" for s in steps)
        n = len(own.get(order(cell)[0].split("-")[0], seeds))  # "pt-rank" -> pt's seeds
        waiting = (summary.get("missing_runs") or {}).get(cell, 0)  # not trained yet (not in the results folder)
        if n and len(steps) + waiting != n:  # a run without a learning curve (failed before its first one)
            shown += f" ({len(steps)} of {n} seeds have a curve)"
        if waiting:
            shown += f" ({waiting} of {n} seeds not run yet)"
        spread = max(steps) - min(steps) if len(steps) > 1 else math.nan  # one seed has no spread
        out.append(f"| {cell} | {shown} | {'n/a' if not math.isfinite(spread) else f'{spread:,.0f}'} |")
    return out + [""]
