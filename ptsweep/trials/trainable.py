"""The Ray Tune function trainable: one ``train.run`` of base config + dotted overrides per trial, its resources
(``placement``), and how a trial ends. A trial with a ledger record reports it instead of training; one killed
mid-run resumes from its own checkpoint; the trials open the token caches the driver prepared (``token_caches``).
Failures never kill a sweep: an exception is recorded as status "failed", a diverged run as "diverged" (both
val_loss = inf); a worker that finds edited source (``code_version``) reports status "refused" and writes no record.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Mapping

from ptsweep.config import RunConfig, with_overrides
from ptsweep.errors import SourceChanged
from ptsweep.identity import result_config, trial_key
from ptsweep.io import write_json
from ptsweep.trials import ledger
from ptsweep.trials.code_version import REFUSED, check_worker_source, git_commit, source_fingerprint
from ptsweep.trials.fields import FINAL_STATUSES, TRIAL_FIELD, finite_or_inf, one_line
from ptsweep.trials.placement import assigned_gpus, cap_gpu_memory, gpus_for_width, trial_device
from ptsweep.trials.ray_session import quiet_worker_exit, silence_worker_output


def _report_subset(m: Mapping[str, Any]) -> dict:
    out = {"val_loss": finite_or_inf(m.get("val_loss")), "tokens": float(m.get("tokens", 0) or 0),
           "steps": int(m.get("step", m.get("steps", 0)) or 0)}
    out.update({k: str(m[k]) for k in ("status", "error", "trial_key") if k in m})
    out.update({k: finite_or_inf(m[k]) for k in ("train_loss", "best_val_loss") if k in m})
    # every loss with its noise and its baselines (NaN stays NaN: not estimated)
    out.update({k: float(m[k]) for k in ("val_loss_se", "unigram_loss", "gain_over_unigram", "gain_over_unigram_se",
                                         "no_context_loss", "context_gain", "context_gain_se", "test_loss",
                                         "test_loss_se", "test_context_gain", "test_context_gain_se")
                if isinstance(m.get(k), (int, float))})
    return out


class _EarlyStopped(Exception):
    """Raised inside a trial once Tune has stopped it (ASHA); train.run records the run with this ``status``."""

    status = "early_stopped"


def _node_id() -> str:
    """The Ray node this trial runs on (recorded in trial.json; multi-node runs show where each trial ran)."""
    try:
        import ray

        return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001
        return ""


def _trainable(config: dict, *, base: dict, fixed: dict, planned: dict, search_label: str, study_dir: str,
               source: str = "", token_caches: Mapping[str, str] | None = None) -> None:
    """Ray Tune function trainable (module docstring); ``source``: the driver's source fingerprint;
    ``token_caches``: :func:`data_identity` -> prepared token-cache folder."""
    from ray import tune

    from ptsweep import train

    quiet_worker_exit()
    study = Path(study_dir)
    key, label, overrides = _trial_identity(config, base, fixed, planned, search_label)
    done = ledger.read_ledger(study, key)
    if done is not None:  # finished before an interruption: report the record, do not train again
        tune.report(_report_subset({**done, "trial_key": key}))
        return
    try:
        source_sha = check_worker_source(source)
    except SourceChanged as e:
        print(f"[ptsweep] trial {key} not run: {e}", file=sys.stderr)
        tune.report(_report_subset({"status": REFUSED, "error": str(e), "val_loss": math.inf, "trial_key": key}))
        return
    trial = _Trial(study, key, label, overrides, source_sha, dict(token_caches or {}))
    ledger.record_start(study, key, label, overrides, pid=os.getpid(), node_id=_node_id(), host=os.uname().nodename,
                        source_sha=source_sha, git_commit=git_commit())
    metrics = trial.run(base)
    if metrics is None:  # interrupted or stopped by the scheduler: already recorded as such
        return
    rec = ledger.record(study, key, label, overrides, metrics, source_sha)
    if rec.get("status") in FINAL_STATUSES and not base.get("sweep", {}).get("keep_checkpoints", False):
        with contextlib.suppress(OSError):
            (trial.tdir / train.CHECKPOINT).unlink()
    tune.report(_report_subset({**rec, "trial_key": key}))


def _trial_identity(config: dict, base: dict, fixed: dict, planned: dict, search_label: str) -> tuple[str, str, dict]:
    """(trial key, label, overrides) of the trial Tune started: from the driver's plan for a fixed list, from the
    proposed dotted parameters for an Optuna search."""
    if TRIAL_FIELD in config:  # fixed list: the key was computed in the driver
        key = config[TRIAL_FIELD]
        return key, planned[key]["label"], {**fixed, **planned[key]["overrides"]}
    overrides = {**fixed, **{k: v for k, v in config.items() if "." in k}}
    return trial_key(base, overrides, search_label), search_label, overrides


class _Trial:
    """One started trial inside its worker: trains, reports progress to Tune, and records how training ended."""

    def __init__(self, study: Path, key: str, label: str, overrides: dict, source_sha: str,
                 token_caches: dict[str, str]):
        self.study, self.key, self.label, self.overrides, self.source_sha = study, key, label, overrides, source_sha
        self.token_caches = token_caches
        self.tdir = ledger.trial_dir(study, key)
        self.last: dict = {}  # the last metrics reported: the record of a trial stopped mid-run

    def interrupted(self) -> bool:
        return ledger.interrupt_marker(self.study).exists()

    def record_interrupt(self) -> None:
        """Ctrl-C: not a ledger record (the trial runs again, from its checkpoint, on resume); the worker goes quiet."""
        ledger.record_interrupt(self.study, self.key, self.last)
        silence_worker_output()

    def record_stop(self) -> None:
        """A trial Tune stopped: interrupted by Ctrl-C, or early-stopped (recorded with its last reported metrics)."""
        if self.interrupted():
            self.record_interrupt()
            return
        ledger.record(self.study, self.key, self.label, self.overrides,
                      {**self.last, "steps": self.last.get("step", 0), "status": "early_stopped", "error": ""},
                      self.source_sha)

    def report(self, m: dict) -> None:
        """``train.run``'s report_fn: record ``m`` and report it to Tune, whose SystemExit (ASHA, or Ctrl-C when the
        study's marker exists) becomes the status the run records."""
        from ray import tune

        if self.interrupted():
            raise KeyboardInterrupt("sweep interrupted (Ctrl-C)")
        self.last.update(m)
        sub = _report_subset({**m, "trial_key": self.key})
        write_json(self.tdir / "progress.json", sub)  # last reported metrics: the record of an ASHA-stopped trial
        try:
            tune.report(sub)
        except SystemExit:
            if self.interrupted():
                raise KeyboardInterrupt("sweep interrupted (Ctrl-C)") from None
            raise _EarlyStopped(f"stopped by the Tune scheduler (ASHA) after step {self.last.get('step', 0)}") \
                from None

    def placement(self, cfg: RunConfig) -> dict:
        """Overrides from where the trial runs (``placement``): its device and the driver's token cache."""
        gpus = assigned_gpus()
        cap_gpu_memory(gpus)
        out = {"train.device": trial_device(cfg.train.device, gpus)}
        folder = self.token_caches.get(data_identity(cfg))
        if folder:
            out["data.token_cache"] = folder
        return out

    def run(self, base: dict) -> dict | None:
        """The trial's metrics to record (failed runs included), or None when it was interrupted (Ctrl-C: runs
        again on resume) or stopped by the scheduler (recorded here as early_stopped)."""
        from ptsweep import train
        from ptsweep.config import from_dict
        from ptsweep.tracking import make_tracker

        tracker = None
        try:
            # continue from the trial's own checkpoint if an earlier attempt was killed mid-run
            cfg = with_overrides(from_dict(base), {**self.overrides,
                                                   "train.resume": (self.tdir / train.CHECKPOINT).exists()})
            # W&B tags (sweep, model, width) of THIS trial: the model/width tags follow the trial's own config
            tags = [t for t in cfg.tracker.tags if not t.startswith(("model=", "width="))]
            cfg = with_overrides(cfg, {"tracker.tags": [*tags, f"model={cfg.model.name}", f"width={cfg.model.width}"],
                                       **self.placement(cfg)})
            tracker = make_tracker(cfg.tracker)
            metrics = train.run(cfg, tracker, run_dir=self.tdir, report_fn=self.report)
            if metrics.get("diverged"):
                metrics = {**metrics, "status": "diverged", "val_loss": math.inf,
                           "error": metrics.get("error") or "diverged: non-finite loss"}
            return metrics
        except KeyboardInterrupt:  # Ctrl-C: the sweep stops; this trial is continued by the next run
            self.record_interrupt()
        except (SystemExit, _EarlyStopped):  # Tune stopped the trial (ASHA); Ray's sys.exit ends only this thread
            self.record_stop()
        except Exception as e:  # noqa: BLE001 - any failure is recorded, never propagated
            if not self.interrupted():
                print(f"[ptsweep] trial {self.key} failed: {one_line(e)}", file=sys.stderr)
                return {"status": "failed", "error": one_line(e), "val_loss": math.inf,
                        "steps": self.last.get("step", 0), "tokens": self.last.get("tokens", 0)}
            self.record_interrupt()  # a failure while the sweep stops (e.g. W&B torn down): runs again on resume
        finally:
            if tracker is not None:
                with contextlib.suppress(Exception):  # never lose the trial's record to a tracker shutdown error
                    tracker.release()
        return None


def trainable_with_resources(cfg: RunConfig, base: dict, fixed: dict, study_dir: Path, *, planned: dict | None = None,
                             search_label: str = ""):
    """The trainable bound to this sweep, with its per-trial resources (:func:`_resources`). A fixed list passes
    ``planned`` (trial key -> {"overrides", "label"}); a search the ``search_label`` of its trial keys."""
    from ray import tune

    planned = dict(planned or {})
    trial_cfgs = [cfg if not fixed else with_overrides(cfg, dict(fixed))]
    trial_cfgs += [with_overrides(trial_cfgs[0], p["overrides"]) for p in planned.values()
                   if any(k.startswith("data.") for k in p["overrides"])]
    fn = tune.with_parameters(_trainable, base=base, fixed=dict(fixed), planned=planned,
                              search_label=search_label, study_dir=str(study_dir), source=driver_source(),
                              token_caches=token_caches(trial_cfgs))
    return tune.with_resources(fn, _resources(cfg, trial_cfgs[0].model.width, planned))


def _resources(cfg: RunConfig, width: int, planned: dict):
    """Per-trial resources: ``ray.cpus_per_trial`` CPUs and the GPUs of the trial's width
    (``placement.gpus_for_width``; a planned trial's own ``model.width`` override, else ``width``)."""
    from ray import tune

    def resources(config: dict):
        w = planned.get(config.get(TRIAL_FIELD), {}).get("overrides", {}).get("model.width", width)
        return tune.PlacementGroupFactory([{"CPU": cfg.ray.cpus_per_trial, "GPU": gpus_for_width(cfg, int(w))}])

    return resources


def data_identity(cfg: RunConfig) -> str:
    """What names a trial's token cache: its data settings minus the result-neutral ones (``identity``)."""
    return json.dumps(result_config({"data": dataclasses.asdict(cfg.data)}), sort_keys=True, default=str)


def token_caches(cfgs) -> dict[str, str]:
    """:func:`data_identity` -> the token-cache folder of each distinct data config of ``cfgs`` (prepared here)."""
    from ptsweep import data as data_mod

    out: dict[str, str] = {}
    for c in cfgs:
        ident = data_identity(c)
        if ident not in out:
            out[ident] = data_mod.prepare(c.data).cache_path
    return out


@functools.cache
def driver_source() -> str:
    """The source fingerprint this driver submits every trial with, taken at its first sweep (``code_version``)."""
    return source_fingerprint()
