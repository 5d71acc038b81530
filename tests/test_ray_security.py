"""The local Ray a sweep starts accepts no unauthenticated connection, and Ray problems are one-line errors.

Facts this checks (Ray 2.60): Ray cannot bind a local cluster to the loopback interface (it replaces 127.0.0.1 by
the node's routable address; GCS, raylet and workers listen on [::]), so every non-loopback listener must belong to
a process running with token authentication. While a smoke sweep runs, the test lists the listening sockets of every
process of the sweep's session (psutil) and checks: each such process runs with RAY_AUTH_MODE=token, or (HTTP
agents) answers 401 without the token; a client with a wrong token cannot connect to the GCS while one with the
token can; the token file is owner-only.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

pytest.importorskip("ray")

REPO = Path(__file__).resolve().parents[1]
LOOPBACK = ("127.", "::1", "::ffff:127.")


def _env(**extra) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled", **extra}
    env.pop("RAY_ADDRESS", None)
    return env


def _session(sid: int) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getsid(p.pid) == sid:
                out.append(p)
        except (ProcessLookupError, PermissionError):
            pass
    return out


def _listeners(procs: list[psutil.Process]) -> list[tuple[psutil.Process, str, int]]:
    out = []
    for p in procs:
        try:
            for c in p.net_connections(kind="inet"):
                if c.status == psutil.CONN_LISTEN:
                    out.append((p, c.laddr.ip, c.laddr.port))
        except psutil.Error:
            pass
    return out


def _connect(address: str, token: str) -> str:
    code = ("import ray\ntry:\n    ray.init(address=%r); print('CONNECTED')\n"
            "except Exception as e:\n    print('REFUSED', type(e).__name__)\n" % address)
    env = _env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    return r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-300:]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_no_ray_listener_of_a_running_sweep_accepts_unauthenticated_clients(tmp_path):
    args = ["preset=smoke", "tracker=disabled", f"out_dir={tmp_path}", "sweep.num_samples=1", "train.tokens=1000000"]
    proc = subprocess.Popen([sys.executable, "-m", "ptsweep", "tune-small", *args], cwd=REPO, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    log = tmp_path / "tune-small" / "trial_starts.log"
    try:
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None and not log.exists():
            time.sleep(0.3)
        assert proc.poll() is None and log.exists(), proc.communicate()[0][-2000:] if proc.poll() is not None else ""
        time.sleep(1.0)
        procs = _session(proc.pid)
        names = {p.name() for p in procs}
        assert "gcs_server" in names and "raylet" in names, names
        listeners = _listeners(procs)
        exposed = [(p, ip, port) for p, ip, port in listeners if not ip.startswith(LOOPBACK)]
        assert exposed, "expected Ray to listen beyond loopback (if this fails, Ray learned to bind to 127.0.0.1)"

        token_path = Path.home() / ".ray" / "auth_token"
        token = token_path.read_text().strip()
        assert token and not token_path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO), "token file not owner-only"

        gcs = None
        ray_children = [c for c in procs if c.name() in ("gcs_server", "raylet")]
        for p, ip, port in exposed:
            env = p.environ()
            assert env.get("RAY_AUTH_MODE", "token") != "disabled", (p.name(), port)
            if "Agent" in p.name():  # aiohttp agents: refuse a request without the token
                with pytest.raises(urllib.error.HTTPError) as err:
                    urllib.request.urlopen(f"http://{ip if ip not in ('::', '0.0.0.0') else _node_ip()}:{port}/",
                                           timeout=10)
                assert err.value.code == 401, (p.name(), port)
            elif p.pid == proc.pid:  # the driver sets RAY_AUTH_MODE at run time (not in /proc/<pid>/environ) ...
                assert ray_children and all(c.environ().get("RAY_AUTH_MODE") == "token" for c in ray_children)
                # ... and every Ray process it spawned inherited token mode from it (checked here)
            else:  # gRPC servers (gcs_server, raylet, core workers) enforce the mode they were started with
                assert env.get("RAY_AUTH_MODE") == "token", (p.name(), port, env.get("RAY_AUTH_MODE"))
            if p.name() == "gcs_server":
                gcs = port
        assert gcs is not None
        host = _node_ip()  # the routable address, as a client on another machine would use
        assert _connect(f"{host}:{gcs}", "0" * len(token)).startswith("REFUSED")  # wrong token: refused
        assert _connect(f"{host}:{gcs}", token) == "CONNECTED"  # the check can tell: right token connects
    finally:
        try:
            os.killpg(proc.pid, signal.SIGINT)
            proc.communicate(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        for p in _session(proc.pid):
            try:
                p.kill()
            except psutil.Error:
                pass


def _node_ip() -> str:
    from ray._private.services import get_node_ip_address

    return get_node_ip_address()


def test_makefile_and_code_keep_ray_token_auth_on():
    r = subprocess.run(["make", "-s", "--no-print-directory", "--eval", "print-auth: ; @echo $$RAY_AUTH_MODE",
                        "print-auth"], cwd=REPO, capture_output=True, text=True, env={
                            k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}, timeout=60)
    assert r.stdout.strip() == "token", r.stdout + r.stderr


def _tune_small_s(out_dir, env: dict) -> tuple[subprocess.CompletedProcess, float]:
    """(the finished ``tune-small preset=smoke`` in a child process, its wall time in s)."""
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", "ptsweep", "tune-small", "preset=smoke", "tracker=disabled",
                        f"out_dir={out_dir}"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    return r, time.time() - t0


def test_disabled_auth_is_refused_with_one_line(tmp_path):
    r, _ = _tune_small_s(tmp_path, _env(RAY_AUTH_MODE="disabled"))
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "RAY_AUTH_MODE=disabled" in lines[0] and "token" in lines[0], r.stderr


def test_ray_imported_before_token_auth_is_refused_with_one_line(tmp_path):
    """Ray reads RAY_AUTH_MODE once, when imported: a Ray imported earlier without it would run unauthenticated."""
    code = ("import sys\nimport ray\nfrom ptsweep.cli import main\n"
            "sys.exit(main(['tune-small', 'preset=smoke', 'tracker=disabled', 'out_dir=%s']))\n" % tmp_path)
    env = _env()
    env.pop("RAY_AUTH_MODE", None)
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "imported before" in lines[0] and "RAY_AUTH_MODE" in lines[0], \
        r.stderr


PROBE_S = 6
"""PTSWEEP_RAY_PROBE_TIMEOUT_S in the wrong-address tests: the deadline of the child process that joins the cluster."""


@pytest.fixture(scope="module")
def startup_s(tmp_path_factory) -> float:
    """Wall time of the same command refused at once by the TCP probe (a closed local port): the CLI's start-up and
    imports on this machine under its present load (~2 s idle, more on cores shared with training runs)."""
    r, seconds = _tune_small_s(tmp_path_factory.mktemp("startup"), {**_env(), "RAY_ADDRESS": "127.0.0.1:1"})
    assert r.returncode == 2 and "no Ray head answers there" in r.stderr, r.stderr
    return seconds


@pytest.mark.parametrize("address", ["127.0.0.1:1", "198.51.100.7:6379", "nonsense"])
def test_wrong_ray_address_is_a_one_line_error_without_waiting(address, tmp_path, startup_s):
    """Refused within the TCP probe's 5 s and the child probe's deadline (+5 s) beyond the CLI's start-up, where Ray
    itself waits ~20 s or without end (198.51.100.7 is a documentation address: unroutable, or, behind a proxy that
    accepts every TCP connection, a port that speaks no Ray)."""
    env = {**_env(), "RAY_ADDRESS": address, "PTSWEEP_RAY_PROBE_TIMEOUT_S": str(PROBE_S)}
    r, seconds = _tune_small_s(tmp_path, env)
    assert seconds - startup_s < 5 + PROBE_S + 5, (seconds, startup_s)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and address in lines[0] and lines[0].startswith("error:"), r.stderr


def test_an_address_where_no_ray_head_listens_is_a_one_line_error_at_the_probes_deadline(tmp_path):
    """Something accepts TCP there, but it is no Ray head: ray.init alone would wait without end."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as server:
        address = f"127.0.0.1:{server.getsockname()[1]}"
        t0 = time.time()
        r = subprocess.run([sys.executable, "-m", "ptsweep", "tune-small", "preset=smoke", "tracker=disabled",
                            f"out_dir={tmp_path}"], cwd=REPO, capture_output=True, text=True, timeout=120,
                           env={**_env(), "RAY_ADDRESS": address, "PTSWEEP_RAY_PROBE_TIMEOUT_S": "8"})
    assert time.time() - t0 < 30
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "not a reachable Ray cluster" in lines[0], r.stderr


def test_missing_ray_is_a_one_line_error(tmp_path):
    code = ("import sys\nclass Block:\n    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'ray' or name.startswith('ray.'):\n            raise ImportError('No module named ray')\n"
            "sys.meta_path.insert(0, Block())\nfrom ptsweep.cli import main\n"
            "sys.exit(main(['tune-small', 'preset=smoke', 'tracker=disabled', 'out_dir=%s']))\n" % tmp_path)
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "pip install" in lines[0] and "ray" in lines[0], r.stderr


def test_no_project_file_switches_ray_auth_off():
    """Scripts, configs and code never export an auth mode of 'disabled' (the refusal test below is the only place
    that sets it, on purpose). Found once in a study script under experiments/."""
    import re

    pattern = re.compile(r"RAY_AUTH_MODE[^a-z]*disabled")
    skip = {".venv", "runs", ".git", "tests", "__pycache__"}
    offenders = []
    for path in REPO.rglob("*"):
        if path.is_dir() or skip & set(path.relative_to(REPO).parts) or path.suffix in (".md", ".ipynb", ".pyc"):
            continue
        if path.suffix in (".py", ".sh", ".yaml", ".yml", ".toml", ".cfg") or path.name in ("Makefile", "run"):
            text = path.read_text(errors="ignore")
            offenders += [f"{path.relative_to(REPO)}:{i + 1}" for i, line in enumerate(text.splitlines())
                          if pattern.search(line)]
    assert not offenders, offenders
