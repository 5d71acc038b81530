"""The outline every sweep driver shares: check the model (``require_pt``), open the study folder (``open_study``),
save and score tables (``save_table``, ``score``), then ``publish`` (W&B summary run, summary.json, report.md).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from ptsweep.config import RunConfig, to_dict
from ptsweep.errors import SweepError
from ptsweep.io import jsonable, write_json
from ptsweep.trials.fields import one_line


def require_pt(cfg: RunConfig, message: str) -> None:
    """Refuse any model but PT with ``"model.name: " + message`` (``{name}`` in it: the model given)."""
    if cfg.model.name != "pt":
        raise SweepError("model.name: " + message.format(name=cfg.model.name))


def open_study(cfg: RunConfig, default: str) -> tuple[str, Path]:
    """(study name, its folder ``<out_dir>/<study>``, created if missing); a results folder (sweep.results) of
    another study or sweep is refused here, before anything runs."""
    from ptsweep.trials import results

    study_dir = study_path(cfg, default)
    if results.folder(cfg) is not None:
        results.check_study(results.folder(cfg), study_name(cfg, default), default, cfg)
    study_dir.mkdir(parents=True, exist_ok=True)
    return study_name(cfg, default), study_dir


def publish(cfg: RunConfig, study_dir: Path, sweep: str, summary: dict, tables: Mapping[str, Any],
            images: Mapping[str, str | Path], wandb_summary: Mapping[str, Any],
            report: Callable[[dict], str] | None = None) -> None:
    """The end of every sweep: the W&B summary run (its one-line note, if any, appended to ``summary["notes"]``),
    ``summary.json`` and, given ``report`` (summary -> markdown), ``report.md``."""
    note = log_summary(cfg, study_dir, sweep, tables, images, wandb_summary, tags=[f"sweep={sweep}"])
    summary.setdefault("notes", [])
    if note:
        summary["notes"].append(note)
    write_json(Path(study_dir) / "summary.json", summary)
    if report is not None:
        (Path(study_dir) / "report.md").write_text(report(summary))


def print_transfer_mismatch(sweep: str, summary: Mapping[str, Any]) -> None:
    """The warning line of a sweep that ran on a transfer.yaml tuned under other settings
    (``sweep.allow_transfer_mismatch``)."""
    if summary["transfer_mismatch"]:
        print(f"{sweep}: PROCEEDING DESPITE transfer.yaml mismatch (sweep.allow_transfer_mismatch): "
              f"{', '.join(summary['transfer_mismatch'])}")


def study_name(cfg: RunConfig, default: str) -> str:
    """``sweep.study`` or the sweep's default name (e.g. "tune-small")."""
    return cfg.sweep.study or default


def study_path(cfg: RunConfig, default: str) -> Path:
    """Absolute ``<out_dir>/<study>``."""
    return (Path(cfg.out_dir) / study_name(cfg, default)).resolve()


def sweep_tags(sweep: str, model_cfg) -> list[str]:
    """W&B tags of a trial: sweep, model and width."""
    return [f"sweep={sweep}", f"model={model_cfg.name}", f"width={model_cfg.width}"]


def save_table(df, study_dir: Path, name: str) -> None:
    """Write ``<study_dir>/<name>.parquet`` + ``.csv`` (object columns stringified for parquet)."""
    study_dir = Path(study_dir)
    study_dir.mkdir(parents=True, exist_ok=True)
    df.to_csv(study_dir / f"{name}.csv", index=False)
    d = df.copy()
    for c in d.columns:
        if d[c].dtype == object:
            d[c] = d[c].map(lambda v: v if v is None or isinstance(v, str) else json.dumps(jsonable(v)))
    d.to_parquet(study_dir / f"{name}.parquet", index=False)


def score(df) -> str:
    """Add ``df["loss"]``, the scored loss (inf for a run without a finite val_loss): the held-out test split when
    every finished run has it (the sweeps choose on validation tokens), else validation. Returns "test" or "val"."""
    finished = df["val_loss"].map(math.isfinite)
    split = "test" if finished.any() and df.loc[finished, "test_loss"].map(math.isfinite).all() else "val"
    df["loss"] = np.where(finished, df[f"{split}_loss"], np.inf)
    return split


def log_summary(cfg: RunConfig, study_dir: Path, name: str, tables: Mapping[str, Any] | None = None,
                images: Mapping[str, str | Path] | None = None, summary: Mapping[str, Any] | None = None,
                tags: Iterable[str] = ()) -> str:
    """One W&B summary run per sweep (docs/running.md, "Weights & Biases") with the tables, plots and artifacts.
    Never fails the sweep: returns "" on success, or a one-line note of what went wrong or why it was skipped."""
    if cfg.tracker.mode == "disabled":
        return "tracker.mode=disabled: no W&B summary run"
    try:
        from ptsweep.tracking import make_tracker

        tracker = make_tracker(cfg.tracker)
        run_dir = Path(study_dir) / "wandb_summary"
        tracker.start(run_dir, to_dict(cfg), name=f"{Path(study_dir).name}-summary", group=Path(study_dir).name,
                      tags=list(tags), job_type="summary")
        for tname, df in (tables or {}).items():
            tracker.log_table(tname, df)
        if images:
            tracker.log_images({k: str(v) for k, v in images.items() if Path(v).exists()})
        sdir = Path(study_dir)
        if (sdir / "transfer.yaml").is_file():  # its own artifact type: what later sweeps consume
            tracker.log_artifact(f"{sdir.name}-transfer", "transfer", [sdir / "transfer.yaml"])
        files = [*sorted(sdir.glob("*.csv")), *sorted(sdir.glob("summary*.json")), *sorted(sdir.glob("*.md"))]
        tracker.log_artifact(f"{sdir.name}-summary", "sweep-summary", files)
        tracker.finish({**(summary or {}), "status": "ok"})
        if cfg.tracker.mode == "online":
            return "W&B report creation skipped (optional); the summary run holds the table and plots"
        return ""
    except Exception as e:  # noqa: BLE001
        return f"W&B summary run failed: {one_line(e)}"


def optuna_study_from_table(df, space: Mapping[str, tuple[float, float]], study_name: str = "ptsweep"):
    """Rebuild an in-memory Optuna study from a trials table (for optuna.visualization): status ok -> COMPLETE,
    early_stopped -> PRUNED, failed/diverged -> FAIL."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {k: optuna.distributions.FloatDistribution(float(lo), float(hi), log=True) for k, (lo, hi) in space.items()}
    study = optuna.create_study(study_name=study_name, direction="minimize")
    for _, row in df.iterrows():
        params = {k: float(row[k]) for k in space}
        status, loss = row.get("status"), float(row.get("val_loss", math.inf))
        if status == "ok" and math.isfinite(loss):
            t = optuna.trial.create_trial(params=params, distributions=dists, value=loss)
        elif status == "early_stopped":
            inter = {int(row.get("tokens") or 0): loss} if math.isfinite(loss) else {}
            t = optuna.trial.create_trial(params=params, distributions=dists, state=optuna.trial.TrialState.PRUNED,
                                          intermediate_values=inter)
        else:
            t = optuna.trial.create_trial(params=params, distributions=dists, state=optuna.trial.TrialState.FAIL)
        study.add_trial(t)
    return study
