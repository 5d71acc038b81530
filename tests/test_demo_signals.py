"""Stopping the demo from the outside ("Clean stops"): SIGTERM (``kill``, ``timeout``, a supervisor) and
Ctrl-C (SIGINT to the terminal's whole process group) while a trial runs, and the demo resumed to its end.

Properties: the demo ends with exit status 143 / 130; its stderr has no native failure-signal dump of Ray's core
(absl's ``*** SIGTERM received``), no traceback (W&B teardown of a stopped trial, Ray's own ``sys.exit`` handler),
and ends with ONE line that names the signal and the command that resumes it; re-running that command continues
without starting any finished trial again, and the demo stopped twice ends with the same report as one never stopped
(``test_demo_report.check_report``). This is the suite's one end-to-end proof that a stopped sweep, re-run, starts no
finished trial again (the other stop tests check the stop itself and the records it leaves).

One smoke-sized demo (PT, and UT as the baseline, with one search trial per round), run three times: stopped by
SIGTERM in tune-small (W&B disabled), its resume stopped by Ctrl-C in verify-transfer (W&B offline: files under
tmp_path only; the tracker is result-neutral, so the same trials continue), and the final resume. Real Ray, Optuna
and training.
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
from test_demo_report import check_report
from test_sweep_lifecycle import _session_alive as _session  # processes of a session

pytest.importorskip("ray")
pytest.importorskip("optuna")

REPO = Path(__file__).resolve().parents[1]


def _env() -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_SILENT": "true",
           "RAY_AUTH_MODE": "token", "PYTHONPATH": str(REPO)}
    for k in ("RAY_ADDRESS", "WANDB_MODE"):  # the tracker's mode decides (offline: files only, no network)
        env.pop(k, None)
    env.pop("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", None)  # the demo must turn the dumps off by itself
    return env


def _args(out: Path) -> list[str]:
    # tracker=offline: a trial stopped by Ctrl-C must not print W&B's teardown traceback either
    return ["preset=smoke", f"tracker={(out / 'tracker').read_text()}", f"out_dir={out}", "sweep.num_samples=3",
            "ray.max_concurrent=1", "train.tokens=8192", "sweep.models=[pt,ut]", "sweep.baseline.samples=1"]


def _starts(sdir: Path) -> list[str]:
    log = sdir / "trial_starts.log"
    return [line.split()[-1] for line in log.read_text().splitlines()] if log.exists() else []


def _finished(sdir: Path) -> list[str]:
    return [k for k in dict.fromkeys(_starts(sdir)) if (sdir / "trials" / k / "final.json").exists()
            and '"trial_key"' in (sdir / "trials" / k / "final.json").read_text()]


def _stop_demo(tmp_path: Path, stage: str, n_started: int, sig: int, group: bool, tracker: str) \
        -> tuple[int, str, dict]:
    """Start the demo, wait until ``stage`` has started ``n_started`` trials (the last one running), send ``sig``
    (to the process group when ``group``); return (exit status, stderr, trial starts per stage at that moment)."""
    demo = tmp_path / "demo"
    (tmp_path / "tracker").write_text(tracker)
    proc = subprocess.Popen([sys.executable, "-m", "ptsweep", "demo", *_args(tmp_path)], cwd=REPO, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None and len(_starts(demo / stage)) < n_started:
            time.sleep(0.3)
        assert proc.poll() is None, "the demo ended before it could be stopped:\n" + proc.communicate()[1][-3000:]
        assert len(_starts(demo / stage)) >= n_started, f"no {stage} trial started in time"
        last = demo / stage / "trials" / _starts(demo / stage)[-1]
        while time.time() < deadline and proc.poll() is None and not (last / "progress.json").exists():
            time.sleep(0.2)  # the trial trains and has reported (its W&B run is up): stopping it is the hard case
        (os.killpg if group else os.kill)(proc.pid, sig)
        _, err = proc.communicate(timeout=90)
        deadline = time.time() + 20  # nothing of the demo (local Ray, workers) stays behind
        while _session(proc.pid) and time.time() < deadline:
            time.sleep(0.5)
        assert not _session(proc.pid), [p.cmdline()[:2] for p in _session(proc.pid)]
    finally:
        for p in _session(proc.pid):
            try:
                p.kill()
            except psutil.Error:
                pass
    return proc.returncode, err, {s: _finished(demo / s) for s in ("tune-small", "verify-transfer", "scaling-curves")}


def _assert_one_clean_line(err: str, what: str, tmp_path: Path) -> None:
    assert "absl" not in err and "SIGTERM received" not in err, err[-3000:]
    assert "Traceback" not in err and "ERROR" not in err, err[-3000:]
    last = [ln for ln in err.splitlines() if ln.strip()][-1]
    assert last.startswith(f"stopped by {what}") and "resume with: python -m ptsweep demo preset=smoke" in last \
        and f"out_dir={tmp_path}" in last, err[-3000:]


def _all_starts(tmp_path: Path) -> dict[str, list[str]]:
    return {s: _starts(tmp_path / "demo" / s) for s in ("tune-small", "verify-transfer", "scaling-curves")}


def _assert_not_started_again(tmp_path: Path, finished: dict, before: dict) -> None:
    """No trial in ``finished`` (per stage) started again since the snapshot ``before`` (``_all_starts``)."""
    now = _all_starts(tmp_path)
    for stage, keys in finished.items():
        assert all(now[stage].count(k) == before[stage].count(k) for k in keys), (stage, keys, now[stage])


@pytest.mark.timeout(900)
def test_a_demo_stopped_by_sigterm_then_ctrl_c_exits_with_one_line_each_time_and_resumes_to_its_report(tmp_path):
    """SIGTERM (e.g. a cluster's preemption) exits 143, Ctrl-C to the process group 130; both print one line with
    the resume command; re-running it continues without re-running a finished trial and ends with the full report."""
    code, err, finished = _stop_demo(tmp_path, "tune-small", 2, signal.SIGTERM, group=False, tracker="disabled")
    assert code == 143, err[-3000:]
    _assert_one_clean_line(err, "SIGTERM", tmp_path)
    assert len(finished["tune-small"]) >= 1, finished
    before, finished_before = _all_starts(tmp_path), finished

    code, err, finished = _stop_demo(tmp_path, "verify-transfer", 2, signal.SIGINT, group=True, tracker="offline")
    assert code == 130, err[-3000:]
    _assert_one_clean_line(err, "Ctrl-C", tmp_path)
    assert len(finished["tune-small"]) == 3 and len(finished["verify-transfer"]) >= 1, finished
    _assert_not_started_again(tmp_path, finished_before, before)  # finished before the SIGTERM: not run again
    before = _all_starts(tmp_path)

    (tmp_path / "tracker").write_text("disabled")
    # the last run is not stopped: two trials at once (ray.* is not part of a trial's identity)
    rerun = subprocess.run([sys.executable, "-m", "ptsweep", "demo", *_args(tmp_path), "ray.max_concurrent=2"],
                           cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    _assert_not_started_again(tmp_path, finished, before)
    check_report(tmp_path / "demo")


def test_a_trial_worker_ended_by_ray_prints_no_traceback():
    """Ray ends a finished trial's worker with SIGTERM, whose handler raises SystemExit; inside a weakref callback
    Python prints it as an "Exception ignored" traceback on the driver's stderr (seen after a trial that finished
    fine). The trainable's hook drops exactly that case; any other unraisable exception is still printed."""
    code = (
        "import weakref\n"
        "from ptsweep.trials.ray_session import quiet_worker_exit\n"
        "quiet_worker_exit()\n"
        "class A: pass\n"
        "def stop(_): raise SystemExit(1)\n"
        "def bug(_): raise ValueError('still visible')\n"
        "a, b = A(), A()\n"
        "ra, rb = weakref.ref(a, stop), weakref.ref(b, bug)\n"
        "del a, b\n"
        "print('alive')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "alive", out.stderr
    assert "SystemExit" not in out.stderr and "ValueError: still visible" in out.stderr, out.stderr
