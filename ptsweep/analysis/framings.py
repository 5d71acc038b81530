"""Three framings of "PT beats a baseline": equal total parameters ([S] §3.2, Figure 2), equal non-embedding
parameters, equal training compute (rules: docs/verdicts.md, "Three framings").

Every framing compares the models on one axis x through their fitted curves (``analysis.fits.fit_scaling_law``):

    x  = params (total) | non_embedding_params | train_flops (= flops_per_token x tokens; same tokens for every model)
    L_m(x) = a_m x^-b_m [+ c_m]                   fitted to model m's runs (seed replicates) on that axis
    D(x_s) = L_PT(x_s) - L_base(x_s)              at x_s = PT's own x at each PT scale s (negative: PT better)

with the Welch-Satterthwaite interval (``level``) of D from each cell's own seed spread through the two fits
(``curve_noise``: none, and no verdict, where a one-seed size moves D or a model's seeds show no spread; widened
for a curve that misses its own cells); "extrapolated" (no verdict) beyond EXTRAPOLATION_TOL outside the baseline's
x range. Each curve is fitted to the cells that learned context only, so a cell that learned nothing never
anchors a verdict at another scale. :func:`gate` leaves a comparison undecided where a
side learned no context, was still leaving its loss plateau, or lost with its best LR on an edge of its tuning range.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from ptsweep import metric_keys
from ptsweep.analysis import curve_noise, target_kinds
from ptsweep.analysis.fits import fit_scaling_law
from ptsweep.analysis.model_spread import NONE, per_scale, seed_losses, spread_ci

FRAMINGS = {"total": "params", "non_embedding": "non_embedding_params", "flops": "train_flops"}
"""Framing name (the values of ``sweep.match``) -> runs-table column of its x axis."""
LABELS = {"total": "equal total parameters ([S])", "non_embedding": "equal non-embedding parameters",
          "flops": "equal training compute (FLOPs)"}
EXTRAPOLATION_TOL = 0.10
"""Relative distance beyond the baseline's measured x range up to which its fitted curve counts as interpolated
(twice the sizing rule's 5 % matching tolerance)."""
# Why a comparison or a scale's winner is undecided: a side with context gain not > 2 SE, a loser whose best LR is
# on an edge of its tuning range, a side still leaving its plateau (``learning_curves.plateau_cells``' words), a side
# a report-only rendering found no runs of, one model run at a scale, a lowest loss within its as-run interval.
NO_CONTEXT = "undecided: {models} learned no context at this budget"
LR_EDGE = "undecided: {model}'s LR is at the edge of its tuning range ({lr:g})"
PLATEAU = "undecided: {why}, so it was still leaving its plateau"
MISSING = "undecided: no finished runs of {models} in the results folder yet"
ALONE = "undecided: only {model} ran at this scale"
NO_RUN = "undecided: no finished run of {models} at this scale"
WITHIN_NOISE = "undecided: {model} has the lowest loss, but its 95 % interval against {others} includes 0"
NO_NOISE = ("undecided: a size the curves rest on has one seed (or a model's seeds are identical), so there is no "
            "seed noise to put an interval on")
CLAIMS = (("pt_beats_bert_at_every_scale", "PT beats BERT at every scale", "pt-bert", "a_lower"),
          ("ut_beats_pt_at_every_scale", "UT beats PT at every scale", "pt-ut", "b_lower"))
"""[S]'s two claims: (summary key, the claim in words, the PT - baseline pair that decides it, the decision that
supports it)."""


def learned_cells(table) -> set[tuple[str, str]]:
    """{(series, scale)} of the cells whose seed-mean context gain is > 2 SE; ``table``: one row per series x scale
    with columns series, scale, context_gain, context_gain_se (scaling-curves' results table)."""
    return {(str(r["series"]), str(int(r["scale"]))) for _, r in table.iterrows()
            if metric_keys.learned_context({"context_gain": float(r["context_gain"]),
                                            "context_gain_se": float(r["context_gain_se"])})}


def context_gate(per_scale: Mapping[str, Mapping], pair: Sequence[str], learned: set[tuple[str, str]],
                 absent: set[tuple[str, str]] = frozenset()) -> dict:
    """``per_scale`` ({scale: comparison row}) with every scale where a side of ``pair`` (PT series, baseline) is not
    in ``learned`` made "undecided", its row carrying ``no_context`` (the sides) and ``reason``: NO_CONTEXT, or
    MISSING with ``absent`` (the sides in ``absent``, cells with no runs yet: not learning and not having run
    differ)."""
    out = {}
    for s, d in per_scale.items():
        who, gone = [m for m in pair if (m, str(s)) not in learned], [m for m in pair if (m, str(s)) in absent]
        reason = MISSING.format(models=" and ".join(gone)) if gone else NO_CONTEXT.format(models=" and ".join(who))
        out[str(s)] = ({**d, "decided": "undecided", "no_context": who, "reason": reason,
                        **({"absent": gone} if gone else {})} if who else dict(d))
    return out


def plateau_gate(per_scale: Mapping[str, Mapping], pair: Sequence[str],
                 late: Mapping[tuple[str, str], str]) -> dict:
    """``per_scale`` ({scale: comparison row}, already through :func:`context_gate`) with every scale not gated
    there where a side of ``pair`` is in ``late`` (``learning_curves.plateau_cells``: {(series, scale): why}) made
    "undecided", its row carrying ``plateau`` (the sides) and ``reason`` (PLATEAU)."""
    out = {}
    for s, d in per_scale.items():
        who = [m for m in pair if (m, str(s)) in late]
        out[str(s)] = ({**d, "decided": "undecided", "plateau": who,
                        "reason": PLATEAU.format(why="; ".join(late[(m, str(s))] for m in who))}
                       if who and not d.get("no_context") else dict(d))
    return out


def edge_cells(table) -> dict[tuple[str, str], float]:
    """{(series, scale): best LR} of the cells whose LR tuning left the best LR on an edge of the LRs tried (column
    lr_edge set: 'low', 'high' or 'single', one finished trial); ``table``: scaling-curves' results table (no lr_edge
    column: none)."""
    if "lr_edge" not in table.columns:
        return {}
    return {(str(r["series"]), str(int(r["scale"]))): float(r["best_lr"]) for _, r in table.iterrows()
            if isinstance(r["lr_edge"], str) and r["lr_edge"]}


def edge_gate(per_scale: Mapping[str, Mapping], pair: Sequence[str], edged: Mapping[tuple[str, str], float]) -> dict:
    """``per_scale`` ({scale: comparison row}, already through :func:`context_gate`) with every scale whose loser
    (the baseline ``pair[1]`` where PT is lower, PT ``pair[0]`` where the baseline is) is in ``edged``
    (:func:`edge_cells`) made "undecided", its row carrying ``lr_edge`` (the loser) and ``reason`` (LR_EDGE). Every
    other row, a win of an edge-flagged side included, is kept as it is."""
    out = {}
    for s, d in per_scale.items():
        loser = {"a_lower": pair[1], "b_lower": pair[0]}.get(d.get("decided"))
        lr = edged.get((loser, str(s))) if loser else None
        out[str(s)] = ({**d, "decided": "undecided", "lr_edge": loser, "reason": LR_EDGE.format(model=loser, lr=lr)}
                       if lr is not None else dict(d))
    return out


def gate(per_scale: Mapping[str, Mapping], pair: Sequence[str], learned: set[tuple[str, str]],
         edged: Mapping[tuple[str, str], float], late: Mapping[tuple[str, str], str] | None = None,
         absent: set[tuple[str, str]] = frozenset()) -> dict:
    """The gates of a comparison in their order: :func:`context_gate` (with ``absent``), :func:`plateau_gate` (none
    when ``late`` is None), :func:`edge_gate`."""
    per = plateau_gate(context_gate(per_scale, pair, learned, absent), pair, late or {})
    return edge_gate(per, pair, edged)


def decision_text(d: Mapping) -> str:
    """One comparison's decision in words: "PT lower", "baseline lower", its gate's reason or the raw decision."""
    return d.get("reason") or {"a_lower": "PT lower", "b_lower": "baseline lower"}.get(d.get("decided"),
                                                                                      d.get("decided", "undecided"))


def verdict_text(verdict: bool | None, per_scale: Mapping[str, Mapping]) -> str:
    """"yes" / "no" / "undecided: bert learned no context at this budget (N = 32, 64)" / "undecided: the interval
    includes 0 (N = 64)": an every-scale verdict in words with why it is undecided at which scales."""
    if verdict is not None:
        return "yes" if verdict else "no"
    reasons = []
    gated = {s: d for s, d in per_scale.items() if d.get("no_context")}
    if any(d.get("absent") for d in gated.values()):  # some sides not run yet: each scale's own reason
        for reason in dict.fromkeys(d["reason"] for d in gated.values()):
            reasons.append(f"{reason} (N = {', '.join(s for s, d in gated.items() if d['reason'] == reason)})")
        gated = {}
    if gated:
        who = list(dict.fromkeys(m for d in gated.values() for m in d["no_context"]))
        reasons.append(f"{NO_CONTEXT.format(models=' and '.join(who))} (N = {', '.join(gated)})")
    gated_by: dict[str, list[str]] = {}  # each PLATEAU / LR_EDGE reason (one per model and cause) -> its scales
    for s, d in per_scale.items():
        if d.get("plateau") or d.get("lr_edge"):
            gated_by.setdefault(d["reason"], []).append(s)
    reasons += [f"{reason} (N = {', '.join(scales)})" for reason, scales in gated_by.items()]
    by = every_scale(per_scale)  # its lists leave the gated scales out, except "failed_at"
    gates = set(by["no_context_at"]) | set(by["plateau_at"]) | set(by["lr_edge_at"])
    why = {"no fit": [s for s in by["failed_at"] if s not in gates],
           "PT's x outside the baseline's range": by["extrapolated_at"], "the interval includes 0": by["undecided_at"],
           "no seed spread, no interval": by.get("no_noise_at", [])}
    parts = [f"{what} (N = {', '.join(scales)})" for what, scales in why.items() if scales]
    if reasons:  # each gate's reason says "undecided: ..." itself
        return "; ".join(reasons + parts)
    return f"undecided: {'; '.join(parts)}" if parts else "undecided"


def compare_at(x_a: Sequence[float], y_a: Sequence[float], x_b: Sequence[float], y_b: Sequence[float],
               at: Sequence[float], level: float = 0.95, names: Sequence[str] = ("a", "b")) -> list[dict]:
    """L_a(x) - L_b(x) at every x in ``at`` from the two fitted curves, with the delta-method Welch-Satterthwaite
    interval of ``curve_noise`` (module docstring).

    ``x_*`` / ``y_*``: one entry per run (runs at the same x are seeds); ``names``: the two models, for the reasons.
    Returns one dict per ``at`` value: x, loss_a, loss_b, diff, se, df, lo, hi, decided (a_lower | b_lower |
    undecided | extrapolated), in_range_a, in_range_b, and ``lack_of_fit`` ({model: the test}) where a curve misses
    its cells (its interval terms widened); an undecided row without noise carries ``reason`` NO_NOISE."""
    at = np.asarray(at, dtype=float)
    fa, fb = (fit_scaling_law(x, y, n_boot=0, level=level, grid=at) for x, y in ((x_a, y_a), (x_b, y_b)))
    ca, cb = curve_noise.cells(x_a, y_a), curve_noise.cells(x_b, y_b)
    noise = curve_noise.difference_interval(fa, ca, fb, cb, at, level)
    misfit = {m: t for m, f, c in zip(names, (fa, fb), (ca, cb))
              if (t := curve_noise.lack_of_fit(f, c)) and t["p"] < curve_noise.LACK_OF_FIT_ALPHA}
    out = []
    for i, x in enumerate(at):
        se, df, lo, hi = noise[i]
        ra, rb = _in_range(x, ca.x), _in_range(x, cb.x)  # the x with a finite loss
        decided = ("extrapolated" if not (ra and rb) else "undecided" if not math.isfinite(lo)
                   else "a_lower" if hi < 0 else "b_lower" if lo > 0 else "undecided")
        row = {"x": float(x), "loss_a": float(fa["band"]["mid"][i]), "loss_b": float(fb["band"]["mid"][i]),
               "diff": float(fa["band"]["mid"][i] - fb["band"]["mid"][i]), "se": se, "df": df, "lo": lo, "hi": hi,
               "decided": decided, "in_range_a": ra, "in_range_b": rb, **({"lack_of_fit": misfit} if misfit else {})}
        if decided == "undecided" and not math.isfinite(lo):
            row.update(no_noise=True, reason=NO_NOISE)
        out.append(row)
    return out


def _in_range(x: float, xs) -> bool:
    """x within EXTRAPOLATION_TOL of the range of the positive finite ``xs``."""
    xs = np.asarray(xs, dtype=float)
    xs = xs[np.isfinite(xs) & (xs > 0)]
    return bool(xs.size) and xs.min() * (1 - EXTRAPOLATION_TOL) <= x <= xs.max() * (1 + EXTRAPOLATION_TOL)


def every_scale(per_scale: Mapping[str, Mapping], win: str = "a_lower") -> dict:
    """The per-framing statement "PT beats the baseline at every scale" (module docstring) with its reasons;
    ``win="b_lower"`` states "the baseline beats PT at every scale" instead."""
    by = {k: [s for s, d in per_scale.items() if d.get("decided") == k]
          for k in ("a_lower", "b_lower", "undecided", "extrapolated")}
    lose = "b_lower" if win == "a_lower" else "a_lower"
    errors = [s for s, d in per_scale.items() if "error" in d]
    gated = [s for s, d in per_scale.items() if d.get("no_context")]
    late = [s for s, d in per_scale.items() if d.get("plateau")]
    edged = [s for s, d in per_scale.items() if d.get("lr_edge")]
    noiseless = [s for s, d in per_scale.items() if d.get("no_noise") and s not in {*gated, *late, *edged}]
    by["undecided"] = [s for s in by["undecided"] if s not in {*gated, *late, *edged, *errors, *noiseless}]
    verdict = (False if by[lose] else True if per_scale and not errors and len(by[win]) == len(per_scale)
               else None)
    return {"every_scale": verdict, "n_scales": len(per_scale), "pt_lower_at": by["a_lower"],
            "baseline_lower_at": by["b_lower"], "undecided_at": by["undecided"],
            "extrapolated_at": by["extrapolated"], "failed_at": errors, "no_context_at": gated,
            "plateau_at": late, "lr_edge_at": edged, "no_noise_at": noiseless}


def framings(runs, pt_series: Sequence[str], baselines: Sequence[str], learned: set[tuple[str, str]],
             edged: Mapping[tuple[str, str], float], late: Mapping[tuple[str, str], str] | None = None,
             absent: set[tuple[str, str]] = frozenset(), level: float = 0.95, scales: Sequence = ()) -> dict:
    """{framing: {"<pt series>-<baseline>": {"axis", "per_scale": {scale: compare_at row}, **every_scale}}}.

    ``runs``: the scaling-curves runs table (columns series, scale, loss and the FRAMINGS columns); ``learned``
    (``learned_cells``: the only cells each curve is fitted to), ``late`` (``learning_curves.plateau_cells``; None:
    no plateau gate) and ``edged`` (``edge_cells``): every comparison passes :func:`gate`. ``scales``: the study's
    scales, each in every comparison (one where PT has no finished run is undecided, never left out)."""
    out: dict = {}
    finite = runs[np.isfinite(runs["loss"].astype(float))]
    fit_rows = finite.loc[np.array([(str(x), str(int(s))) in learned for x, s in zip(finite["series"],
                                                                                    finite["scale"])], dtype=bool)]
    for name, col in FRAMINGS.items():
        res = {}
        for pts in pt_series:
            a = fit_rows[fit_rows["series"] == pts]
            at = finite[finite["series"] == pts].groupby("scale")[col].first().astype(float)  # PT's own x
            for base in baselines:
                b = fit_rows[fit_rows["series"] == base]
                try:
                    rows = compare_at(a[col], a["loss"], b[col], b["loss"], at.to_numpy(), level, (pts, base))
                    per = {str(int(s)): r for s, r in zip(at.index, rows)}
                except ValueError as e:  # fewer than 2 distinct x with a finite loss
                    per = {str(int(s)): {"x": float(x), "error": str(e), "decided": "undecided"}
                           for s, x in at.items()}
                for sc in (str(int(x)) for x in scales if str(int(x)) not in per):  # no finished PT run there
                    per[sc] = {"x": math.nan, "error": f"no finished run of {pts}", "decided": "undecided"}
                per = gate(per, (pts, base), learned, edged, late, absent)
                res[f"{pts}-{base}"] = {"axis": col, "per_scale": per, **every_scale(per)}
        out[name] = res
    return out


def comparisons(runs, table, spreads: Mapping[tuple[str, str], tuple[float, int]], pt_series: list[str],
                baselines: list[str], scales: list, late: Mapping[tuple[str, str], str] | None = None) -> dict:
    """Every PT - baseline statement of the summary, each through :func:`gate`: ``differences`` (as run, per scale:
    ``model_spread.spread_ci`` of the two models' seed losses; ungated ``by_target``: ``target_kinds``), the three
    ``framings``, the every-scale verdicts (True / False / None) with ``statements`` in words and ``winners`` per
    scale (:func:`winner`). ``runs``: one row per run; ``table``: one row per series x scale (context gain, lr_edge,
    best_lr, status); ``spreads``: ``model_spread.cell_spreads`` of the runs; ``late``: the plateau gate's cells (None:
    no such gate)."""
    learned, edged = learned_cells(table), edge_cells(table)
    absent = ({(str(r["series"]), str(int(r["scale"]))) for _, r in table.iterrows() if r["status"] == "missing"}
              if "status" in table.columns else set())
    differences = {}
    for pts in pt_series:
        for other in baselines:
            differences[f"{pts}-{other}"] = gate(per_scale(runs, spreads, pts, other, scales), (pts, other), learned,
                                                 edged, late, absent)
    by_name = framings(runs, pt_series, baselines, learned, edged, late, absent, scales=scales)
    by_framing = {f: {pair: r["every_scale"] for pair, r in res.items()} for f, res in by_name.items()}
    ut_by_framing = {f: every_scale(res["pt-ut"]["per_scale"], win="b_lower")["every_scale"]
                     for f, res in by_name.items() if "pt-ut" in res}
    verdicts, statements = {}, {}
    for key, _, pair, win in CLAIMS:
        per = differences.get(pair, {})
        verdicts[key] = every_scale(per, win=win)["every_scale"] if per else None
        statements[key] = verdict_text(verdicts[key], per) if per else "n/a (not run)"
    winners = {str(int(s)): winner(g, str(int(s)), learned, edged, late,
                                   spreads={x: spreads.get((x, str(int(s))), NONE) for x in g["series"]},
                                   by_series={x: seed_losses(runs, x, s) for x in g["series"]})
               for s, g in table.groupby("scale") if g["loss"].map(math.isfinite).any()}
    return {"differences": differences, "framings": by_name, "winners": winners, **verdicts,
            "seed_spreads": {f"{m}-{s}": {"sd": math.sqrt(v) if math.isfinite(v) else None, "df": df}
                             for (m, s), (v, df) in spreads.items()},
            "by_target": target_kinds.differences(runs, pt_series, baselines, scales),
            "statements": statements, "pt_beats_bert_by_framing": {f: v.get("pt-bert") for f, v in by_framing.items()},
            "ut_beats_pt_by_framing": ut_by_framing, "pt_beats_by_framing": by_framing}


def winner(cells, scale: str, learned: set[tuple[str, str]], edged: Mapping[tuple[str, str], float],
           late: Mapping[tuple[str, str], str] | None, by_series: Mapping[str, list],
           spreads: Mapping[str, tuple[float, int]]) -> dict:
    """The lowest loss among one scale's ``cells`` (results-table rows): {"winner", "loss", "losses"}, "winner" None
    with a "reason" when a series there has no finished run (non-finite loss), learned no context, was still leaving
    its plateau (``late``) or lost with its LR on an edge, when only one series ran, or when the lowest loss is not
    below another's by a decided
    ``model_spread.spread_ci`` (each series' seed losses ``by_series``, the cells' ``spreads`` {series: (var, df)})."""
    gone = [x for x, v in zip(cells["series"], cells["loss"]) if not math.isfinite(v)]  # failed or not run
    cells = cells[cells["loss"].map(math.isfinite)]
    best = cells.loc[cells["loss"].idxmin()]
    idle = [x for x in cells["series"] if (x, scale) not in learned]
    slow = [late[(x, scale)] for x in cells["series"] if (x, scale) in (late or {})]
    lost = [x for x in cells["series"] if x != best["series"] and (x, scale) in edged]
    reason = (NO_RUN.format(models=" and ".join(gone)) if gone else
              NO_CONTEXT.format(models=" and ".join(idle)) if idle else
              PLATEAU.format(why="; ".join(slow)) if slow else
              "; ".join(LR_EDGE.format(model=x, lr=edged[(x, scale)]) for x in lost))
    if not reason and len(cells) < 2:
        reason = ALONE.format(model=best["series"])
    if not reason:
        top = best["series"]
        vs = {x: spread_ci(by_series[top], by_series[x], spreads.get(top, NONE), spreads.get(x, NONE))
              for x in cells["series"] if x != top}
        close = [x for x, d in vs.items() if d["decided"] != "a_lower"]
        reason = (next((d["reason"] for d in vs.values() if d.get("no_noise")), "")
                  or (WITHIN_NOISE.format(model=top, others=" and ".join(close)) if close else ""))
    return {"winner": None if reason else best["series"], "loss": float(best["loss"]),
            "losses": {r["series"]: float(r["loss"]) for _, r in cells.iterrows()}, **({"reason": reason} if reason
                                                                                        else {})}


def winners_text(winners: dict) -> str:
    """'32: pt, 64: undecided: bert learned no context at this budget': the lowest loss per scale, or why none."""
    return ", ".join(f"{k}: {v['winner'] or v.get('reason', 'undecided')}" for k, v in winners.items())


def report_lines(summary: Mapping, as_run: bool = True) -> list[str]:
    """Markdown lines: tuning trials per model, then the three framings with intervals and the every-scale statement
    per framing (for scaling-curves' report.md and the demo report), and with ``as_run`` the every-scale statements of
    the runs as matched (the demo report's summary states those)."""
    out = ["Tuning effort (trials per model and scale; PT is tuned once at its base width and transferred):", ""]
    out += [f"- {model}: {t['description']}" for model, t in summary.get("tuning_trials", {}).items()]
    m, level = summary.get("match", "total"), int(100 * summary.get("framing_level", 0.95))
    out += ["", f"Baselines are sized by the rule in docs/baselines.md \"Baseline shapes\", matched to PT by **{m}** "
                f"(`sweep.match`). Each framing compares the fitted curves at PT's own x (negative = PT lower), "
                f"{level} % interval from each cell's own seed spread (delta method, Welch-Satterthwaite); "
                f"\"extrapolated\" = PT's x lies outside the baseline's measured range (no verdict).", ""]
    for name, res in summary.get("framings", {}).items():
        out += [f"**{LABELS.get(name, name)}** (x = {FRAMINGS.get(name, '?')}):", ""]
        for pair, r in res.items():
            out.append(f"- {pair}: " + _cells(r["per_scale"])
                       + f". **At every scale: {verdict_text(r['every_scale'], r['per_scale'])}**" + _scales_against(r))
        out.append("")
    if as_run and "statements" in summary:
        st = summary["statements"]
        out += [f"As run (the runs matched by {m}, per-scale mean difference with a {level} % Welch interval from "
                f"each cell's own seed spread, `differences`): PT beats BERT at every scale: "
                f"{st.get('pt_beats_bert_at_every_scale', 'n/a')}; UT "
                f"beats PT at every scale: {st.get('ut_beats_pt_at_every_scale', 'n/a')}.", ""]
        out += [f"- {pair}: {_cells(per)}" for pair, per in summary.get("differences", {}).items()]
    return out


NO_SCALES = "no scale to compare yet (none has runs of both models)"
"""What a comparison's per-scale cells read when no scale has a difference to state."""


def _cells(per_scale: Mapping[str, Mapping]) -> str:
    """'N=32: -0.0574 [-0.2416, +0.1267] undecided; N=64: no fit': each scale's difference, interval and decision
    (:data:`NO_SCALES` for none)."""
    if not per_scale:
        return NO_SCALES
    return "; ".join((f"N={s}: no fit ({d['reason']})" if d.get("reason") else f"N={s}: no fit") if "error" in d
                     else f"N={s}: no difference, {decision_text(d)}" if not math.isfinite(d.get("diff", math.nan))
                     else f"N={s}: {d['diff']:+.4f} {_interval(d)} {decision_text(d)}"
                     + _to_decide(d) + _misfit(d) for s, d in per_scale.items())


def _interval(d: Mapping) -> str:
    """'[-0.2416, +0.1267]', or 'no interval' where the seeds give none."""
    return f"[{d['lo']:+.4f}, {d['hi']:+.4f}]" if math.isfinite(d.get("lo", math.nan)) else "no interval"


def _misfit(d: Mapping) -> str:
    """' (interval widened: bert's curve misses its cells, lack of fit F(1, 3) = 67.2, p = 0.0038)' or ''."""
    return "".join(f" (interval widened: {m}'s curve misses its cells, lack of fit F({t['df1']}, {t['df2']}) = "
                   f"{t['F']:.3g}, p = {t['p']:.2g})" for m, t in d.get("lack_of_fit", {}).items())


def _to_decide(d: Mapping) -> str:
    """' (~7 seeds per model would decide it at these spreads)' for an as-run difference undecided by its interval
    alone; '' otherwise (decided, gated, or a framing's row)."""
    if "seeds_to_decide" not in d or d.get("decided") != "undecided" or d.get("reason"):
        return ""
    n = d["seeds_to_decide"]
    n80 = f"; {d['seeds_80']} for an 80 % chance" if d.get("seeds_80") else ""
    return (f" ({n} seeds per model would decide it at these spreads, SD {d['sd_a']:.3f} / {d['sd_b']:.3f}{n80})"
            if n else f" (no seed count decides a difference this small at SD {d['sd_a']:.3f} / {d['sd_b']:.3f})")


def _scales_against(r: Mapping) -> str:
    labels = {"baseline_lower_at": "baseline lower", "undecided_at": "undecided", "extrapolated_at": "extrapolated",
              "failed_at": "no fit"}
    parts = [f"{label} at N = {', '.join(r[k])}" for k, label in labels.items() if r.get(k)]
    return f" ({'; '.join(parts)})" if parts and r["every_scale"] is False else ""  # "undecided" names its own
