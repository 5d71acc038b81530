"""Run tracking: an interface whose default writes local files; W&B is one implementation (imported lazily).

Every run leaves ``config.yaml``, ``history.jsonl`` (one JSON object per log call) and ``final.json`` under its run
folder, and appends ONE line (``{"run_dir", "name", "group", "tags", "job_type", "finished_at", "config",
"metrics"}``) to the results table ``<out_dir>/results.jsonl`` with a single ``O_APPEND`` write, so concurrent runs
share it without locks; failed and diverged runs are kept. W&B modes: docs/running.md, "Weights & Biases".
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ptsweep.config import TrackerConfig, flatten
from ptsweep.errors import TrackerError
from ptsweep.io import append_line, write_atomic
from ptsweep.io import jsonable as _jsonable

RESULTS_FILE = "results.jsonl"
FINISH_WAIT_S = 60.0
"""Longest a process that is exiting waits for another thread to finish its open W&B run (``WandbTracker``)."""
OVERRIDES_ENV = "PTSWEEP_OVERRIDES"
"""JSON list of the command-line overrides as typed (set by the CLI); each run saves it as ``.hydra/overrides.yaml``."""


def _dumps(obj: Any) -> str:
    return json.dumps(_jsonable(obj), separators=(",", ":"))


class Tracker:
    """The tracker interface, recording nothing: ``train.run`` calls ``start`` once, ``log`` at log/eval steps and
    ``finish`` once (also for failed runs); sweep summary runs (``job_type="summary"``) also log tables and images."""

    run_dir: Path | None = None

    def start(self, run_dir: Path, config: dict, name: str = "", group: str = "", tags: Sequence[str] = (),
              job_type: str = "train") -> None:
        """Begin a run recorded under ``run_dir`` with the resolved nested ``config``."""
        self.run_dir = Path(run_dir)

    def log(self, metrics: dict, step: int) -> None:
        """Record a row of metrics at optimizer step ``step``."""

    def finish(self, summary: dict) -> None:
        """End the run with its final metrics (``status`` in ok | diverged | stopped | failed)."""

    def log_table(self, name: str, df) -> None:
        """Record a pandas DataFrame (e.g. a sweep's trial table)."""

    def log_images(self, images: Mapping[str, str | Path]) -> None:
        """Record image files, ``{name: path}`` (e.g. a sweep's plots)."""

    def log_artifact(self, name: str, kind: str, paths: Sequence[str | Path]) -> None:
        """Record files as one versioned artifact (e.g. transfer.yaml, a sweep's summary); local files stay put."""

    def restore_history(self, metrics: dict, step: int) -> None:
        """A resumed run's earlier rows: back into the local history, never sent to W&B again."""

    def release(self) -> None:
        """Free process-wide resources before the process may be killed (a Ray trial actor)."""


def wandb_run_id(run_dir: Path, job_type: str = "train") -> str:
    """Stable W&B run id of a run folder: the same trial / run resumes the same W&B run (``resume="allow"``)."""
    key = f"{Path(run_dir).resolve()}|{job_type}"
    return hashlib.sha1(key.encode()).hexdigest()[:16]


class LocalTracker(Tracker):
    """Files under the run folder + one row per ``job_type="train"`` run in the results table (module docstring),
    ``results_path`` or by default ``<config['out_dir']>/results.jsonl``."""

    def __init__(self, results_path: str | Path | None = None) -> None:
        self.results_path = Path(results_path) if results_path is not None else None
        self._config: dict = {}
        self._meta: dict = {}
        self._finished = True

    def start(self, run_dir: Path, config: dict, name: str = "", group: str = "", tags: Sequence[str] = (),
              job_type: str = "train") -> None:
        import yaml  # PyYAML (an omegaconf dependency); no Hydra here

        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._config = _jsonable(dict(config))
        self._meta = {"name": name or self.run_dir.name, "group": group, "tags": list(tags), "job_type": job_type}
        write_atomic(self.run_dir / "config.yaml", yaml.safe_dump(self._config, sort_keys=False))
        (self.run_dir / "history.jsonl").write_text("")  # a resumed run replays its history from the checkpoint
        self._finished = False

    def log(self, metrics: dict, step: int) -> None:
        if self.run_dir is None:
            return
        append_line(self.run_dir / "history.jsonl", _dumps({"step": int(step), **metrics}))

    def restore_history(self, metrics: dict, step: int) -> None:
        LocalTracker.log(self, metrics, step)

    def finish(self, summary: dict) -> None:
        if self.run_dir is None or self._finished:
            return
        self._finished = True
        final = {k: v for k, v in summary.items() if k != "history"}
        write_atomic(self.run_dir / "final.json", json.dumps(_jsonable(final), indent=1))
        if self._meta.get("job_type", "train") != "train":
            return
        row = {"run_dir": str(self.run_dir), **self._meta,
               "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "config": self._config, "metrics": final}
        out_dir = self._config.get("out_dir")
        results = self.results_path or (Path(out_dir) if out_dir else self.run_dir.parent) / RESULTS_FILE
        append_line(results, _dumps(row))

    def log_table(self, name: str, df) -> None:
        if self.run_dir is not None:
            df.to_csv(self.run_dir / f"{name}.csv", index=False)

    def log_images(self, images: Mapping[str, str | Path]) -> None:
        """Copy images that are outside the run folder into ``<run_dir>/images/``."""
        if self.run_dir is None:
            return
        for name, path in images.items():
            path = Path(path)
            if self.run_dir.resolve() not in path.resolve().parents:
                dest = self.run_dir / "images" / f"{name}{path.suffix}"
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, dest)


class WandbTracker(LocalTracker):
    """:class:`LocalTracker` + Weights & Biases. ``wandb`` is imported in :meth:`start` only."""

    def __init__(self, tracker_cfg: TrackerConfig, results_path: str | Path | None = None) -> None:
        super().__init__(results_path)
        self.cfg = tracker_cfg
        if tracker_cfg.mode == "online" and not os.environ.get("WANDB_API_KEY"):
            raise TrackerError("tracker.mode=online needs WANDB_API_KEY in the environment "
                               "(or use tracker=offline and `wandb sync` later)")
        self._run = None
        self._finished_event = threading.Event()
        self._teardown_lock = threading.Lock()

    def start(self, run_dir: Path, config: dict, name: str = "", group: str = "", tags: Sequence[str] = (),
              job_type: str = "train") -> None:
        super().start(run_dir, config, name, group, tags, job_type)
        import wandb

        stats = self.cfg.system_metrics and job_type == "train"
        settings = wandb.Settings(silent=True, console="off", init_timeout=90, disable_git=True, save_code=False,
                                  x_save_requirements=False, x_disable_stats=not stats,
                                  x_disable_machine_info=not stats)
        self._run = wandb.init(
            mode=self.cfg.mode, project=self.cfg.project, entity=self.cfg.entity or None,
            name=self._meta["name"], group=group or self.cfg.group or None,
            tags=list(tags) or list(self.cfg.tags) or None, job_type=job_type, dir=str(self.run_dir),
            config=flatten(self._config), reinit="create_new", settings=settings,
            id=wandb_run_id(self.run_dir, job_type), resume="allow",
        )
        self._finished_event.clear()
        atexit.register(self._at_exit)  # after wandb.init: runs before W&B's own exit hooks (atexit is LIFO)

    def log(self, metrics: dict, step: int) -> None:
        super().log(metrics, step)
        if self._run is not None:
            self._run.log(_jsonable(metrics), step=int(step))

    def finish(self, summary: dict) -> None:
        super().finish(summary)
        if self._run is None:
            return
        run, self._run = self._run, None
        try:
            run.summary.update(_jsonable({k: v for k, v in summary.items() if k != "history"}))
            run.finish(exit_code=1 if summary.get("status") == "failed" else 0)
        finally:
            self._finished_event.set()

    def release(self) -> None:
        """Shut this process's wandb-core service down now: a Ray trial's actor may end right after ``finish``."""
        self._teardown()
        atexit.unregister(self._at_exit)

    def _teardown(self) -> None:
        import wandb

        with self._teardown_lock:  # one teardown at a time: the trial's thread or the exit hook
            wandb.teardown()  # a no-op when this process has no W&B service (any more)

    def _at_exit(self) -> None:
        """Exit hook: wait (at most FINISH_WAIT_S) for another thread's ``finish`` of this run, then tear W&B down
        before W&B's own exit hooks find a half-finished run."""
        self._finished_event.wait(FINISH_WAIT_S)
        self._teardown()

    def log_table(self, name: str, df) -> None:
        super().log_table(name, df)
        if self._run is not None:
            import wandb

            self._run.log({name: wandb.Table(dataframe=df)})

    def log_images(self, images: Mapping[str, str | Path]) -> None:
        super().log_images(images)
        if self._run is not None:
            import wandb

            self._run.log({name: wandb.Image(str(path)) for name, path in images.items()})

    def log_artifact(self, name: str, kind: str, paths: Sequence[str | Path]) -> None:
        files = [Path(p) for p in paths if Path(p).is_file()]
        if self._run is None or not files:
            return
        import wandb

        safe_name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:120] or "artifact"
        art = wandb.Artifact(safe_name, type=kind)
        for f in files:
            art.add_file(str(f), name=f.name)
        self._run.log_artifact(art)


def make_tracker(tracker_cfg: TrackerConfig, results_path: str | Path | None = None) -> Tracker:
    """Local files always; W&B on top unless ``tracker.mode`` is 'disabled'."""
    if tracker_cfg.mode == "disabled":
        return LocalTracker(results_path)
    return WandbTracker(tracker_cfg, results_path)
