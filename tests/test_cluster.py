"""The README's cluster path, exercised: a Ray head and a second node on this machine (``ray start``, token auth),
``RAY_ADDRESS`` pointing at the head, a smoke tune-small whose trials land on both nodes with ``out_dir`` and
``ray.storage_path`` on a shared folder; the driver is killed mid-study and the re-run resumes the Optuna study.

The nodes are stopped by killing exactly the processes this test started (found by the test's own random token in
their environment, plus their descendants) - never ``ray stop``, which would stop every Ray on a shared machine.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

pytest.importorskip("ray")
optuna = pytest.importorskip("optuna")

REPO = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ours(token: str) -> list[psutil.Process]:
    """Processes started with this test's token, and everything below them (Ray renames its agents, which
    clobbers their environment, so they are found as children)."""
    found: dict[int, psutil.Process] = {}
    for p in psutil.process_iter(["pid"]):
        try:
            if p.environ().get("RAY_AUTH_TOKEN") == token:
                found[p.pid] = p
                for c in p.children(recursive=True):
                    found[c.pid] = c
        except psutil.Error:
            pass
    return list(found.values())


def _stop_cluster(token: str) -> None:
    procs = _ours(token)
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=15)


def _starts(sdir: Path) -> list[str]:
    log = sdir / "trial_starts.log"
    return [line.split()[-1] for line in log.read_text().splitlines()] if log.exists() else []


def _study(sdir: Path):
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    return optuna.load_study(study_name="search", storage=JournalStorage(JournalFileBackend(str(sdir / "optuna.journal"))))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_node_sweep_lands_on_both_nodes_and_resumes_after_the_driver_is_killed(tmp_path):
    token = secrets.token_hex(32)
    temp = Path(tempfile.mkdtemp(prefix="ptc-", dir="/tmp"))  # short: Ray's unix socket paths must stay < 108 chars
    port = _free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token, "RAY_USAGE_STATS_ENABLED": "0",
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    node = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--object-store-memory=100000000", f"--temp-dir={temp}",
            "--disable-usage-stats"]
    shared = tmp_path / "shared"
    args = ["preset=smoke", "tracker=disabled", f"out_dir={shared / 'runs'}", f"ray.storage_path={shared / 'ray'}",
            "sweep.num_samples=4", "ray.max_concurrent=2", "train.tokens=8192"]
    sdir = shared / "runs" / "tune-small"
    try:
        for cmd in ([RAY, "start", "--head", f"--port={port}", "--include-dashboard=false", *node],
                    [RAY, "start", f"--address=127.0.0.1:{port}", *node]):
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]
        env["RAY_ADDRESS"] = f"127.0.0.1:{port}"

        # the driver joins the cluster; kill it (SIGKILL, its whole session) once one trial has finished
        proc = subprocess.Popen([sys.executable, "-m", "ptsweep", "tune-small", *args], cwd=REPO, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        deadline = time.time() + 300
        finished: list[str] = []
        while time.time() < deadline and proc.poll() is None:
            finished = [k for k in dict.fromkeys(_starts(sdir)) if (sdir / "trials" / k / "final.json").exists()]
            if finished:
                break
            time.sleep(0.3)
        assert finished and proc.poll() is None, (proc.communicate()[0][-3000:] if proc.poll() is not None
                                                  else "no trial finished in time")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert not (sdir / "summary.json").exists()

        rerun = subprocess.run([sys.executable, "-m", "ptsweep", "tune-small", *args], cwd=REPO, env=env,
                               capture_output=True, text=True, timeout=400)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        assert "Connected to Ray cluster" in rerun.stderr  # the cluster, not a new local Ray
        study = _study(sdir)
        assert sum(t.state.name == "COMPLETE" for t in study.trials) == 4
        starts = _starts(sdir)
        assert all(starts.count(k) == 1 for k in finished), starts  # finished trials were not run again
        import json

        nodes = {json.loads((sdir / "trials" / k / "trial.json").read_text())["node_id"] for k in set(starts)}
        assert len(nodes - {""}) == 2, nodes  # trials ran on both nodes
        assert any((shared / "ray" / "tune-small").iterdir())  # Ray's experiment state on the shared storage
    finally:
        _stop_cluster(token)
        shutil.rmtree(temp, ignore_errors=True)
        assert not _ours(token)
