"""Per-scale tuning of the BERT / UT baselines for scaling-curves, with the same effort as PT's tune-small: Optuna
TPE + tune-small's ASHA (``sweeps.search.run_search``) over optim.lr (sweep.baseline.lr_range) and optim.warmup_frac
(sweep.baseline.warmup_range), log-uniform, :func:`budget` trials per (baseline, scale) and round, with the edge rule
(an unbracketed optimum is searched again on a recentred range, sweep.baseline.lr_widen times, then flagged). Search
trials train at :func:`search_training_seed`, a seed no reported run uses. The rules and why: README, "Baseline
tuning".
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ptsweep.config import RunConfig
from ptsweep.sweeps.search import run_search

WARMUP_MAX = 0.5
"""Upper end of any widened optim.warmup_frac range."""


def search_space(cfg: RunConfig) -> dict[str, tuple[float, float]]:
    """Dotted key -> (low, high) of the baseline search."""
    sweep_cfg = cfg.sweep
    return {"optim.lr": tuple(float(v) for v in sweep_cfg.baseline.lr_range),
            "optim.warmup_frac": tuple(float(v) for v in sweep_cfg.baseline.warmup_range)}


def search_tokens(cfg: RunConfig) -> float:
    """Token budget of each search trial: sweep.baseline.search_frac of train.tokens (at least 1)."""
    return max(1.0, cfg.sweep.baseline.search_frac * cfg.train.tokens)


def budget(cfg: RunConfig) -> int:
    """Trials per (baseline, scale) and search round: sweep.baseline.samples, 0 = sweep.num_samples (tune-small's)."""
    return int(cfg.sweep.baseline.samples or cfg.sweep.num_samples)


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
    """The search of one (baseline, scale) with the edge rule: (every trial, info). info: best (key -> value), best_lr,
    edges, edge (the LR's), rounds, n_trials, not_run (trials of the budget Ray never trained: a re-run runs them)."""
    sweep_cfg = cfg.sweep
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
        good = allt[allt["val_loss"].map(math.isfinite) & (allt["status"] == "ok")] if not allt.empty else allt
        if good.empty:
            return allt, {"best": {}, "best_lr": math.nan, "edges": {}, "edge": "", "rounds": rounds,
                          "n_trials": int(len(allt)), "not_run": not_run}
        edge = edges(good, space)
        best = good.loc[good["val_loss"].idxmin()]
        if not any(edge.values()) or rounds >= sweep_cfg.baseline.lr_widen:
            break
        rng = {k: (recentred(r, float(best[k]), k) if edge[k] else r) for k, r in rng.items()}
        rounds += 1
    values = {k: float(best[k]) for k in space}
    return allt, {"best": values, "best_lr": values["optim.lr"], "edges": edge, "edge": edge["optim.lr"],
                  "rounds": rounds, "n_trials": int(len(allt)), "not_run": not_run}


def trial_counts(cfg: RunConfig, provenance: dict, lr_info: dict[str, dict], baselines) -> dict[str, dict]:
    """Tuning trials per model for the summary: PT's tune-small count (transfer.yaml) and each baseline's per scale."""
    sweep_cfg = cfg.sweep
    out: dict[str, dict] = {}
    if "pt" in sweep_cfg.models:
        n = int(provenance.get("num_samples") or sweep_cfg.num_samples)
        out["pt"] = {"total": n, "per_scale": {}, "description":
                     f"{n} trials once (tune-small at width {provenance.get('width', cfg.model.width)}: optim.lr + "
                     f"the 6 information weights, TPE + ASHA), transferred untuned to every scale"}
    for kind in baselines:
        searches = {str(s): lr_info[f"{kind}-w{s}"] for s in sweep_cfg.scales if f"{kind}-w{s}" in lr_info}
        per = {s: info["n_trials"] for s, info in searches.items()}
        total = sum(per.values())
        not_run = sum(int(info.get("not_run", 0)) for info in searches.values())
        out[kind] = {"total": total, "per_scale": per, "budget_per_search": budget(cfg), "description":
                     f"{budget(cfg)} trials per scale and search round over {', '.join(search_space(cfg))} "
                     f"(TPE + ASHA); per scale " + ", ".join(f"N={s}: {n}" for s, n in per.items())
                     + f"; total {total}" + (f" ({not_run} more never ran: re-run to run them)" if not_run else ""),
                     "not_run": not_run}
    return out
