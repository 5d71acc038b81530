"""Tables and figure of the lr-transfer study (``sweeps.lr_transfer``), pure functions of its analysis ``result``: the
optima table, its markdown and loss vs hyperparameter per width.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ptsweep.analysis import context_transfer
from ptsweep.config import RunConfig

STUDIES = ("lr", "weight", "control")
"""The groups of the study, in report order."""

STUDY_TITLES = {"lr": "LR", "weight": "", "control": "control LR"}


def _fmt(g: dict, key: str, sign: str = "") -> str:
    """'+0.123 ± 0.012' of ``g[key]`` and ``g[key_se]``."""
    return f"{g.get(key, math.nan):{sign}.3f} ± {g.get(key + '_se', math.nan):.3f}"


GAIN_COLUMNS = {"loss": "val_loss", "loss_se": "val_loss_se", "unigram": "unigram_loss", "gain": "gain_over_unigram",
                "gain_se": "gain_over_unigram_se", "no_context": "no_context_loss", "context_gain": "context_gain",
                "context_gain_se": "context_gain_se"}
"""Column of the optima table -> the gain at the optimum (``transfer_drift.gains``) it shows."""


def _optima(result: dict):
    """(study, parametrization, width, per-width result) of every group with an optimum, in report order."""
    for study in STUDIES:
        for par, r in result.get(study, {}).get("by_parametrization", {}).items():
            for w, o in r["per_width"].items():
                if o.get("x_opt") is not None:
                    yield study, par, w, o


def optima_table(result: dict):
    """One row per (study, parametrization, width): optimum, its uncertainty and the gain over unigram."""
    rows = []
    for study, par, w, o in _optima(result):
        q = np.quantile(o["boot_log2"], [0.05, 0.95])
        g = o.get("gains", {})
        rows.append({"study": study, "x": result[study]["x_col"], "parametrization": par, "width": w,
                     "x_opt": o["x_opt"], "vertex": 2 ** o["vertex_log2"] if o["vertex_log2"] is not None
                     else math.nan, "n_seeds": o["n_seeds"], "at_edge": o["at_edge"],
                     "plausible_lo": o["plausible"][0], "plausible_hi": o["plausible"][-1],
                     "boot_q05": 2 ** q[0], "boot_q95": 2 ** q[1],
                     **{col: g.get(key, math.nan) for col, key in GAIN_COLUMNS.items()}})
    return pd.DataFrame(rows)


def plot(df, result: dict, cfg: RunConfig, path: Path) -> Path | None:
    """Loss vs value (log2 x), seed-mean with seed-SE bars, one curve per width, optimum starred, unigram baseline as
    a dashed horizontal line; one panel per (study, parametrization)."""
    from matplotlib import colormaps

    from ptsweep.analysis.plots import new_figure, save_figure

    panels = [(s, p) for s in STUDIES if s in result for p in result[s]["by_parametrization"]]
    if not panels:
        return None
    fig, axes = new_figure(1, len(panels), size=(5.2 * len(panels), 4.5))
    uni, nc = result.get("unigram_loss"), result.get("no_context_loss")
    widths = sorted(cfg.sweep.lr_transfer.widths)
    colors = dict(zip(widths, (colormaps["viridis"](v) for v in np.linspace(0.1, 0.9, len(widths)))))
    for j, (study, par) in enumerate(panels):
        ax = axes[0, j]
        r = result[study]["by_parametrization"][par]
        lo_y = math.inf
        for w, o in sorted(r["per_width"].items()):
            c = o["curve"]
            x, m, se = np.array(c["x"]), np.array(c["mean"]), np.array(c["se"], dtype=float)
            ok = np.isfinite(m)
            if not ok.any():
                continue
            ax.errorbar(x[ok], m[ok], yerr=np.nan_to_num(se[ok]), fmt="-o", ms=3, capsize=2,
                        color=colors.get(w, "k"), label=f"width {w}")
            lo_y = min(lo_y, float(m[ok].min()))
            if o.get("x_opt") is not None:
                ax.scatter([o["x_opt"]], [o["loss_opt"]], marker="*", s=160, color=colors.get(w, "k"),
                           edgecolor="k", zorder=5)
        if uni is not None and math.isfinite(uni):
            ax.axhline(uni, ls="--", color="crimson", lw=1.2, label=f"unigram {uni:.3f}")
            if math.isfinite(lo_y):
                ax.set_ylim(min(lo_y, nc if nc is not None and math.isfinite(nc) else lo_y) - 0.05,
                            max(uni + 0.35, lo_y + 0.4))
        if nc is not None and math.isfinite(nc):
            ax.axhline(nc, ls=":", color="darkorange", lw=1.2, label=f"no-context {nc:.3f}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("base learning rate" if study != "weight" else result[study]["x_col"])
        ax.set_ylabel("validation loss (seed mean ± seed SE)")
        ax.set_title(f"{'SP' if par == 'sp' else par}: {STUDY_TITLES[study] or result[study]['x_col']}"
                     f" (drift {r['drift_log2']:+.1f} x2)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, title="star = optimum (all seeds)", title_fontsize=7)
    fig.suptitle("PT: validation loss vs hyperparameter across widths (muP vs SP)")
    return save_figure(fig, path)


def _grid_value(x: float | None, edge: bool = False) -> str:
    return "-" if x is None else f"{x:.3g}{' (grid edge)' if edge else ''}"


def _rise(r: float | None) -> str:
    return "-" if r is None or math.isnan(r) else f"{r:+.1%}"


def basin_markdown(result: dict) -> list[str]:
    """Per (study, parametrization, width): the 2 % basin around the seed-mean optimum, the loss rise at eta*/2 and
    2 eta*, and the nearest values where the run ends worse than the unigram (``analysis.basin``)."""
    lines = ["| study | param. | width | optimum | within 2 % of best | basin (factors of 2) | rise at x*/2, 2x* "
             "| [x*/2, 2x*] within 2 % | breaks below, above (loss > unigram) | no context below, above (context gain "
             "<= 0) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for study, par, w, o in _optima(result):
        b, win, cl, ccl = o.get("basin"), o.get("window", {}), o.get("cliff", {}), o.get("context_cliff", {})
        if not b:
            continue
        verdict = {True: "yes", False: "no", None: "not run"}[win.get("passed")]
        lines.append(
            f"| {study} | {par} | {w} | {b['x_opt']:.3g} | {_grid_value(b['lo'], b['lo_is_edge'])} - "
            f"{_grid_value(b['hi'], b['hi_is_edge'])} | {b['width_log2']:.0f} | {_rise(win.get('rise_lo'))}, "
            f"{_rise(win.get('rise_hi'))} | {verdict} | {_grid_value(cl.get('below'))}, "
            f"{_grid_value(cl.get('above'))} | {_grid_value(ccl.get('below'))}, {_grid_value(ccl.get('above'))} |")
    return lines if len(lines) > 2 else []


def markdown(result: dict) -> str:
    """The optima table and the drift lines as markdown (README)."""
    lines = []
    if result.get("unigram_loss") is not None:
        lines.append(f"Unigram baseline (training-set frequencies on the same masked tokens): "
                     f"{result['unigram_loss']:.4f} ± {result['unigram_loss_se']:.4f}; no-context baseline (the "
                     f"visible-token predictor): {result.get('no_context_loss', math.nan):.4f}\n")
    lines.append("| study | param. | width | seeds | optimum | within 2 paired SE | bootstrap 90% | parabola vertex "
                 "| loss at optimum ± SE | gain over unigram ± SE | context gain ± SE "
                 "| best run: loss, context gain ± SE |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for study, par, w, o in _optima(result):
        xc = result[study]["x_col"]
        q = np.quantile(o["boot_log2"], [0.05, 0.95])
        g, b = o.get("gains", {}), o.get("best_run", {})
        vx = f"{2 ** o['vertex_log2']:.3g}" if o["vertex_log2"] is not None else "-"
        name = f"{xc} (control)" if study == "control" else xc
        lines.append(
            f"| {name} | {par} | {w} | {o['n_seeds']} | {o['x_opt']:.3g}{' (edge)' if o['at_edge'] else ''} "
            f"| {o['plausible'][0]:.3g} - {o['plausible'][-1]:.3g} | {2 ** q[0]:.3g} - {2 ** q[1]:.3g} | {vx} "
            f"| {_fmt(g, 'val_loss')} | {_fmt(g, 'gain_over_unigram', '+')} | {_fmt(g, 'context_gain', '+')} "
            f"| {b.get('val_loss', math.nan):.3f}, {_fmt(b, 'context_gain', '+')} |")
    lines += ["", *basin_markdown(result), ""]
    for study in STUDIES:
        for par, r in result.get(study, {}).get("by_parametrization", {}).items():
            q, pr = r["drift_boot_q"], r["drift_plausible_range"]
            what = result[study]["x_col"] + (" (control)" if study == "control" else "")
            lines.append(f"* drift of {what} ({par}), width {r['smallest_width']} -> "
                         f"{r['largest_width']}: {r['drift_log2']:+.2f} factors of 2 (bootstrap 90% [{q[0]:+.1f}, "
                         f"{q[2]:+.1f}]; plausible-set range [{pr[0]:+.1f}, {pr[1]:+.1f}])"
                         + (" - an optimum on a grid edge: a bound" if r["drift_is_bound"] else ""))
    if result.get("criteria"):
        lines += ["", context_transfer.markdown(result["criteria"])]
    return "\n".join(lines)
