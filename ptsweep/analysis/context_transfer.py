"""Context-transfer checks on an lr-transfer study: does muP PT learn context, as well as SP, at every width,
with an optimum that does not drift and a loss that does not rise with width?

Input: the study's trials table (``optim.lr``, ``model.width``, ``model.parametrization``, ``seed``, ``val_loss``,
``context_gain``, ``context_gain_se``) and its ``transfer_drift.drift``; only ``transfer_drift.optimum``'s
candidates count (values run at every seed). Checks (each with ``passed``):

- ``context_vs_sp``: at the tuning width (the smallest both parametrizations ran), muP's best seed-mean context gain
  minus SP's, d_s per seed both ran; passed when mean(d) >= -``K_SE`` SE(d), SE(d) = sd(d) / sqrt(n).
- ``context_floor``: muP's best seed-mean context gain at every width >= ``MIN_CONTEXT_GAIN`` (nats).
- ``drift``: |log2(eta*(widest) / eta*(narrowest))| <= ``MAX_DRIFT`` (factors of 2), eta* the grid optimum; not
  passed when either end optimum is on a grid edge.
- ``loss_vs_width``: at each width's eta*, for every pair of widths w < w': mean_s(L(w', s) - L(w, s)) <= ``K_SE``
  paired SE: a wider model is not worse.

"Paired SE" is the seed-to-seed SE on the fixed validation targets (each run's token-level SE: ``context_gain_se``).
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pandas as pd

from ptsweep.analysis.transfer_drift import as_floats
from ptsweep.analysis.verification import paired_contrasts
from ptsweep.config.model import PARAMETRIZATIONS
from ptsweep.metric_keys import seed_mean

K_SE = 2.0
MIN_CONTEXT_GAIN = 0.25
MAX_DRIFT = 1.0


def best_context(g: pd.DataFrame, candidates: list[float], x_col: str = "optim.lr") -> dict:
    """The candidate with the largest seed-mean context gain of one (parametrization, width) group: {"x", "n_seeds",
    "context_gain", "context_gain_se" (``metric_keys.seed_mean``), "per_seed" {seed: cg}}; empty when no candidate
    has a finite context gain at every seed."""
    best: dict = {}
    if "context_gain" not in g:
        return best
    for x in candidates:
        gx = g[np.isclose(g[x_col].astype(float), x)]
        cg = as_floats(gx["context_gain"])
        if not len(cg) or not np.isfinite(cg).all():
            continue
        ses = as_floats(gx["context_gain_se"]) if "context_gain_se" in gx else np.full(len(cg), math.nan)
        mean, se = seed_mean(cg, ses)
        if not best or mean > best["context_gain"]:
            best = {"x": float(x), "n_seeds": int(len(cg)), "context_gain": mean, "context_gain_se": se,
                    "per_seed": {int(s): float(v) for s, v in zip(gx["seed"], cg)}}
    return best


def paired_difference(a: dict[int, float], b: dict[int, float]) -> dict:
    """{"n", "diff", "se"}: a - b over the seeds both have (``verification.paired_contrasts``: the mean of the
    per-seed differences and sd / sqrt(n); se NaN with one seed)."""
    seeds = sorted(set(a) & set(b))
    if not seeds or not all(math.isfinite(a[s]) and math.isfinite(b[s]) for s in seeds):
        return {"n": len(seeds), "diff": math.nan, "se": math.nan}
    con = paired_contrasts([b[s] for s in seeds], [np.array([a[s] for s in seeds])], seeds, [np.array(seeds)])
    se = float(con["se"][0])
    return {"n": len(seeds), "diff": float(con["delta"][0]), "se": se if math.isfinite(se) else math.nan}


def criteria(df: pd.DataFrame, drift_result: dict, x_col: str = "optim.lr") -> dict:
    """The four checks of the module docstring, plus ``best`` {par: {width: best_context(...)}}; a check whose data
    are missing (e.g. no SP runs) is reported with ``passed`` None and a ``note``. The muP side is the first muP
    variant of ``drift_result`` in :data:`~ptsweep.config.model.PARAMETRIZATIONS` order ('mup', 'mup_sp', ...)."""
    variant = next((p for p in PARAMETRIZATIONS if p != "sp" and p in drift_result), "mup")
    best: dict[str, dict[int, dict]] = {}
    for par, r in drift_result.items():
        for w, o in r["per_width"].items():
            if o.get("x_opt") is None:
                continue
            g = df[(df["model.parametrization"] == par) & (df["model.width"] == w)]
            b = best_context(g, o["candidates"], x_col)
            if b:
                best.setdefault(str(par), {})[int(w)] = b
    out: dict = {"best": best}

    mup, sp = best.get(variant, {}), best.get("sp", {})
    common = sorted(set(mup) & set(sp))
    if common:
        w0 = common[0]
        p = paired_difference(mup[w0]["per_seed"], sp[w0]["per_seed"])
        ok = bool(p["diff"] >= -K_SE * p["se"]) if math.isfinite(p["se"]) else None
        out["context_vs_sp"] = {"width": w0, "mup": mup[w0]["context_gain"], "sp": sp[w0]["context_gain"],
                                "mup_x": mup[w0]["x"], "sp_x": sp[w0]["x"], **p, "passed": ok,
                                "note": "" if ok is not None else f"{p['n']} paired seed(s): no paired SE"}
    else:
        out["context_vs_sp"] = {"passed": None, "note": "no width with both muP and SP context gains"}

    if mup:
        low = {w: b["context_gain"] for w, b in mup.items() if b["context_gain"] < MIN_CONTEXT_GAIN}
        per_width = {w: b["context_gain"] for w, b in mup.items()}
        out["context_floor"] = {"threshold": MIN_CONTEXT_GAIN, "per_width": per_width, "below": low, "passed": not low}
    else:
        out["context_floor"] = {"passed": None, "note": "no muP run with a context gain at every seed"}

    r = drift_result.get(variant)
    if r is not None and "drift_log2" in r:
        out["drift"] = {"drift_log2": r["drift_log2"], "max": MAX_DRIFT, "is_bound": r["drift_is_bound"],
                        "widths": [r["smallest_width"], r["largest_width"]],
                        "passed": bool(abs(r["drift_log2"]) <= MAX_DRIFT and not r["drift_is_bound"])}
        out["loss_vs_width"] = _loss_vs_width(df[df["model.parametrization"] == variant], r, x_col)
    else:
        out["drift"] = {"passed": None, "note": "no muP optimum"}
        out["loss_vs_width"] = {"passed": None, "note": "no muP optimum"}
    checks = [out[k]["passed"] for k in ("context_vs_sp", "context_floor", "drift", "loss_vs_width")]
    out["passed"] = None if any(c is None for c in checks) else all(checks)
    return out


def _loss_vs_width(g: pd.DataFrame, r: dict, x_col: str) -> dict:
    """Every pair of widths w < w' at their own optima: L(w') - L(w), seed-paired (module docstring)."""
    per_seed: dict[int, dict[int, float]] = {}
    for w, o in r["per_width"].items():
        if o.get("x_opt") is None:
            continue
        gw = g[(g["model.width"] == w) & np.isclose(g[x_col].astype(float), o["x_opt"])]
        per_seed[int(w)] = {int(s): float(v) for s, v in zip(gw["seed"], as_floats(gw["val_loss"]))}
    pairs = []
    for w1, w2 in combinations(sorted(per_seed), 2):
        p = paired_difference(per_seed[w2], per_seed[w1])
        pairs.append({"narrow": w1, "wide": w2, **p,
                      "passed": bool(p["diff"] <= K_SE * p["se"]) if math.isfinite(p["se"]) else None})
    if not pairs or any(p["passed"] is None for p in pairs):
        return {"pairs": pairs, "passed": None, "note": "fewer than 2 widths, or a pair with < 2 paired seeds"}
    return {"pairs": pairs, "passed": all(p["passed"] for p in pairs)}


def _mark(passed: bool | None) -> str:
    return "n/a" if passed is None else ("PASS" if passed else "FAIL")


def _vs_sp(v: dict) -> str:
    return (f"context gain at the tuning width {v['width']}: muP {v['mup']:+.3f} (eta {v['mup_x']:.3g}) vs SP "
            f"{v['sp']:+.3f} (eta {v['sp_x']:.3g}); muP - SP {v['diff']:+.3f} ± {v['se']:.3f} (n = {v['n']} seeds), "
            f"needs >= -{K_SE:g} SE")


def _floor(f: dict) -> str:
    per = ", ".join(f"{w}: {g:+.3f}" for w, g in sorted(f["per_width"].items()))
    return f"muP best context gain per width ({per}) >= {f['threshold']:g}"


def _drift(d: dict) -> str:
    edge = ", an optimum on a grid edge" if d["is_bound"] else ""
    return (f"muP eta* drift {d['widths'][0]} -> {d['widths'][1]}: {d['drift_log2']:+.2f} factors of 2 "
            f"(|drift| <= {d['max']:g}{edge})")


def _widths(lv: dict) -> str:
    per = "; ".join(f"{p['wide']} - {p['narrow']}: {p['diff']:+.3f} ± {p['se']:.3f}" for p in lv["pairs"])
    return f"muP loss at eta* does not rise with width (wider - narrower <= {K_SE:g} SE; {per})"


_LINES = (("context_vs_sp", "context gain muP vs SP", _vs_sp), ("context_floor", "muP context gain floor", _floor),
          ("drift", "muP eta* drift", _drift), ("loss_vs_width", "muP loss vs width", _widths))


def markdown(c: dict) -> str:
    """The checks as markdown lines (the lr-transfer report and README)."""
    lines = [f"Context-transfer checks (seed-paired SEs; values with every seed only): overall "
             f"{_mark(c.get('passed'))}"]
    for key, label, text in _LINES:
        check = c[key]
        lines.append(f"* {label}: n/a ({check['note']})" if check["passed"] is None
                     else f"* {text(check)}: {_mark(check['passed'])}")
    return "\n".join(lines)
