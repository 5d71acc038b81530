"""How much loss the cheaper baseline LR rule (``sweep.baseline.rule=extrapolate``, ptsweep/sweeps/baseline_rule.py)
leaves against the per-scale search, from two scaling-curves studies (README.md beside this file).

    python experiments/baseline-rule/rule_regret.py local FULL_STUDY [overrides]   # the LRs the rule would run
    python experiments/baseline-rule/rule_regret.py regret FULL_STUDY RULE_STUDY... [overrides]
    python experiments/baseline-rule/rule_regret.py seeds N SEEDS_STUDY FULL_STUDY RULE_STUDY... [overrides]

``local`` reads the full search's lr_search.csv and runs.csv, fits each baseline's best LR at the
``sweep.baseline.search_scales`` smallest scales by a power law in non-embedding params and prints, per baseline and
larger scale, the local LRs and the scaling-curves command that runs them (grid mode, one scale, one baseline).
``regret`` compares the final runs: per (baseline, larger scale) loss(rule) - loss(search) with a 95 % Welch
interval over seeds (``analysis.fits.difference_ci``), and what the rule saves in search trials. ``seeds`` trains N
more seeds of both sides' final runs (the same shape, LR and warm-up as each study's seed-0 final, seeds 2 .. N + 1)
in SEEDS_STUDY (a fixed list with a ledger: resumable) and prints the regret paired by seed over every seed: the rule's
and the search's finals at one seed share the initialisation and the data order, so their difference cancels most of
the seed's noise (``context_transfer.paired_difference``; 95 % t interval).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd
from scipy import stats

from ptsweep.analysis.context_transfer import paired_difference
from ptsweep.analysis.fits import difference_ci
from ptsweep.config import compose
from ptsweep.sweeps import baseline_rule


def best_values(study: Path) -> pd.DataFrame:
    """Per (model, scale) of a full-search study: the best finished search trial's LR and warm-up, and the
    baseline's non-embedding params."""
    search = pd.read_csv(study / "lr_search.csv")
    ok = search[(search["status"] == "ok") & search["val_loss"].map(lambda v: v < float("inf"))]
    best = ok.loc[ok.groupby(["model", "scale"])["val_loss"].idxmin(), ["model", "scale", "optim.lr",
                                                                       "optim.warmup_frac"]]
    sizes = pd.read_csv(study / "runs.csv").groupby(["model", "scale"])["non_embedding_params"].first()
    return best.join(sizes, on=["model", "scale"]).sort_values(["model", "scale"]).reset_index(drop=True)


def local_plan(cfg, study: Path) -> list[dict]:
    """Per baseline and scale the rule does not search: its extrapolated LR and the local LRs to run."""
    best, searched, out = best_values(study), baseline_rule.searched_scales(cfg), []
    for model, g in best.groupby("model"):
        fit_rows = g[g["scale"].isin(searched)]
        values = {float(r["non_embedding_params"]): {"optim.lr": r["optim.lr"], "optim.warmup_frac":
                                                     r["optim.warmup_frac"]} for _, r in fit_rows.iterrows()}
        for _, r in g[~g["scale"].isin(searched)].iterrows():
            local = baseline_rule.local_search(cfg, values, float(r["non_embedding_params"]))
            out.append({"model": model, "scale": int(r["scale"]), "searched_lr": r["optim.lr"], **local})
    return out


def regret(full: Path, rule_studies: list[Path]) -> pd.DataFrame:
    """Per (baseline, scale) run by the rule studies: loss(rule) - loss(full search) over seeds, 95 % interval."""
    runs = pd.read_csv(full / "runs.csv")
    rows = []
    for study in rule_studies:
        for (model, scale), g in pd.read_csv(study / "runs.csv").groupby(["model", "scale"]):
            ref = runs[(runs["model"] == model) & (runs["scale"] == scale)]["loss"]
            d = difference_ci(g["loss"].tolist(), ref.tolist())
            rows.append({"model": model, "scale": scale, "regret": d["diff"], "lo": d["lo"], "hi": d["hi"],
                         "n_rule": d["n_a"], "n_search": d["n_b"], "study": study.name})
    return pd.DataFrame(rows).sort_values(["model", "scale"])


def final_overrides(study: Path, model: str, scale: int) -> dict:
    """The overrides of a study's first final run of ``model`` at ``scale`` (shape, LR, warm-up, seed)."""
    path = min((study / "trials").glob(f"final-{model}-w{scale}-s0-*/trial.json"))
    return json.loads(path.read_text())["overrides"]


def extra_seeds(cfg, n: int, seeds_study: Path, full: Path, rule_studies: list[Path]) -> pd.DataFrame:
    """Train seeds 2 .. n + 1 of each (baseline, scale) of the rule studies at the rule's and at the search's LR;
    return every final run of both sides (side, model, scale, seed, loss), the studies' own finals included."""
    from ptsweep.reports.outputs import score
    from ptsweep.trials.ray_session import ray_session
    from ptsweep.trials.runner import run_trials

    trials, rows, done = [], [], []
    for study in rule_studies:
        for (model, scale), _ in pd.read_csv(study / "runs.csv").groupby(["model", "scale"]):
            for side, src in (("rule", study), ("search", full)):
                over = final_overrides(src, model, int(scale))
                trials += [{**over, "seed": sd} for sd in range(2, n + 2)]
                rows += [{"side": side, "model": model, "scale": int(scale), "seed": sd} for sd in range(2, n + 2)]
                runs = pd.read_csv(src / "runs.csv")
                done.append(runs[(runs["model"] == model) & (runs["scale"] == scale)].assign(side=side))
    with ray_session(cfg.ray):
        df = run_trials(cfg, trials, seeds_study, "rule-seeds", labels=[f"{r['side']}-{r['model']}-w{r['scale']}"
                                                                          for r in rows])
    score(df)
    cols = ["side", "model", "scale", "seed", "loss"]
    return pd.concat([pd.DataFrame(rows).assign(loss=df["loss"].to_numpy()), *[d[cols] for d in done]],
                     ignore_index=True)


def paired_regret(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (baseline, scale): loss(rule) - loss(search) paired by seed, its SE and 95 % t interval."""
    rows = []
    for (model, scale), g in runs.groupby(["model", "scale"]):
        side = {k: dict(zip(v["seed"], v["loss"])) for k, v in g.groupby("side")}
        d = paired_difference(side["rule"], side["search"])
        half = float(stats.t.ppf(0.975, d["n"] - 1)) * d["se"] if d["n"] > 1 else math.nan
        rows.append({"model": model, "scale": scale, "regret": d["diff"], "se": d["se"], "lo": d["diff"] - half,
                     "hi": d["diff"] + half, "n_seeds": d["n"]})
    return pd.DataFrame(rows)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("local", "regret", "seeds"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "seeds":
        n, paths = int(argv[1]), [Path(a) for a in argv[2:] if "=" not in a]
        runs = extra_seeds(compose([a for a in argv[2:] if "=" in a]), n, paths[0], paths[1], paths[2:])
        print(paired_regret(runs).to_string(index=False, float_format=lambda v: f"{v:.4f}"))
        return 0
    mode, paths = argv[0], [Path(a) for a in argv[1:] if "=" not in a]
    cfg = compose([a for a in argv[1:] if "=" in a] + ["sweep.baseline.rule=extrapolate"])
    if mode == "local":
        for p in local_plan(cfg, paths[0]):
            grid = ",".join(f"{v:.4g}" for v in p["lrs"])
            print(f"{p['model']} scale {p['scale']}: searched LR {p['searched_lr']:.4g}, extrapolated "
                  f"{p['lr_hat']:.4g} (fit b = {p['fit']['b']:.3f}, r2 {p['fit']['r2']:.3f})\n  python -m ptsweep "
                  f"scaling-curves {' '.join(a for a in argv[1:] if '=' in a)} sweep.models=[{p['model']}] "
                  f"sweep.scales=[{p['scale']}] sweep.baseline.grid=[{grid}] "
                  f"optim.warmup_frac={p['warmup_frac']:.4g} sweep.study=rule-{p['model']}-w{p['scale']}")
        return 0
    print(regret(paths[0], paths[1:]).to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
