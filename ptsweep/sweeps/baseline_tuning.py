"""Per-scale tuning of the baselines for scaling-curves (docs/baselines.md, "Baseline tuning"): Optuna TPE +
tune-small's ASHA over optim.lr and optim.warmup_frac (:func:`tune`), or under sweep.baseline.grid one trial per LR
of a fixed grid without early stopping (:func:`grid_search`), each with its edge rule, at every scale; search trials
train at :func:`search_training_seed`, a seed no reported run uses. :func:`planned_search` and :func:`edge_runs` are
what the planner counts.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ptsweep.config import RunConfig
from ptsweep.trials.fields import TABLE_METRICS, finished
from ptsweep.trials.runner import run_trials
from ptsweep.trials.search import run_search
from ptsweep.trials.trial_plan import PlannedTrial

WARMUP_MAX = 0.5
"""Upper end of any widened optim.warmup_frac range."""


def search_space(cfg: RunConfig) -> dict[str, tuple[float, ...]]:
    """Dotted key -> (low, high) of the baseline search; under sweep.baseline.grid, optim.lr -> the grid's values."""
    sweep_cfg = cfg.sweep
    if sweep_cfg.baseline.grid:
        return {"optim.lr": tuple(sweep_cfg.baseline.grid)}
    return {"optim.lr": tuple(float(v) for v in sweep_cfg.baseline.lr_range),
            "optim.warmup_frac": tuple(float(v) for v in sweep_cfg.baseline.warmup_range)}


def search_tokens(cfg: RunConfig) -> float:
    """Token budget of each search trial: sweep.baseline.search_frac of train.tokens (at least 1)."""
    return max(1.0, cfg.sweep.baseline.search_frac * cfg.train.tokens)


def budget(cfg: RunConfig) -> int:
    """Trials per (baseline, scale) and search round: the grid's size, else sweep.baseline.samples (0 =
    sweep.num_samples, tune-small's)."""
    return len(cfg.sweep.baseline.grid) or int(cfg.sweep.baseline.samples or cfg.sweep.num_samples)


def edge_runs(cfg: RunConfig) -> int:
    """The most search trials the edge rule adds to one (baseline, scale): ``sweep.baseline.lr_widen`` rounds of the
    TPE budget, or of one LR under ``sweep.baseline.grid``."""
    return cfg.sweep.baseline.lr_widen * (1 if cfg.sweep.baseline.grid else budget(cfg))


def planned_search(cfg: RunConfig, sweep: str, kind: str, scale: int, model_cfg) -> list[PlannedTrial]:
    """The first search round of baseline ``kind`` at ``scale`` (its matched shape ``model_cfg``) as planned runs."""
    mode = "grid" if cfg.sweep.baseline.grid else "hp"
    return [PlannedTrial(sweep, "search", model_cfg, search_tokens(cfg), search_training_seed(cfg),
                         cfg.train.batch_size, int(scale), f"{mode}-{kind}-w{scale}-{i}") for i in range(budget(cfg))]


def method(cfg: RunConfig) -> str:
    """How each baseline is tuned, in words (the summary's and the report's)."""
    if cfg.sweep.baseline.grid:
        return (f"LR grid {', '.join(f'{v:g}' for v in cfg.sweep.baseline.grid)} at warm-up "
                f"{cfg.optim.warmup_frac:g}, every trial at {cfg.sweep.baseline.search_frac:.0%} of the budget, "
                f"no early stopping" + (f"; an optimum on the grid's edge gets one more LR a grid step past it, up "
                                        f"to {cfg.sweep.baseline.lr_widen} time(s)" if cfg.sweep.baseline.lr_widen
                                        else ""))
    return f"{', '.join(search_space(cfg))} (TPE + ASHA)"


def search_training_seed(cfg: RunConfig) -> int:
    """Training seed of the search trials: the first seed after the reported ones (cfg.seed + i, i < sweep.seeds)."""
    return int(cfg.seed) + int(cfg.sweep.seeds)


def edges(good: pd.DataFrame, keys) -> dict[str, str]:
    """Per key: 'low' / 'high' when the best finished trial has the smallest / largest value of the key, 'single'
    for one finished trial, '' when bracketed."""
    if len(good) < 2:
        return {k: "single" for k in keys}
    best = good.loc[good["val_loss"].idxmin()]
    out = {}
    for k in keys:
        v = good[k].astype(float)
        out[k] = "low" if float(best[k]) <= v.min() else ("high" if float(best[k]) >= v.max() else "")
    return out


def recentred(rng: tuple[float, float], best: float, key: str) -> tuple[float, float]:
    """A range of ``rng``'s log-width centred on ``best`` (warm-up ranges shifted down to end <= WARMUP_MAX)."""
    ratio = math.sqrt(rng[1] / rng[0])
    lo, hi = best / ratio, best * ratio
    if key == "optim.warmup_frac" and hi > WARMUP_MAX:
        lo, hi = WARMUP_MAX / ratio**2, WARMUP_MAX
    return lo, hi


def tune(cfg: RunConfig, kind: str, scale: int, model_over: dict, sdir: Path, group: str,
         tags: list[str]) -> tuple[pd.DataFrame, dict]:
    """The search of one (baseline, scale) with the edge rule (an unbracketed optimum is searched again on a recentred
    range, sweep.baseline.lr_widen times, then flagged): (every trial, :func:`_info`)."""
    sweep_cfg = cfg.sweep
    if sweep_cfg.baseline.grid:
        return grid_search(cfg, kind, scale, model_over, sdir, group, tags)
    space = search_space(cfg)
    rng, dfs, rounds, not_run = dict(space), [], 0, 0
    while True:
        suffix = f"-widen{rounds}" if rounds else ""
        df = run_search(cfg, rng, sdir, f"search-{kind}-w{scale}{suffix}", num_samples=budget(cfg),
                        seed=sweep_cfg.search_seed + rounds,
                        fixed={**model_over, "train.tokens": search_tokens(cfg), "seed": search_training_seed(cfg)},
                        label=f"hp-{kind}-w{scale}{suffix}",
                        asha={"grace_frac": sweep_cfg.asha_grace_frac, "reduction": sweep_cfg.asha_reduction},
                        tags=tags, group=group)
        dfs.append(df.assign(search_round=rounds, **{f"{k}_range": f"[{lo:.3g}, {hi:.3g}]" for k, (lo, hi)
                                                     in rng.items()}))
        not_run += int(df.attrs.get("search", {}).get("not_run", 0))  # never trained (run_search says so)
        allt = pd.concat(dfs, ignore_index=True)
        good = finished(allt)
        if good.empty:
            return allt, _info({}, {}, rounds, len(allt), not_run)
        edge = edges(good, space)
        best = good.loc[good["val_loss"].idxmin()]
        if not any(edge.values()) or rounds >= sweep_cfg.baseline.lr_widen:
            break
        rng = {k: (recentred(r, float(best[k]), k) if edge[k] else r) for k, r in rng.items()}
        rounds += 1
    return allt, _info({k: float(best[k]) for k in space}, edge, rounds, len(allt), not_run)


def _info(best: dict, edge: dict, rounds: int, n_trials: int, not_run: int, **extra) -> dict:
    """A search's result: best (key -> value), best_lr (NaN without one), edges, edge (the LR's), rounds, n_trials,
    not_run (trials of the budget Ray never trained: a re-run runs them)."""
    return {"best": best, "best_lr": best.get("optim.lr", math.nan), "edges": edge, "edge": edge.get("optim.lr", ""),
            "rounds": rounds, "n_trials": n_trials, "not_run": not_run, **extra}


def grid_label(kind: str, scale: int) -> str:
    """The label of one (baseline, scale)'s fixed-list search trials (also scaling-curves' combined first phase)."""
    return f"hp-{kind}-w{scale}"


def grid_trials(cfg: RunConfig, model_over: dict, lrs=None) -> list[dict]:
    """The overrides of one (baseline, scale)'s fixed-list trials: the shape, the search budget and seed, each LR of
    ``lrs`` (default: sweep.baseline.grid)."""
    fixed = {**model_over, "train.tokens": search_tokens(cfg), "seed": search_training_seed(cfg)}
    return [{**fixed, "optim.lr": float(lr)} for lr in (cfg.sweep.baseline.grid if lrs is None else lrs)]


def grid_search(cfg: RunConfig, kind: str, scale: int, model_over: dict, sdir: Path, group: str,
                tags: list[str], lrs=None) -> tuple[pd.DataFrame, dict]:
    """One trial per LR of ``lrs`` (default: sweep.baseline.grid; no early stopping) at the search seed and budget and
    optim.warmup_frac; the best by validation loss, its edge flagged (:func:`lr_edge`); while the best LR is on an
    edge, one more LR a grid step beyond it (:func:`step_beyond`), up to sweep.baseline.lr_widen times (search_round
    1, 2, ...)."""
    grid = list(cfg.sweep.baseline.grid if lrs is None else lrs)
    warmup = float(cfg.optim.warmup_frac)
    run, rounds = list(grid), 0  # run: the grid, then each added LR in the order it was added
    while True:  # every round re-reads the earlier trials from the ledger and trains only the new LR
        df = run_trials(cfg, grid_trials(cfg, model_over, run), sdir,
                        f"search-{kind}-w{scale}-grid" + (f"-edge{rounds}" if rounds else ""),
                        labels=[grid_label(kind, scale)] * len(run), tags=tags, group=group)
        edge = lr_edge(df)
        added = next_edge_lr(edge, run, rounds, cfg.sweep.baseline.lr_widen)
        if added is None:
            break
        run.append(added)
        rounds += 1
    lr_range = f"grid [{', '.join(f'{v:g}' for v in grid)}]" + (
        f" + edge [{', '.join(f'{v:g}' for v in run[len(grid):])}]" if rounds else "")
    df = df.assign(trial_id=[str(i) for i in range(len(df))], **{"optim.warmup_frac": warmup},
                   search_round=[max(0, i - len(grid) + 1) for i in range(len(run))],
                   **{"optim.lr_range": lr_range})
    df = df[["trial_id", "trial_key", "optim.lr", "optim.warmup_frac",
             *[c for c in TABLE_METRICS if c in df.columns], "search_round", "optim.lr_range"]]
    good = finished(df)
    best = ({"optim.lr": float(good.loc[good["val_loss"].idxmin(), "optim.lr"]), "optim.warmup_frac": warmup}
            if len(good) else {})
    return df, _info(best, {"optim.lr": edge} if best else {}, rounds, len(df), 0, lrs=sorted(run), lr_range=lr_range)


def next_edge_lr(edge: str, run: list[float], rounds: int, widen: int) -> float | None:
    """The grid's edge rule after round ``rounds`` of the LRs ``run`` (``edge``: their :func:`lr_edge`): one LR a grid
    step past the best's edge (:func:`step_beyond`), or None when the best is bracketed or ``widen`` rounds were run."""
    return step_beyond(run, edge) if edge in ("low", "high") and rounds < widen else None


def grid_edges_together(cfg: RunConfig, searches: list[tuple[str, int, dict, list[float]]], sdir: Path, group: str,
                        tags: list[str]) -> None:
    """The grid's edge rounds of several (model, scale) searches at once: round r trains every open search's r-th
    added LR in one fixed list, so Ray keeps every slot busy instead of training one search's LR at a time.
    ``searches``: (kind, scale, shape overrides, grid LRs). Trains only (the same trial keys as
    :func:`grid_search`, which then reads every round from the ledger)."""
    runs = {i: list(lrs) for i, (_, _, _, lrs) in enumerate(searches)}
    for rounds in range(cfg.sweep.baseline.lr_widen + 1):
        trials, labels, spans = [], [], {}
        for i, lrs in runs.items():
            kind, scale, over, _ = searches[i]
            spans[i] = (len(trials), len(trials) + len(lrs))
            trials += grid_trials(cfg, over, lrs)
            labels += [grid_label(kind, scale)] * len(lrs)
        if not trials:
            return
        df = run_trials(cfg, trials, sdir, f"search-edges-round{rounds}", labels=labels, tags=tags, group=group)
        for i, (a, b) in spans.items():
            added = next_edge_lr(lr_edge(df.iloc[a:b]), runs[i], rounds, cfg.sweep.baseline.lr_widen)
            runs[i] = runs[i] + [added] if added is not None else None
        runs = {i: lrs for i, lrs in runs.items() if lrs is not None}


PENDING = "pending"
""":func:`lr_edge` of a round with a trial not in the results folder yet (report only): no edge is decided, and the
edge rule plans no LR past it."""


def lr_edge(trials: pd.DataFrame) -> str:
    """:func:`edges` of optim.lr over the fixed-list trials that ran their budget or diverged: a diverged LR brackets
    the optimum as well as a finite worse loss does (its validation loss is inf), a failed trial says nothing, and a
    missing one leaves the edge :data:`PENDING`."""
    if (trials["status"] == "missing").any():
        return PENDING
    ok = finished(trials)
    if ok.empty:
        return ""
    ran = trials[trials.index.isin(ok.index) | (trials["status"] == "diverged")]
    return edges(ran, ["optim.lr"])["optim.lr"]


def step_beyond(lrs, edge: str) -> float:
    """The LR one grid step past the ``edge`` ('low' | 'high') of ``lrs``: the step between the two LRs at that edge
    (a geometric grid's own ratio: x2 above [1e-3, 2e-3, 4e-3] gives 8e-3), to 4 significant digits as the LRs a
    user writes (readable trial keys; the same LR on every re-run)."""
    lo = sorted(float(v) for v in lrs)
    if len(lo) < 2 or edge not in ("low", "high"):
        raise ValueError(f"baseline grid: a step beyond the {edge!r} edge needs >= 2 LRs and edge low | high")
    value = float(f"{(lo[-1] * lo[-1] / lo[-2] if edge == 'high' else lo[0] * lo[0] / lo[1]):.4g}")
    if value in lo:
        raise ValueError(f"baseline grid: the step past {lo[-1] if edge == 'high' else lo[0]:g} rounds to an LR "
                         f"already run ({value:g}): space sweep.baseline.grid wider")
    return value


def trial_counts(cfg: RunConfig, provenance: dict, lr_info: dict[str, dict], baselines) -> dict[str, dict]:
    """Tuning trials per model for the summary: PT's tune-small count (transfer.yaml) and each baseline's per scale."""
    sweep_cfg = cfg.sweep
    out: dict[str, dict] = {}
    if "pt" in sweep_cfg.models:
        n = int(provenance.get("num_samples", sweep_cfg.num_samples))
        out["pt"] = {"total": n, "per_scale": {}, "description": _pt_effort(cfg, provenance, n)}
    for kind in baselines:
        searches = {str(s): lr_info[f"{kind}-w{s}"] for s in sweep_cfg.scales if f"{kind}-w{s}" in lr_info}
        per = {s: info["n_trials"] for s, info in searches.items()}
        total = sum(per.values())
        not_run = sum(int(info.get("not_run", 0)) for info in searches.values())
        out[kind] = {"total": total, "per_scale": per, "budget_per_search": budget(cfg), "description":
                     f"{budget(cfg)} trials per scale and search round: {method(cfg)}; per scale "
                     + ", ".join(_scale_text(s, info) for s, info in searches.items())
                     + f"; total {total}" + (f" ({not_run} more never ran: re-run to run them)" if not_run else ""),
                     "not_run": not_run}
    return out


def _pt_effort(cfg: RunConfig, provenance: dict, n: int) -> str:
    """PT's tuning effort in words, by where its values come from (provenance "source")."""
    source, width = provenance.get("source"), provenance.get("width", cfg.model.width)
    if source == "config":
        return "0 trials: the config's own values (sweep.transfer_from=config), untuned at every scale"
    if source == "grid":
        return (f"{n} trials once (optim.lr on the grid {provenance.get('grid')} at width {width}, no early stopping; "
                f"the 6 information weights the config's own), transferred untuned to every scale")
    return (f"{n} trials once (tune-small at width {width}: optim.lr + the 6 information weights, TPE + ASHA), "
            f"transferred untuned to every scale")


def _scale_text(scale: str, info: dict) -> str:
    """'N=32: 3', or where the grid's edge rule added LRs, with the LRs run: 'N=32: 4 (grid [...] + edge [...])'."""
    extra = f" ({info['lr_range']})" if info.get("rounds") and "lr_range" in info else ""
    return f"N={scale}: {info['n_trials']}{extra}"
