"""tune-small: Optuna TPE over the 7 transferable hyperparameters of PT at the tuning width ([S] §3, muTransfer
step 1), sweep.num_samples trials with ASHA, the config's own point first; only a trial that ran its whole budget can
be the best. Writes transfer.yaml (the 7 best values and their provenance), the trials table, Optuna's figures and
summary.json (with the at-init coordinate check of the tuned point) to ``<out_dir>/<study>/``.
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from pathlib import Path

import yaml

from ptsweep import metric_keys
from ptsweep.config import INFO_WEIGHTS, TRANSFER_KEYS, RunConfig, with_overrides
from ptsweep.errors import SweepError
from ptsweep.trials.code_version import git_commit
from ptsweep.trials.fields import early_stopping_label, finished
from ptsweep.reports.outputs import optuna_study_from_table, open_study, publish, require_pt, save_table, sweep_tags
from ptsweep.trials.ray_session import ray_session
from ptsweep.trials.search import outside_space, run_search
from ptsweep.trials.trial_plan import PlannedTrial
from ptsweep.sweeps.transfer import config_point, transfer_settings

SWEEP = "tune-small"
PT_ONLY = "tune-small tunes PT's 7 hyperparameters, got model={name}"


def search_space(cfg: RunConfig) -> dict[str, tuple[float, float]]:
    """Dotted key -> (low, high), all log-uniform."""
    space = {"optim.lr": tuple(cfg.sweep.lr_range)}
    space.update({f"model.{w}": tuple(cfg.sweep.weight_ranges.get(w, cfg.sweep.weight_range)) for w in INFO_WEIGHTS})
    assert tuple(space) == TRANSFER_KEYS
    return space


def start_point(cfg: RunConfig) -> dict[str, float] | None:
    """The config's own values of the 7 keys (the first trial: the search cannot end above the defaults); None, said on
    stderr, when the point lies outside the search space."""
    point = config_point(cfg)
    outside = outside_space(point, search_space(cfg))
    if outside:
        print(f"tune-small: the config's point is outside the search space ({'; '.join(outside)}): the first trial "
              f"is a random one, not the config's values", file=sys.stderr, flush=True)
        return None
    return point


def planned_trials(cfg: RunConfig) -> list[PlannedTrial]:
    """The sweep.num_samples search trials the driver asks Optuna for (``trial_plan``)."""
    require_pt(cfg, PT_ONLY)
    return [PlannedTrial(SWEEP, "search", cfg.model, float(cfg.train.tokens), int(cfg.seed), cfg.train.batch_size,
                         int(cfg.model.width), f"search-{i}") for i in range(cfg.sweep.num_samples)]


def optuna_plots(df, space: dict, study_dir: Path) -> tuple[dict[str, Path], list[str]]:
    """Optimization history, parameter importances and slices as PNGs; returns ({name: path}, notes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna
    from optuna.visualization import matplotlib as ovm

    study = optuna_study_from_table(df, space, study_name=study_dir.name)
    n_complete = sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    images, notes = {}, []
    for name, fn, need in (("optuna_history", ovm.plot_optimization_history, 1),
                           ("optuna_importances", ovm.plot_param_importances, 2), ("optuna_slices", ovm.plot_slice, 1)):
        if n_complete < need:
            notes.append(f"{name}.png skipped: {n_complete} completed trial(s), need {need}")
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # ExperimentalWarning
                ax = fn(study)
            fig = (ax.flat[0] if hasattr(ax, "flat") else ax).figure
            fig.set_size_inches(max(fig.get_size_inches()[0], 8), max(fig.get_size_inches()[1], 4.5))
            path = study_dir / f"{name}.png"
            fig.savefig(path, dpi=110, bbox_inches="tight")
            images[name] = path
        except Exception as e:  # noqa: BLE001 - a plot must never lose the study's results
            notes.append(f"{name}.png skipped: {type(e).__name__}: {e}".splitlines()[0])
        finally:
            plt.close("all")
    return images, notes


def run(cfg: RunConfig) -> Path:
    """Run (or resume) the study; write transfer.yaml, the trials table, plots and summary.json; return its folder."""
    require_pt(cfg, PT_ONLY)
    t0 = time.time()
    name, sdir = open_study(cfg, SWEEP)
    space = search_space(cfg)
    sweep_cfg = cfg.sweep
    with ray_session(cfg.ray):
        df = run_search(cfg, space, sdir, "search", num_samples=sweep_cfg.num_samples, seed=sweep_cfg.search_seed,
                        asha={"grace_frac": sweep_cfg.asha_grace_frac, "reduction": sweep_cfg.asha_reduction},
                        tags=sweep_tags(SWEEP, cfg.model), group=name.replace("/", "-"), start=start_point(cfg))
    save_table(df, sdir, "trials")

    ok = finished(df)
    if ok.empty:
        raise SweepError(f"tune-small: none of the {len(df)} trials finished its budget with a finite loss; "
                         f"see {sdir / 'trials.csv'} (status/error columns)")
    best = ok.loc[ok["val_loss"].idxmin()]
    values = {k: float(best[k]) for k in TRANSFER_KEYS}
    provenance = _provenance(cfg, name, best)
    write_transfer(sdir / "transfer.yaml", values, provenance)

    images, notes = optuna_plots(df, space, sdir)
    from ptsweep.sweeps.coords import check_at_init  # torch and the models, loaded only here

    coord = check_at_init(with_overrides(cfg, values))  # does the tuned point keep PT width-stable?
    counts = df["status"].value_counts().to_dict()
    not_run = int(df.attrs.get("search", {}).get("not_run", 0))
    if not_run:  # proposed but never trained (e.g. Ray lost the worker): never hidden from the count
        counts["not_run"] = not_run
    context = {k: float(best[k]) if k in best and best[k] is not None else math.nan
               for k in ("unigram_loss", "no_context_loss", "context_gain", "context_gain_se")}
    summary = {"study": name, "best": {"values": values, **provenance, **context}, "n_trials": int(len(df)),
               "status_counts": {str(k): int(v) for k, v in counts.items()},
               "early_stopping": early_stopping_label(sweep_cfg.asha_grace_frac, sweep_cfg.asha_reduction),
               "plots": sorted(p.name for p in images.values()), "coord_check_at_best": coord, "notes": notes,
               "wall_s": time.time() - t0, "search": df.attrs.get("search", {})}
    publish(cfg, sdir, SWEEP, summary, {"trials": df}, images, {"best_val_loss": provenance["val_loss"], **values})
    print(f"tune-small: best val_loss {provenance['val_loss']:.4f} (trial {provenance['trial_id']}) of {len(df)} "
          f"trials {summary['status_counts']}"
          + (f" ({not_run} of num_samples={sweep_cfg.num_samples} did not run: re-run to run them)" if not_run else "")
          + "; transfer.yaml written; coordinate check of the tuned point "
          f"({coord['kind']}): {coord['verdict']}")
    print(f"tune-small: best trial: unigram {context['unigram_loss']:.4f}, no-context {context['no_context_loss']:.4f};"
          f" {metric_keys.context_line(context)}")
    return sdir


def _provenance(cfg: RunConfig, name: str, best) -> dict:
    """transfer.yaml's provenance of the best trial: where and under which settings it was tuned."""
    return {"study": name, "trial_id": str(best["trial_id"]), "trial_key": str(best["trial_key"]),
            "val_loss": float(best["val_loss"]), "width": int(cfg.model.width), "scaling": cfg.model.scaling,
            "parametrization": cfg.model.parametrization, "data": cfg.data.name,
            "vocab_size": int(cfg.data.vocab_size), "seq_len": int(cfg.data.seq_len),
            "tokens": float(best["tokens"]) if best.get("tokens") is not None else float(cfg.train.tokens),
            "token_budget": float(cfg.train.tokens), "seed": int(cfg.seed), "search_seed": int(cfg.sweep.search_seed),
            "num_samples": int(cfg.sweep.num_samples), "preset": cfg.preset, "git_commit": git_commit(),
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "settings": transfer_settings(cfg)}  # checked by every sweep that reads transfer.yaml (sweeps.transfer)


def write_transfer(path: Path, values: dict[str, float], provenance: dict) -> None:
    """transfer.yaml: the 7 values (dotted keys) and their provenance, headed by the overrides that apply them."""
    path.write_text(
        "# The 7 transferable hyperparameters found by tune-small (dotted config keys), read by verify-transfer\n"
        "# and scaling-curves. Use them as overrides: " + " ".join(f"{k}={v:.6g}" for k, v in values.items()) + "\n"
        + yaml.safe_dump({"values": values, "provenance": provenance}, sort_keys=False))
