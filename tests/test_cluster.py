"""The README's cluster path, exercised: a Ray head and a second node on this machine (``ray start``, token auth),
``RAY_ADDRESS`` pointing at the head, a smoke tune-small on local text files whose trials land on both nodes with
``out_dir`` and ``ray.storage_path`` on a shared folder. Two faults: a trial's worker is killed mid-run (Tune starts
the trial again, ``ray.max_failures``, and it resumes from its own checkpoint), then the driver is killed mid-study
and the re-run resumes the Optuna study. In every Ray worker of the nodes ``datasets.load_dataset`` raises (a
``sitecustomize`` on their PYTHONPATH): the trials open the token cache the driver resolved, never the corpus.

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


def _start_head(node_env: dict, node: list[str], token: str) -> int:
    """``ray start --head`` on a free port; returns the port. Another process can take the port between
    :func:`_free_port` and the GCS's bind (seen once in a full test run: "Failed to start the grpc server"), so such
    a start is cleaned up and retried on a new port, three tries in all; any other failure fails at once."""
    port = _free_port()
    for _ in range(3):
        r = subprocess.run([RAY, "start", "--head", f"--port={port}", "--include-dashboard=false", *node],
                           env=node_env, capture_output=True, text=True, timeout=120)
        if r.returncode == 0:
            return port
        _stop_cluster(token)
        if "Failed to start the grpc server" not in r.stdout + r.stderr:
            break
        port = _free_port()
    raise AssertionError(r.stdout[-1500:] + r.stderr[-1500:])


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


SITECUSTOMIZE = """
import os, sys
if sys.argv and sys.argv[0].endswith("default_worker.py"):  # a Ray worker (trial actors among them)
    import datasets

    def _refuse(*args, **kwargs):
        with open(os.environ["PTSWEEP_TEST_PATCH_LOG"], "a") as f:
            f.write(f"called {os.getpid()}\\n")
        raise RuntimeError("datasets.load_dataset called inside a Ray worker")

    datasets.load_dataset = _refuse
    with open(os.environ["PTSWEEP_TEST_PATCH_LOG"], "a") as f:
        f.write(f"patched {os.getpid()}\\n")
"""


def _local_corpus(folder: Path) -> list[str]:
    """Ten Shakespeare plays as one .txt document each (data=local reads them with ``datasets.load_dataset``)."""
    from ptsweep import data as D

    folder.mkdir(parents=True)
    for name, text in list(D.read_shakespeare(D.fetch_shakespeare()).items())[:10]:
        (folder / f"{name}.txt").write_text(text)
    return [str(folder / "*.txt")]


def _kill_a_running_trial(sdir: Path, deadline: float, before_step: int) -> tuple[str, int]:
    """SIGKILL the worker of a trial that has checkpointed a step below ``before_step`` (far from its end) and has
    not finished; returns (trial key, the step of the checkpoint it leaves). The pid is the trial's own (its
    trial.json), checked alive and a Ray actor."""
    import json

    import torch

    while time.time() < deadline:
        for tdir in (sdir / "trials").glob("*") if (sdir / "trials").exists() else []:
            ckpt, info = tdir / "checkpoint.pt", tdir / "trial.json"
            if not (ckpt.exists() and info.exists()) or (tdir / "final.json").exists():
                continue
            pid = json.loads(info.read_text())["pid"]
            try:
                if torch.load(ckpt, map_location="cpu", weights_only=False)["state"]["step"] >= before_step:
                    continue
                proc = psutil.Process(pid)
                assert "ray::" in " ".join(proc.cmdline()), proc.cmdline()
                proc.kill()
            except (psutil.NoSuchProcess, OSError, RuntimeError):  # gone, or a checkpoint being replaced
                continue
            proc.wait(timeout=30)
            step = torch.load(ckpt, map_location="cpu", weights_only=False)["state"]["step"]
            assert not (tdir / "final.json").exists()  # it was running: killed before it finished
            return tdir.name, step
        time.sleep(0.05)
    raise AssertionError("no running trial with a checkpoint to kill")


def _study(sdir: Path):
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    return optuna.load_study(study_name="search", storage=JournalStorage(JournalFileBackend(str(sdir / "optuna.journal"))))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_node_sweep_lands_on_both_nodes_and_resumes_after_the_driver_is_killed(tmp_path):
    token = secrets.token_hex(32)
    temp = Path(tempfile.mkdtemp(prefix="ptc-", dir="/tmp"))  # short: Ray's unix socket paths must stay < 108 chars
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token, "RAY_USAGE_STATS_ENABLED": "0",
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    patch_log = tmp_path / "patch.log"
    node_env = {**env, "PYTHONPATH": os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
                "PTSWEEP_TEST_PATCH_LOG": str(patch_log)}
    node = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--object-store-memory=100000000", f"--temp-dir={temp}",
            "--disable-usage-stats"]
    shared = tmp_path / "shared"
    args = ["preset=smoke", "tracker=disabled", f"out_dir={shared / 'runs'}", f"ray.storage_path={shared / 'ray'}",
            "sweep.num_samples=4", "ray.max_concurrent=2", "train.tokens=8192", "data=local",
            f"data.files=[{_local_corpus(shared / 'corpus')[0]}]", "data.tokenizer=wordpiece",
            "train.checkpoint_every_s=0.001"]
    sdir = shared / "runs" / "tune-small"
    try:
        port = _start_head(node_env, node, token)
        r = subprocess.run([RAY, "start", f"--address=127.0.0.1:{port}", *node], env=node_env, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]
        env["RAY_ADDRESS"] = f"127.0.0.1:{port}"

        # the driver joins the cluster; a trial's worker is killed mid-run, and Tune runs the trial again; the
        # driver is killed (SIGKILL, its whole session) once that trial has finished
        proc = subprocess.Popen([sys.executable, "-m", "ptsweep", "tune-small", *args], cwd=REPO, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        deadline = time.time() + 300
        killed, killed_at = _kill_a_running_trial(sdir, deadline, before_step=20)  # of 32 steps
        assert killed_at > 0
        finished: list[str] = []
        while time.time() < deadline and proc.poll() is None:
            finished = [k for k in dict.fromkeys(_starts(sdir)) if (sdir / "trials" / k / "final.json").exists()]
            if killed in finished:
                break
            time.sleep(0.3)
        assert killed in finished and proc.poll() is None, (proc.communicate()[0][-3000:] if proc.poll() is not None
                                                            else "the killed trial did not finish in time")
        starts_before = _starts(sdir)
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
        assert all(starts.count(k) == starts_before.count(k) for k in finished), starts  # not run again
        import json

        record = json.loads((sdir / "trials" / killed / "final.json").read_text())
        assert starts.count(killed) == 2 and record["status"] == "ok"  # Tune's retry, not the re-run
        assert record["start_step"] == killed_at and record["steps"] > killed_at  # resumed from its checkpoint
        records = [json.loads((sdir / "trials" / k / "final.json").read_text()) for k in set(starts)]
        assert all(r["status"] == "ok" and r["device"] == "cpu" for r in records), records
        log = patch_log.read_text().split()
        trial_pids = {json.loads((sdir / "trials" / k / "trial.json").read_text())["pid"] for k in set(starts)}
        assert "called" not in log  # no trial touched datasets.load_dataset ...
        assert trial_pids <= {int(p) for p in log[1::2]}  # ... which raised in every trial's process

        nodes = {json.loads((sdir / "trials" / k / "trial.json").read_text())["node_id"] for k in set(starts)}
        assert len(nodes - {""}) == 2, nodes  # trials ran on both nodes
        assert any((shared / "ray" / "tune-small").iterdir())  # Ray's experiment state on the shared storage
    finally:
        _stop_cluster(token)
        shutil.rmtree(temp, ignore_errors=True)
        assert not _ours(token)
