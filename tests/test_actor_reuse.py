"""Trials reuse their Ray actors where no scheduler stops them early (``runner.make_tuner``): the trials of a fixed
list, or of a search under FIFO, run one after another in the same worker process, and a trial there gives the
record it gives in a fresh worker; under ASHA every trial gets a worker of its own. Real Ray, Optuna and training."""

from __future__ import annotations

import json

import pytest

from ptsweep.config import compose
from ptsweep.trials import runner, search

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


@pytest.mark.usefixtures("ray_local")
@pytest.mark.parametrize(("reduction", "workers"), [(1, 1), (2, 2)])
def test_a_search_reuses_its_worker_under_fifo_and_never_under_asha(tmp_path, reduction, workers):
    cfg = compose(["preset=smoke", "tracker=disabled", f"out_dir={tmp_path}", "ray.max_concurrent=1",
                   "train.tokens=1024"])
    df = search.run_search(cfg, {"optim.lr": (1e-3, 1e-1)}, tmp_path / "s", "s", num_samples=2, label="s",
                           asha={"grace_frac": 0.5, "reduction": reduction})
    assert len(df) == 2 and df["trial_key"].notna().all()
    assert len(set(_pids(tmp_path / "s", df["trial_key"]))) == workers
