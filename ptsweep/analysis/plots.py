"""Figures of [S] (Figure 1: random-search verification; Figure 2: scaling vs BERT / UT) and the muP diagnostics.

Every function takes data plus an output path, writes one PNG and returns the path. Figures are built on
``matplotlib.figure.Figure`` with the Agg canvas directly: no pyplot, no global backend switch, no import-time side
effects. Inputs are the tables made by :mod:`ptsweep.analysis.verification` / results tables of the sweeps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from .fits import coord_slopes, fit_power_law, predict

COLORS = {"pt": "tab:red", "bert": "tab:blue", "ut": "tab:green", "modernbert": "tab:purple"}
MODEL_LABELS = {"pt": "PT (muP, zero-shot transfer)", "bert": "BERT (tuned per scale)", "ut": "Universal Transformer",
                "modernbert": "ModernBERT-style (tuned per scale)"}


def new_figure(nrows: int = 1, ncols: int = 1, size: tuple[float, float] | None = None,
               layout: str | None = "constrained"):
    """An Agg figure with a grid of axes. ``layout=None`` for large grids of equal panels (the caller sets fixed
    margins): constrained layout measures every tick label of every panel, which is slow on large grids."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size or (6.0 * ncols, 4.5 * nrows), layout=layout)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, squeeze=False)


def save_figure(fig, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, format="png")
    return path


def _log_ticks(ax, x: str = "eng", y: bool = True) -> None:
    """Readable log-axis ticks (default minor labels overlap): x at 1-2-5 (``eng``: 20M, 50M) or powers of 2
    (``pow2``: 64, 128, ...); y minor labels hidden when ``y``."""
    from matplotlib.ticker import EngFormatter, LogLocator, NullFormatter, ScalarFormatter

    if x == "eng":
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    else:
        ax.xaxis.set_major_locator(LogLocator(base=2))
        ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    if y:
        ax.yaxis.set_minor_formatter(NullFormatter())


def _base_mean(table: pd.DataFrame) -> float:
    """The base point's mean loss (``table.attrs`` of :func:`~ptsweep.analysis.verification.rank_table`)."""
    return float(table.attrs.get("base_mean", table.loc[table["is_base"], "loss"].iloc[0]))


def _draw_noise_band(ax, table: pd.DataFrame) -> None:
    """The zero line and, when there is one, the noise band of ``table.attrs`` in % of the base's loss."""
    band = table.attrs.get("noise_band", 0.0)
    if band:
        pct = 100.0 * float(band) / _base_mean(table)
        ax.axhspan(-pct, pct, color="0.85", zorder=0, label=f"noise band, Student t (±{pct:.2f} %)")
    ax.axhline(0.0, color="0.4", lw=0.8, ls="--")


def plot_distance_vs_increase(table: pd.DataFrame, path, title: str | None = None):
    """[S] Figure 1(a) from :func:`~ptsweep.analysis.verification.rank_table`'s table: D(S', S) vs relative
    eval-loss increase in %; base marked, noise band shaded, failed points counted in the legend."""
    fig, [[ax]] = new_figure()
    pts = table[~table["is_base"] & ~table["failed"]]
    n_failed = int((~table["is_base"] & table["failed"]).sum())
    _draw_noise_band(ax, table)
    label = f"perturbed points (n={len(pts)}" + (f", {n_failed} failed not shown)" if n_failed else ")")
    if "se" in pts.columns and np.isfinite(pts["se"].astype(float)).any():
        ax.errorbar(pts["distance"], 100 * pts["rel_increase"], yerr=100 * pts["se"].astype(float) / _base_mean(table),
                    fmt="o", ms=4, color="tab:blue", ecolor="tab:blue", elinewidth=0.8, capsize=2,
                    label=label + ", ±1 se of the paired contrast")
    else:
        ax.scatter(pts["distance"], 100 * pts["rel_increase"], s=18, color="tab:blue", label=label)
    ax.scatter([0.0], [0.0], marker="*", s=220, color="red", zorder=5, label="base S (mean of seeds)")
    ax.set(xlabel=r"distance $D(S', S)$ (relative, Euclidean)", ylabel="eval-loss increase vs base (%)",
           title=title or "Distance vs evaluation-loss increase")
    ax.legend(loc="best", fontsize=8)
    return save_figure(fig, path)


def plot_rank_curve(table: pd.DataFrame, path, title: str | None = None):
    """[S] Figure 1(b): losses sorted ascending, relative increase (%) vs rank (1 = best); base as a red star."""
    fig, [[ax]] = new_figure()
    ok = table[~table["failed"]]
    base = table[table["is_base"]]
    _draw_noise_band(ax, table)
    ax.plot(ok["rank"], 100 * ok["rel_increase"], "-o", ms=3, color="tab:blue", label="all points, sorted")
    ax.scatter(base["rank"], 100 * base["rel_increase"], marker="*", s=260, color="red", zorder=5,
               label=f"base S (rank {int(base['rank'].iloc[0])} of {len(table)})")
    n_failed = int(table["failed"].sum())
    if n_failed:
        ax.text(0.98, 0.02, f"{n_failed} failed run(s) ranked last, not drawn", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=8)
    ax.set(xlabel="rank (1 = lowest eval loss)", ylabel="eval-loss increase vs base (%)",
           title=title or "Rank vs evaluation-loss increase")
    ax.legend(loc="upper left", fontsize=8)
    return save_figure(fig, path)


def plot_regret_axes(res: Mapping, path, title: str | None = None):
    """Figure 1(c): the fitted response surface along each hyperparameter's axis (others at S), relative change in
    % with its pointwise t band, and every point's partial residual on that axis (``res`` =
    :func:`ptsweep.analysis.regret.regret_analysis`'s result: ``axis_curves``, ``axis_points``, ``axes``)."""
    keys = list(res["axis_curves"])
    ncols = 4
    nrows = -(-len(keys) // ncols)
    fig, axes = new_figure(nrows, ncols, size=(3.4 * ncols, 2.9 * nrows))
    for ax, k in zip(axes.ravel(), keys):
        c, p, a = res["axis_curves"][k], res["axis_points"][k], res["axes"][k]
        ax.fill_between(c["factor"], 100 * np.asarray(c["lo"]), 100 * np.asarray(c["hi"]), color="0.85", lw=0)
        ax.plot(c["factor"], 100 * np.asarray(c["rel_change"]), color="tab:red", lw=1.5)
        ax.scatter(p["factor"], 100 * np.asarray(p["rel_change"]), s=8, color="tab:blue", alpha=0.7)
        ax.axhline(0.0, color="0.4", lw=0.8, ls="--")
        ax.axvline(a["min_factor"], color="tab:green", lw=0.8, ls=":")
        ax.set_title(f"{k}: +{100 * (c['factor'][-1] - 1):.0f} % -> {100 * a['up']['rel_change']:+.2f} "
                     f"± {50 * (a['up']['ci'][1] - a['up']['ci'][0]):.2f} %", fontsize=8)
        ax.set_xlabel("factor S'/S on this axis", fontsize=8)
    for ax in axes.ravel()[len(keys):]:
        ax.set_axis_off()
    axes[0, 0].set_ylabel("loss change vs S (%)", fontsize=8)
    lo, hi = res["regret_rel_ci"]
    fig.suptitle(title or f"Fitted {res['model']} surface along each axis (points: partial residuals; dotted: box "
                          f"minimum); regret {100 * res['regret_rel']:.2f} % [{100 * lo:.2f}, {100 * hi:.2f}]",
                 fontsize=9)
    return save_figure(fig, path)


def _finite(df: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
    v = df[list(cols)].astype(float).to_numpy()
    return df[(np.isfinite(v) & (v > 0)).all(axis=1)]


def _generic_legend(ax, shown: dict[str, str]) -> None:
    """One grey legend entry per kind of mark drawn for every model (``shown``: label -> "bar" or "band")."""
    for label, kind in shown.items():
        if kind == "bar":
            ax.errorbar([], [], yerr=[], fmt="o", ms=5, color="0.4", capsize=3, label=label)
        else:
            ax.fill_between([], [], [], color="0.4", alpha=0.15, lw=0, label=label)


def _loglog_by_model(ax, df, xcol, ycol, model_col, models, fits, xlabel, summary=None, ylabel=None):
    """Per model: every run (seed) as a small dot, the mean at each x with its interval (``summary`` rows with
    loss / loss_lo / loss_hi at ``xcol``; without one, +-1 sd over the seeds), the fitted law and its bootstrap band
    (``fit["band"]``, from :func:`~ptsweep.analysis.fits.fit_scaling_law`)."""
    if summary is not None:
        summary = summary.sort_values(xcol) if {model_col, xcol, "loss", "loss_lo", "loss_hi"} <= set(summary) else None
    shown: dict[str, str] = {}  # the legend names each kind of mark once, in grey, not once per model
    for i, m in enumerate(models):
        g = _finite(df[df[model_col] == m], [xcol, ycol]).sort_values(xcol)
        if g.empty:
            continue
        color = COLORS.get(str(m), f"C{i}")
        label = MODEL_LABELS.get(str(m), str(m))
        grouped = g.groupby(xcol)[ycol]
        n_seeds, fewest = int(grouped.size().max()), int(grouped.size().min())
        per_size = f"{n_seeds}" if fewest == n_seeds else f"{fewest}-{n_seeds}"
        ax.scatter(g[xcol], g[ycol], color=color, s=10, alpha=0.45, zorder=3,
                   label=f"{label}: runs ({per_size} seed(s) per size)" if n_seeds > 1 else label)
        srow = None if summary is None else _finite(summary[summary[model_col] == m], [xcol, "loss"])
        if srow is not None and len(srow) and np.isfinite(srow["loss_lo"].astype(float)).any():
            y, lo, hi = (srow[c].astype(float).to_numpy() for c in ("loss", "loss_lo", "loss_hi"))
            ax.errorbar(srow[xcol], y, yerr=np.nan_to_num(np.vstack([y - lo, hi - y])), fmt="o", ms=5, color=color,
                        capsize=3, zorder=4, label="_nolegend_")
            shown["mean, 95 % t interval (each cell's own seed sd)"] = "bar"
        elif n_seeds > 1:
            mean, sd = grouped.mean(), grouped.std(ddof=1)
            ax.errorbar(mean.index, mean.to_numpy(), yerr=np.nan_to_num(sd.to_numpy()), fmt="o", ms=5, color=color,
                        capsize=3, zorder=4, label="_nolegend_")
            shown["mean +- 1 sd over seeds"] = "bar"
        fit = (fits or {}).get(m)
        if fit is None and g[xcol].nunique() >= 2:
            fit = fit_power_law(g[xcol], g[ycol])
        if fit is not None:
            xs = np.geomspace(g[xcol].min(), g[xcol].max(), 100)
            const = f"{fit['c']:.3g} + " if fit.get("form") == "power_law_const" else ""
            lab = f"fit: {const}{fit['a']:.3g} x^-{fit['b']:.3f}"
            if fit.get("ci"):
                lab += f", b in [{fit['ci']['b'][0]:.3f}, {fit['ci']['b'][1]:.3f}]"
            # a law through two sizes' means has R2 = 1 by construction: say so instead
            quality = "through 2 sizes" if g[xcol].nunique() == 2 else f"R2={fit['r2']:.3f}"
            ax.plot(xs, predict(fit, xs), "--", color=color, lw=1.2, label=f"{lab} ({quality})")
            band = fit.get("band") or {}
            if band.get("lo") and band.get("hi"):
                ax.fill_between(band["x"], band["lo"], band["hi"], color=color, alpha=0.15, lw=0,
                                label="_nolegend_")
                shown[f"{int(100 * fit.get('level', 0.95))} % bootstrap band over seeds"] = "band"
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel or "evaluation loss (MLM)")
    _log_ticks(ax, "eng", y=False)
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))  # 6.6, not 6.6 x 10^0
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
    ax.grid(True, which="both", alpha=0.3)
    _generic_legend(ax, shown)
    ax.legend(fontsize=7)


def plot_scaling(df: pd.DataFrame, path, pair: Sequence[str] = ("pt", "bert"), x: str = "params",
                 fits: Mapping[str, Mapping] | None = None, loss_col: str = "loss", model_col: str = "model",
                 title: str | None = None, summary: pd.DataFrame | None = None, ylabel: str | None = None):
    """[S] Figure 2: log-log eval loss vs ``x`` (``"params"`` or ``"non_embedding_params"``) for the models in
    ``pair``, one row of ``df`` per run, with their ``fits`` (:func:`fit_scaling_law`: band drawn; a model without
    one gets a pure power law) and ``summary`` error bars (one row per (model, x): loss, loss_lo, loss_hi)."""
    fig, [[ax]] = new_figure(size=(7.0, 5.0))
    _loglog_by_model(ax, df, x, loss_col, model_col, list(pair), fits,
                     "non-embedding parameters" if x.startswith("non_emb") else "parameters", summary, ylabel)
    names = " vs ".join(MODEL_LABELS.get(m, m).split(" (")[0] for m in pair)
    ax.set_title(title or f"Scaling: {names}")
    return save_figure(fig, path)


def plot_loss_vs_compute(df: pd.DataFrame, path, models: Sequence[str] | None = None, loss_col: str = "loss",
                         model_col: str = "model", title: str | None = None,
                         fits: Mapping[str, Mapping] | None = None, ylabel: str | None = None):
    """Log-log eval loss vs training compute, FLOPs = flops_per_token * tokens: every run, means +- 1 sd over seeds,
    one fitted law (+ bootstrap band when ``fits`` come from :func:`fit_scaling_law`) per model."""
    d = df.copy()
    d["train_flops"] = d["flops_per_token"].astype(float) * d["tokens"].astype(float)
    models = list(models) if models is not None else sorted(d[model_col].dropna().unique().tolist())
    fig, [[ax]] = new_figure(size=(7.0, 5.0))
    _loglog_by_model(ax, d, "train_flops", loss_col, model_col, models, fits,
                     "training FLOPs (flops/token x tokens)", None, ylabel)
    ax.set_title(title or "Evaluation loss vs training compute")
    return save_figure(fig, path)


FRAMING_AXES = (("params", "total parameters", "total"),
                ("non_embedding_params", "non-embedding parameters", "non_embedding"),
                ("train_flops", "training FLOPs (flops/token x tokens)", "flops"))
VERDICT_WORDS = {True: "yes", False: "no", None: "undecided"}


def plot_framings(df: pd.DataFrame, path, fits: Mapping[str, Mapping[str, Mapping]],
                  framings: Mapping[str, Mapping] | None = None, model_col: str = "model", loss_col: str = "loss",
                  ylabel: str | None = None):
    """The three framings of the scaling comparison side by side (``analysis.framings``): loss vs total parameters,
    vs non-embedding parameters and vs training FLOPs, every family (runs, fitted law, bootstrap band) in each
    panel. ``fits[xcol][model]`` from :func:`~ptsweep.analysis.fits.fit_scaling_law`; each panel's title states
    "beats at every scale" of that framing (``framings[name][pair]["every_scale"]``)."""
    models = sorted(df[model_col].dropna().unique().tolist())
    fig, axes = new_figure(1, 3, size=(18.0, 5.5))
    for ax, (xcol, xlabel, name) in zip(axes[0], FRAMING_AXES):
        _loglog_by_model(ax, df, xcol, loss_col, model_col, models, fits.get(xcol, {}), xlabel, None, ylabel)
        verdicts = ((framings or {}).get(name) or {}).items()
        ax.set_title(f"{name}: PT beats at every scale? "
                     + ", ".join(f"{p}: {VERDICT_WORDS[r.get('every_scale')]}" for p, r in verdicts), fontsize=9)
    return save_figure(fig, path)


def plot_coord_check(df: pd.DataFrame, path, title: str | None = None):
    """Coordinate check: mean |coordinate| vs width (log-log), rows = quantity, cols = step, one line per
    parametrization labelled with its log-log slope (:func:`~ptsweep.analysis.fits.coord_slopes`; muP: flat)."""
    d = _finite(df, ["value"])
    quantities, steps, pars = (sorted(d[c].unique().tolist()) for c in ("quantity", "step", "parametrization"))
    slopes = coord_slopes(d).set_index(["parametrization", "quantity", "step"])["slope"]
    height = 2.8 * len(quantities) + 1.1
    fig, axes = new_figure(len(quantities), len(steps), size=(3.2 * len(steps), height), layout=None)
    fig.subplots_adjust(left=0.7 / (3.2 * len(steps)), right=1 - 0.15 / (3.2 * len(steps)), bottom=0.5 / height,
                        top=1 - 0.9 / height, wspace=0.45, hspace=0.55)  # fixed margins in inches: see new_figure
    for i, q in enumerate(quantities):
        for j, s in enumerate(steps):
            ax = axes[i, j]
            for k, par in enumerate(pars):
                sel = (d["quantity"] == q) & (d["step"] == s) & (d["parametrization"] == par)
                m = d[sel].groupby("width")["value"].mean()
                if m.empty:
                    continue
                slope = float(slopes.get((par, q, s), float("nan")))
                lab = f"{par} (slope {round(slope, 2) + 0.0:+.2f})"  # + 0.0: no "-0.00"
                ax.plot(m.index, m.to_numpy(), "-o", ms=3, color=f"C{k}", label=lab)
            ax.set(xscale="log", yscale="log")
            _log_ticks(ax, "pow2")
            ax.minorticks_off()  # hundreds of panels: minor tick marks were most of the drawing time
            ax.set_title(f"{q}, step {s}", fontsize=9)
            ax.set_xlabel("width", fontsize=8)
            ax.set_ylabel("mean |coordinate|", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.legend(fontsize=6)
    import textwrap

    text = textwrap.fill(title or "Coordinate check: mean |coordinate| vs width (flat = muP-correct)",
                         width=int(14 * 3.2 * len(steps)))  # ~14 characters per inch at 10 pt
    fig.suptitle(text, fontsize=10, y=1 - 0.1 / height, va="top")
    return save_figure(fig, path)


def plot_lr_transfer(df: pd.DataFrame, path, lr_col: str = "optim.lr", width_col: str = "model.width",
                     loss_col: str = "val_loss", param_col: str = "model.parametrization", title: str | None = None):
    """Validation loss vs LR (log x), seed means, one curve per width (its optimum marked, diverged points dropped),
    one panel per parametrization."""
    from matplotlib import colormaps

    d = df[np.isfinite(df[loss_col].astype(float))]
    pars = sorted(d[param_col].unique().tolist())
    fig, axes = new_figure(1, max(len(pars), 1), size=(5.5 * max(len(pars), 1), 4.5))
    for j, par in enumerate(pars):
        ax = axes[0, j]
        g = d[d[param_col] == par]
        widths = sorted(g[width_col].unique().tolist())
        for w, color in zip(widths, colormaps["viridis"](np.linspace(0.15, 0.9, max(len(widths), 1)))):
            m = g[g[width_col] == w].groupby(lr_col)[loss_col].mean().sort_index()
            ax.plot(m.index, m.to_numpy(), "-o", ms=3, color=color, label=f"width {w}")
            i = int(m.to_numpy().argmin())
            ax.scatter([m.index[i]], [m.iloc[i]], marker="*", s=150, color=color, edgecolor="k", zorder=5)
        ax.set_xscale("log", base=2)
        ax.set(xlabel="base learning rate (log2 scale)", ylabel="validation loss",
               title={"mup": "muP", "sp": "SP"}.get(str(par), str(par)))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, title="star = optimum", title_fontsize=8)
    fig.suptitle(title or "Learning-rate transfer across widths")
    return save_figure(fig, path)
