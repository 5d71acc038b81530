"""Fixed-list trials reuse their Ray actors (``runner.make_tuner``): the trials of one list run one after another in
the same worker process, and a trial there gives the record it gives in a fresh worker. Real Ray and training."""

from __future__ import annotations

import json

import pytest

from ptsweep.config import compose
from ptsweep.trials import runner

pytest.importorskip("ray")


def _pids(sdir, keys) -> list[int]:
    return [json.loads((sdir / "trials" / k / "trial.json").read_text())["pid"] for k in keys]


@pytest.mark.usefixtures("ray_local")
def test_a_fixed_list_runs_in_one_reused_worker_which_gives_a_fresh_workers_record(tmp_path):
    cfg = compose(["preset=smoke", "tracker=disabled", f"out_dir={tmp_path}", "ray.max_concurrent=1"])
    trials, labels = [{"optim.lr": 1e-2}, {"optim.lr": 2e-2}, {"optim.lr": 4e-2}], ["a", "b", "c"]
    listed = runner.run_trials(cfg, trials, tmp_path / "list", "list", labels=labels)
    alone = runner.run_trials(cfg, trials[1:2], tmp_path / "alone", "alone", labels=labels[1:2])
    assert (listed["status"] == "ok").all() and (alone["status"] == "ok").all()
    assert len(set(_pids(tmp_path / "list", listed["trial_key"]))) == 1  # one worker trained the three in turn
    assert _pids(tmp_path / "alone", alone["trial_key"]) != _pids(tmp_path / "list", listed["trial_key"][1:2])
    # "b" trained second in a reused worker and first in a fresh one: the same trial key and the same losses
    b = listed.set_index("label").loc["b"]
    assert alone["trial_key"].iloc[0] == b["trial_key"]
    assert alone["val_loss"].iloc[0] == b["val_loss"] and alone["train_loss"].iloc[0] == b["train_loss"]
