"""The lr-horizon study's analysis and report (``sweeps.lr_horizon`` runs the trials). Per (model, budget): the
optimum eta* with its plausible set and bracket (the LRs run just outside it; open at an edge), the basin and the
collapses (diverged, or past eta* above the unigram loss or with less than ``collapse_frac`` of eta*'s context gain;
below eta* the same is marked too slow, and a run not yet in the results folder missing; a budget with a run
missing has no eta*, only its finished points). Per model: the fit eta*(T) = eta0 (T / T0)^-beta, the range of
beta through every bracket and the t interval of beta over the seeds' interpolated optima (``analysis.horizon``;
not where the run just above a seed's best collapsed: a cliff places no vertex),
over the budgets where the model learned context at eta* (a plateau's optimum is left out, and said so).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from ptsweep import metric_keys
from ptsweep.analysis import basin, horizon
from ptsweep.analysis import transfer_drift as td
from ptsweep.analysis.paired_gap import interval_text, paired
from ptsweep.config import RunConfig, with_overrides


def _points(g: pd.DataFrame, unigram: float, collapse_frac: float) -> list[dict]:
    """One row per LR of one (model, budget): seeds planned and in the results folder, seed-mean loss and context
    gain (``metric_keys.seed_mean``), status and the collapse mark (module docstring; '' when none)."""
    rows = []
    for lr, gl in g.groupby("optim.lr", sort=True):
        loss = gl["val_loss"].astype(float)
        seeds_in = int((gl["status"] != "missing").sum())
        gain, gain_se = metric_keys.seed_mean(gl["context_gain"], gl["context_gain_se"])
        if seeds_in < len(gl):  # no mean over part of the seeds beside full ones
            gain, gain_se = math.nan, math.nan
        finite = bool(np.isfinite(loss).all())
        rows.append({"lr": float(lr), "seeds": int(len(gl)), "seeds_in": seeds_in,
                     "loss": float(loss.mean()) if finite else math.inf,
                     "context_gain": gain, "context_gain_se": gain_se,
                     "status": ",".join(sorted(set(gl["status"]))), "mark": ""})
    complete = all(r["seeds_in"] == r["seeds"] for r in rows)  # no eta* from part of the grid
    best = min((r for r in rows if math.isfinite(r["loss"])), key=lambda r: r["loss"], default=None) \
        if complete else None
    for r in rows:
        # past eta* a run that lost what eta* learned collapsed; below it, it was too slow to learn it
        what = None if best is None else "collapsed" if r["lr"] > best["lr"] else "too slow"
        if not math.isfinite(r["loss"]):
            r["mark"] = next((m for m in ("diverged", "missing") if m in r["status"]), "failed")
        elif why := lost_context(r["loss"], r["context_gain"], best["context_gain"] if best else math.nan, unigram,
                                 collapse_frac):
            r["mark"] = f"{what} ({why})" if what else why
    return rows


def lost_context(loss: float, gain: float, best_gain: float, unigram: float, collapse_frac: float) -> str:
    """Why a finished run lost what the best run learned, '' when it did not: at or above the unigram loss, or with
    less than ``collapse_frac`` of the best run's context gain (when that gain is positive)."""
    if math.isfinite(unigram) and loss >= unigram:
        return "above the unigram loss"
    if best_gain > 0 and gain < collapse_frac * best_gain:
        return f"context gain {gain:+.2f} against {best_gain:+.2f}"
    return ""


def budget_result(g: pd.DataFrame, unigram: float, collapse_frac: float) -> dict:
    """eta*, plausible set, bracket, basin, learned context, the points, each seed's interpolated optimum
    (``seed_opt``, :func:`seed_optima`; ``seed_bounded``: a collapse just above its best run) and each seed's loss at
    eta* (``seed_loss``) of one (model, budget); no eta* while runs of its grid are missing from the results folder
    (``runs_in`` of ``runs``)."""
    points = _points(g, unigram, collapse_frac)
    runs_in, runs = sum(p["seeds_in"] for p in points), sum(p["seeds"] for p in points)
    if runs_in < runs:
        return {"x_opt": None, "points": points, "runs_in": runs_in, "runs": runs}
    o = td.optimum(g, "optim.lr", n_boot=200)
    if o.get("x_opt") is None:
        return {"x_opt": None, "points": points}
    xs = sorted(p["lr"] for p in points)
    below = [x for x in xs if x < o["plausible"][0]]
    above = [x for x in xs if x > o["plausible"][-1]]
    at = next(p for p in points if math.isclose(p["lr"], o["x_opt"]))
    win = basin.window([p["lr"] for p in points], [p["loss"] for p in points])
    seed_opt, seed_bounded = seed_optima(g, unigram, collapse_frac)
    return {"x_opt": o["x_opt"], "seed_opt": seed_opt, "seed_bounded": seed_bounded,
            "seed_loss": _seed_losses(_runs_at(g, o["x_opt"])),
            "plausible": o["plausible"],
            "bracket": [below[-1] if below else None, above[0] if above else None],
            "loss": at["loss"], "context_gain": at["context_gain"], "context_gain_se": at["context_gain_se"],
            "learned": metric_keys.learned_context(at), "rise_half": win.get("rise_lo", math.nan),
            "rise_double": win.get("rise_hi", math.nan), "points": points}


def seed_optima(g: pd.DataFrame, unigram: float, collapse_frac: float) -> tuple[list[float | None], list[bool]]:
    """Per seed (ascending) of one (model, budget): ``horizon.vertex_lr`` of its losses over the LRs it ran (a
    diverged or failed run counts as an infinite loss), None where its lowest loss is on a grid edge; and whether the
    run just above its lowest loss collapsed (diverged, or :func:`lost_context`), where the optimum is None too: a
    parabola through a cliff puts its vertex near the geometric mean of the best LR and the one below it, wherever the
    optimum lies, so it places nothing."""
    optima, bounded = [], []
    for _, gs in g.groupby("seed", sort=True):
        gs = gs.sort_values("optim.lr")
        loss = np.where(gs["status"] == "ok", gs["val_loss"].astype(float), math.inf)
        gain = gs["context_gain"].astype(float).to_numpy()
        i = int(np.argmin(loss))
        cliff = bool(np.isfinite(loss[i]) and i + 1 < len(loss) and (
            not np.isfinite(loss[i + 1]) or lost_context(loss[i + 1], gain[i + 1], gain[i], unigram, collapse_frac)))
        bounded.append(cliff)
        optima.append(None if cliff else horizon.vertex_lr(gs["optim.lr"].astype(float).tolist(), loss.tolist()))
    return optima, bounded


def _slope(pts: list[tuple[int, float]]) -> dict:
    """``horizon.slope_interval`` of (budget, seed optimum) points."""
    return horizon.slope_interval([t for t, _ in pts], [e for _, e in pts])


def _seed_interval(budgets: dict[int, dict], have: list[int]) -> dict:
    """``horizon.slope_interval`` over the seed optima of the budgets ``have`` (keys beta_seeds, beta_ci, df,
    n_seed_optima, n_seed_edges, n_seed_bounded: left out on a grid edge, against a collapse); no beta_ci with
    fewer than 3 optima at 2 budgets. With more than 2 budgets also "beta_local": [T_i, T_i+1, beta, lo, hi] of each
    adjacent pair, where it has an interval (does beta hold over the horizon?)."""
    pts = [(t, e) for t in have for e in budgets[t].get("seed_opt", []) if e is not None]
    bounded = sum(sum(budgets[t].get("seed_bounded", [])) for t in have)
    edges = sum(e is None for t in have for e in budgets[t].get("seed_opt", [])) - bounded
    out = {"n_seed_optima": len(pts), "n_seed_edges": edges, "n_seed_bounded": bounded}
    if len(pts) >= 3 and len({t for t, _ in pts}) >= 2:
        si = _slope(pts)
        out.update(beta_seeds=si["beta"], beta_ci=si["beta_ci"], df=si["df"])
    out["beta_local"] = []
    for pair in zip(have, have[1:]) if len(have) > 2 else []:
        sub = [(t, e) for t, e in pts if t in pair]
        if len(sub) >= 3 and len({t for t, _ in sub}) == 2:
            si = _slope(sub)
            out["beta_local"].append([*pair, si["beta"], *si["beta_ci"]])
    return out


def fitted_budgets(budgets: dict[int, dict]) -> list[int]:
    """The budgets the fit runs over: those with an optimum where the model learned context (a plateau's optimum is
    left out)."""
    return [t for t in sorted(budgets) if budgets[t].get("x_opt") is not None and budgets[t]["learned"]]


def model_fit(budgets: dict[int, dict]) -> dict:
    """The fit over :func:`fitted_budgets` (module docstring), with a note on what bounds it and which optima it
    left out."""
    optima = [t for t in sorted(budgets) if budgets[t].get("x_opt") is not None]
    have = fitted_budgets(budgets)
    plateau = [f"left out: no context learned at eta* of {', '.join(f'{t:,}' for t in optima if t not in have)} "
               f"steps (a plateau's optimum)"] if len(have) < len(optima) else []
    if len(have) < 2:
        return {"beta": None, "beta_range": None, "note": "; ".join(
            [f"{len(have)} budget(s) with an optimum where the model learned context, a fit needs 2", *plateau])}
    eta = [budgets[t]["x_opt"] for t in have]
    lo = [budgets[t]["bracket"][0] or 0.0 for t in have]
    hi = [budgets[t]["bracket"][1] or math.inf for t in have]
    fit = horizon.fit_power(have, eta)
    rng = horizon.beta_range(have, lo, hi)
    notes = []
    if rng is None:
        notes.append("no power law passes through every bracket")
    if any(budgets[t]["bracket"][0] is None or budgets[t]["bracket"][1] is None for t in have):
        notes.append("an optimum at an edge of the LRs run: its side of the range is open")
    return {**fit, **_seed_interval(budgets, have), "beta_range": list(rng) if rng else None,
            "note": "; ".join(notes + plateau)}


def model_identity(m) -> dict:
    """A model config as horizon.json names it: name, parametrization, width, scaling, anchor (the base width; None
    without one) and, when it has any, its variants (``variants.normalize``: each with every setting)."""
    from ptsweep import variants

    anchor = getattr(m, "base_width", None)
    out = {"name": m.name, "parametrization": str(m.parametrization), "width": int(m.width),
           "scaling": str(getattr(m, "scaling", "")), "anchor": None if anchor is None else int(anchor)}
    chosen = json.loads(json.dumps(variants.normalize(m))) if getattr(m, "variants", None) else []
    return {**out, "variants": chosen} if chosen else out


def analyse(df: pd.DataFrame, cfg: RunConfig, model_shapes: dict[str, dict]) -> dict:
    """{"unigram_loss", "no_context_loss", "models": {model: {"model": :func:`model_identity`, "budgets": {steps:
    :func:`budget_result`}, "fit": :func:`model_fit`}}}."""
    base = td.baselines(df)
    unigram = base.get("unigram_loss", math.nan)
    out: dict = {"unigram_loss": unigram, "no_context_loss": base.get("no_context_loss", math.nan), "models": {}}
    grid = df[~df["predicted"]]
    for model, shape in model_shapes.items():
        m = with_overrides(cfg, shape).model
        budgets = {int(t): budget_result(g, unigram, cfg.sweep.lr_horizon.collapse_frac)
                   for t, g in grid[grid["model"] == model].groupby("steps", sort=True)}
        out["models"][model] = {"model": model_identity(m), "budgets": budgets, "fit": model_fit(budgets)}
    if cfg.sweep.lr_horizon.predict:
        pt = out["models"]["pt"]["budgets"]
        out["prediction"] = prediction(df[(df["model"] == "pt") & (df["steps"] == max(pt))], pt,
                                       cfg.sweep.lr_horizon.predict)
    return out


def _runs_at(g: pd.DataFrame, lr: float) -> pd.DataFrame:
    """The runs at ``lr`` in ``g`` that are in the results folder, one per seed."""
    return g[np.isclose(g["optim.lr"].astype(float), lr) & (g["status"] != "missing")].drop_duplicates("seed")


def _seed_losses(runs: pd.DataFrame) -> dict[int, dict]:
    """Seed -> {"val_loss"} of ``runs`` (inf unless ok)."""
    return {int(r["seed"]): {"val_loss": float(r["val_loss"]) if r["status"] == "ok" else math.inf}
            for _, r in runs.iterrows()}


def rule_from_shorter(budgets: dict[int, dict]) -> dict:
    """The fit over every budget but the longest (:func:`model_fit`) and the LR its power rule carries eta* of the
    shortest budget to at the longest: "lr_rule" from the grid optima's beta, "lr_rule_seeds" from the seed optima's."""
    long = max(budgets)
    fit = model_fit({t: b for t, b in budgets.items() if t < long})
    out = {"fit": fit, "steps": long}
    if fit.get("beta") is not None:
        t0 = min(t for t, b in budgets.items() if t < long and b.get("x_opt") is not None)
        out.update(T0=t0, lr_tuned=budgets[t0]["x_opt"],
                   lr_rule=horizon.scale_lr(budgets[t0]["x_opt"], t0, long, fit["beta"]))
        if fit.get("beta_seeds") is not None:
            out["lr_rule_seeds"] = horizon.scale_lr(budgets[t0]["x_opt"], t0, long, fit["beta_seeds"])
    return out


def prediction(g: pd.DataFrame, budgets: dict[int, dict], predict: list[float]) -> dict:
    """PT's runs ``g`` at the longest budget: each predicted LR's seed-mean loss and its regret against the grid's
    eta* there, paired by seed (``paired_gap.paired``: mean, SE, 95 % t half-width, seeds), beside
    :func:`rule_from_shorter`."""
    out = {**rule_from_shorter(budgets), "eta_opt": budgets[max(budgets)].get("x_opt"), "points": []}
    best = budgets[max(budgets)].get("seed_loss", {})  # each seed's loss at the grid's eta* (none without one)
    for lr in predict:
        runs = _runs_at(g, lr)
        seeds = _seed_losses(runs)
        loss = [r["val_loss"] for r in seeds.values()]
        gain, gain_se = metric_keys.seed_mean(runs["context_gain"], runs["context_gain_se"])
        diff, se, half, n = paired(seeds, best, "val_loss") if best and seeds else (math.nan, math.nan, math.nan, 0)
        shared = [best[s]["val_loss"] for s in set(seeds) & set(best)]
        out["points"].append({"lr": float(lr), "seeds_in": len(seeds), "loss": float(np.mean(loss)) if loss else
                              math.nan, "context_gain": gain, "context_gain_se": gain_se, "regret": diff,
                              "regret_se": se, "regret_half": half, "n_paired": n,
                              "regret_rel": diff / float(np.mean(shared)) if shared else math.nan})
    return out


def horizon_doc(result: dict, cfg: RunConfig, study: str) -> dict:
    """horizon.json: per model its identity, budgets, optima, brackets, each seed's optimum per budget (None on a grid
    edge or against a collapse), each seed's loss at eta* per budget and fit (what ``sweep.horizon.results`` reads)."""
    fits = {}
    for model, r in result["models"].items():
        have = fitted_budgets(r["budgets"])
        fits[model] = {"model": r["model"], "steps": have, "eta_opt": [r["budgets"][t]["x_opt"] for t in have],
                       "brackets": [r["budgets"][t]["bracket"] for t in have],
                       "seed_optima": [r["budgets"][t]["seed_opt"] for t in have],
                       "seed_loss_at_opt": [{str(s): v["val_loss"] for s, v in r["budgets"][t]["seed_loss"].items()}
                                            for t in have],
                       **{k: r["fit"].get(k) for k in ("beta", "eta0", "T0", "rms_log", "beta_range", "beta_seeds",
                                                       "beta_ci", "df", "n_seed_optima", "n_seed_bounded",
                                                       "note")}}
    return {"sweep": "lr-horizon", "study": study, "data": cfg.data.label, "batch_size": cfg.train.batch_size,
            "seq_len": cfg.data.seq_len, "steps": sorted(cfg.sweep.lr_horizon.steps), "fits": fits}


def anchored(md: dict) -> str:
    """' anchored at N' when the model's base width is not its width (muP beyond its anchor), else ''."""
    a = md.get("anchor")
    return f" anchored at {a}" if a is not None and a != md["width"] else ""


def with_variants(md: dict) -> str:
    """' with attn_row_rms + z_loss coef=0.0001 ...' for a model with variants (each setting named), else ''."""
    words = [" ".join([v["name"], *(f"{k}={x}" for k, x in v.items() if k != "name")]) for v in md.get("variants", [])]
    return f" with {' + '.join(words)}" if words else ""


def _g(x) -> str:
    """A bracket's or range's end: 'open' where there is none (None or not finite)."""
    return "open" if x is None or not math.isfinite(x) else f"{x:.3g}"


def _num(x: float, fmt: str) -> str:
    return format(x, fmt) if math.isfinite(x) else "-"


def _seeds(point: dict) -> str:
    """'2', or '1 of 2' while seeds are missing from the results folder."""
    n, of = point["seeds_in"], point["seeds"]
    return f"{of}" if n == of else f"{n} of {of}"


def _pct(x: float) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:+.1f} %"


def _fit_line(model: str, f: dict) -> str:
    if f.get("beta") is None:
        return f"- {model}: no fit ({f.get('note')})"
    rng = f.get("beta_range")
    span = "empty" if rng is None else f"[{_g(rng[0])}, {_g(rng[1])}]"
    return (f"- {model}: eta*(T) = eta0 (T / T0)^-beta with beta {f['beta']:+.3g}, eta0 {f['eta0']:.3g}, T0 "
            f"{f['T0']:,.0f} steps (least squares on the grid optima, RMS {f['rms_log']:.2f} in ln eta); beta through "
            f"every bracket {span}; {_seed_text(f)}" + (f"; {f['note']}" if f.get("note") else ""))


def _seed_text(f: dict) -> str:
    """The fit over the seeds' interpolated optima in words."""
    out = [f"{f[k]} {why}" for k, why in (("n_seed_edges", "on a grid edge"),
                                          ("n_seed_bounded", "against a collapse above them")) if f.get(k)]
    edges = f" ({', '.join(out)} left out)" if out else ""
    if f.get("beta_ci") is None:
        return f"{f.get('n_seed_optima', 0)} seed optima between grid points{edges}: too few for an interval"
    lo, hi = f["beta_ci"]
    local = "; ".join(f"{a:,.0f}-{b:,.0f} steps {beta:+.3g} [{b_lo:+.3g}, {b_hi:+.3g}]"
                      for a, b, beta, b_lo, b_hi in f.get("beta_local", []))
    return (f"over the {f['n_seed_optima']} seed optima between grid points{edges} (parabola in ln eta) beta "
            f"{f['beta_seeds']:+.3g}, 95 % interval [{lo:+.3g}, {hi:+.3g}] (t, {f['df']} df)"
            + (f"; between adjacent budgets: {local}" if local else ""))


def _regret(p: dict, eta_opt: float | None) -> str:
    """A predicted LR's regret in words: 'mean ± SE [95 % t] (n seeds), x % of eta*'s loss', or why there is none."""
    if p["seeds_in"] == 0:
        return "missing"
    if not math.isfinite(p["loss"]):
        return "diverged"
    if eta_opt is None:
        return "no eta* at this budget yet"
    if p["n_paired"] < 2:
        return f"{p['regret']:+.4f} ({p['n_paired']} seed)"
    seeds = f"{p['n_paired']} seeds"
    return f"{interval_text(p['regret'], p['regret_se'], p['regret_half'], seeds)}, {_pct(p['regret_rel'])}"


def prediction_lines(pr: dict) -> list[str]:
    """The report's section on the predicted LRs at the longest budget (:func:`prediction`)."""
    lines = ["", f"## The horizon rule's prediction at {pr['steps']:,} steps (pt)", ""]
    f = pr["fit"]
    if pr.get("lr_rule") is None:
        lines.append(f"The budgets below {pr['steps']:,} steps give no rule yet ({f.get('note')}).")
    else:
        seeds = (f"; over the seed optima beta {f['beta_seeds']:+.3g} gives {pr['lr_rule_seeds']:.3g}"
                 if pr.get("lr_rule_seeds") is not None else "")
        lines.append(f"Fitted on the budgets below {pr['steps']:,} steps, the power rule carries eta* "
                     f"{pr['lr_tuned']:.3g} of {pr['T0']:,} steps there with beta {f['beta']:+.3g} (grid optima) to "
                     f"{pr['lr_rule']:.3g}{seeds}. The grid's eta* there: "
                     + (f"{pr['eta_opt']:.3g}." if pr["eta_opt"] else "none until every run of its grid is in."))
    lines += ["", "| predicted LR | seeds | loss | context gain | regret against eta* (paired by seed) |",
              "|---|---|---|---|---|"]
    lines += [f"| {p['lr']:.3g} | {p['seeds_in']} | {_num(p['loss'], '.4f')} | {_num(p['context_gain'], '+.3f')} | "
              f"{_regret(p, pr['eta_opt'])} |" for p in pr["points"]]
    return lines


def markdown(summary: dict) -> str:
    """report.md (also printed): per model the optimum per budget, every point, and the fit."""
    lines = [f"# lr-horizon: {summary['study']}", "",
             f"Unigram loss {summary.get('unigram_loss', math.nan):.4f}, no-context loss "
             f"{summary.get('no_context_loss', math.nan):.4f}; width {summary['settings']['width']}, "
             f"{summary['settings']['seeds']} seed(s), data {summary['settings']['data']}.", "", "## Fits", ""]
    lines += [_fit_line(m, r["fit"]) for m, r in summary["models"].items()]
    for model, r in summary["models"].items():
        md = r["model"]
        lines += ["", f"## {model} ({md['parametrization']}{anchored(md)}, width {md['width']}{with_variants(md)})", "",
                  "| steps | eta* | bracket | plausible | loss | context gain | eta*/2 | 2 eta* |",
                  "|---|---|---|---|---|---|---|---|"]
        for t, b in r["budgets"].items():
            if b.get("x_opt") is None:
                why = f"incomplete: {b['runs_in']} of {b['runs']} runs in the results folder" if "runs" in b \
                    else "none finished"
                lines.append(f"| {t:,} | {why} | | | | | | |")
                continue
            lines.append(f"| {t:,} | {b['x_opt']:.3g} | [{_g(b['bracket'][0])}, {_g(b['bracket'][1])}] | "
                         f"[{b['plausible'][0]:.3g}, {b['plausible'][-1]:.3g}] | {b['loss']:.4f} | "
                         f"{b['context_gain']:+.3f} ± {b['context_gain_se']:.3f}"
                         f"{'' if b['learned'] else ' (no context)'} | {_pct(b['rise_half'])} | "
                         f"{_pct(b['rise_double'])} |")
        lines += ["", "| steps | LR | seeds | loss | context gain | vs eta* | mark |", "|---|---|---|---|---|---|---|"]
        for t, b in r["budgets"].items():
            for p in b["points"]:
                rel = p["loss"] / b["loss"] - 1 if b.get("x_opt") and math.isfinite(p["loss"]) else math.nan
                lines.append(f"| {t:,} | {p['lr']:.3g} | {_seeds(p)} | {_num(p['loss'], '.4f')} | "
                             f"{_num(p['context_gain'], '+.3f')} | {_pct(rel)} | {p['mark'] or '-'} |")
    if summary.get("prediction"):
        lines += prediction_lines(summary["prediction"])
    return "\n".join(lines) + "\n"
