"""Stopping and resuming a sweep from the outside, as a user would: Ctrl-C (SIGINT to the terminal's process group).

Properties: the first Ctrl-C ends a running smoke tune-small within 30 s with status 130, prints the command that
resumes it, keeps the finished trials and records the running one as interrupted (FAIL, its parameters queued again,
which the next run asks first: test_optuna_store.py). A second Ctrl-C exits at once and leaves no process of the
sweep behind. That the resume command then starts no finished trial again is proven end to end once, on the demo
chain (test_demo_signals.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ptsweep.trials import optuna_store

pytest.importorskip("ray")
optuna = pytest.importorskip("optuna")

REPO = Path(__file__).resolve().parents[1]


def _env() -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    return env


def _starts(sdir: Path) -> list[str]:
    log = sdir / "trial_starts.log"
    return [line.split()[-1] for line in log.read_text().splitlines()] if log.exists() else []


def _study(sdir: Path):
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    return optuna.load_study(study_name="search", storage=JournalStorage(JournalFileBackend(str(sdir / "optuna.journal"))))


def _start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ptsweep", "tune-small", *args], cwd=REPO, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _wait_for_starts(proc: subprocess.Popen, sdir: Path, n: int, timeout: float = 240) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None and len(_starts(sdir)) < n:
        time.sleep(0.3)
    assert proc.poll() is None, "the sweep ended before it could be interrupted:\n" + proc.communicate()[0][-2000:]
    assert len(_starts(sdir)) >= n, "no trial started in time"


def _session_alive(sid: int) -> list[psutil.Process]:
    alive = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getsid(p.pid) == sid:
                alive.append(p)
        except (ProcessLookupError, PermissionError):
            pass
    return alive


def _kill_session(proc: subprocess.Popen) -> None:
    for p in _session_alive(proc.pid):
        try:
            p.kill()
        except psutil.Error:
            pass


@pytest.mark.timeout(420)
def test_first_ctrl_c_stops_within_30s_keeps_finished_trials_and_queues_the_running_one(tmp_path):
    args = ["preset=smoke", "tracker=disabled", f"out_dir={tmp_path}", "sweep.num_samples=3", "ray.max_concurrent=1",
            "train.tokens=65536"]  # the running trial outlasts the Ctrl-C
    sdir = tmp_path / "tune-small"
    proc = _start(args)
    try:
        _wait_for_starts(proc, sdir, 2)  # the first trial finished, the second runs
        time.sleep(1.0)
        t0 = time.time()
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal signals the whole foreground group
        out, _ = proc.communicate(timeout=60)
        took = time.time() - t0
    finally:
        _kill_session(proc)
    assert took < 30, f"Ctrl-C took {took:.1f} s"
    assert proc.returncode == 130, out[-2000:]
    assert "resume with: python -m ptsweep tune-small" in out and f"out_dir={tmp_path}" in out
    finished = [k for k in dict.fromkeys(_starts(sdir)) if (sdir / "trials" / k / "final.json").exists()
                and '"trial_key"' in (sdir / "trials" / k / "final.json").read_text()]
    assert len(finished) >= 1 and not (sdir / "summary.json").exists()
    states = [t.state.name for t in _study(sdir).trials]
    assert states.count("COMPLETE") == len(finished)
    study = _study(sdir)
    interrupted = optuna_store.interrupted_numbers(study)  # the running trial: FAIL, its parameters queued again
    assert interrupted and all(study.trials[n].state.name == "FAIL" for n in interrupted), states
    assert states.count("WAITING") >= len(interrupted), states  # queued again: the next run trains it first


@pytest.mark.timeout(300)
def test_second_ctrl_c_exits_at_once_and_leaves_no_process(tmp_path):
    args = ["preset=smoke", "tracker=disabled", f"out_dir={tmp_path}", "sweep.num_samples=2", "ray.max_concurrent=1",
            "train.tokens=65536"]
    sdir = tmp_path / "tune-small"
    proc = _start(args)
    try:
        _wait_for_starts(proc, sdir, 1)
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.5)
        t0 = time.time()
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        took = time.time() - t0
        assert took < 10, f"second Ctrl-C took {took:.1f} s"
        assert proc.returncode == 130 and "second Ctrl-C" in out, out[-2000:]
        deadline = time.time() + 15
        while _session_alive(proc.pid) and time.time() < deadline:
            time.sleep(0.5)
        assert not _session_alive(proc.pid), [p.cmdline()[:2] for p in _session_alive(proc.pid)]
    finally:
        _kill_session(proc)
