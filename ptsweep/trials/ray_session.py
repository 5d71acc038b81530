"""The Ray session of a sweep (docs/running.md): token authentication always on (a local Ray listens on every
interface), one ``SweepError`` line for each way Ray cannot start or be reached, and clean stops with the resume
command: the first Ctrl-C during ``tuner.fit`` stops Tune (``SweepInterrupted``, status 130); a second Ctrl-C or a
SIGTERM (status 143) kills every process this driver started and exits at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import types
from pathlib import Path

from ptsweep.errors import SweepError

AUTH_ENV = "RAY_AUTH_MODE"
PROBE_TIMEOUT_S = float(os.environ.get("PTSWEEP_RAY_PROBE_TIMEOUT_S", "30"))
"""Deadline of the probe that joins a cluster from a child process first."""
TOKEN_PATH = Path.home() / ".ray" / "auth_token"


RESUME = {"command": "", "kept": "finished trials are kept"}
"""The command line that resumes the current command and what a stop keeps (set by the CLI; printed by every stop)."""


def stop_line(signum: int, detail: str = "") -> str:
    """The one line every stop prints: what stopped it and the command that resumes it."""
    what = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}.get(signum, f"signal {signum}")
    line = f"stopped by {what}" + (f" ({detail})" if detail else "") + (f"; {RESUME['kept']}" if RESUME["kept"] else "")
    return line + (f" - resume with: {RESUME['command']}" if RESUME["command"] else "")


def import_ray():
    """``import ray`` or one SweepError line saying how to install it."""
    try:
        import ray  # noqa: F401
        from ray import tune  # noqa: F401
    except ImportError as e:
        raise SweepError(f"Ray Tune is not importable ({e}); install it with `pip install 'ray[tune]==2.60.0'` "
                         f"(or `make setup`)") from None
    return ray


def _require_token_auth() -> None:
    """RAY_AUTH_MODE unset -> token, any other mode refused; so is a Ray imported before (it reads the mode once)."""
    mode = os.environ.get(AUTH_ENV, "").strip().lower()
    if mode and mode != "token":
        raise SweepError(f"{AUTH_ENV}={os.environ[AUTH_ENV]}: ptsweep never runs Ray without token authentication "
                         f"(anyone who reaches this machine could run code on it); unset {AUTH_ENV} or set it to token")
    if mode != "token":
        if "ray" in sys.modules:
            raise SweepError(f"Ray was imported before ptsweep could turn on its token authentication (Ray reads "
                             f"{AUTH_ENV} when imported): export {AUTH_ENV}=token, or start the sweep before "
                             f"importing ray")
        os.environ[AUTH_ENV] = "token"


def protect_token_file() -> None:
    """Ray writes ~/.ray/auth_token world-readable (0644): make it owner-only."""
    path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or TOKEN_PATH)
    with contextlib.suppress(OSError):
        if path.is_file() and path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            path.chmod(0o600)


def _probe(address: str, timeout: float = 5.0) -> None:
    """One-line SweepError unless ``host:port`` accepts a TCP connection and a child process connects to Ray there
    within its deadline (an in-process ``ray.init`` waits without end on a port that is no Ray head)."""
    if address in ("auto", "local") or address.startswith(("ray://", "anyscale://")):
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise SweepError(f"ray.address / RAY_ADDRESS={address!r}: expected host:port (e.g. 10.0.0.5:6379) or auto")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as e:
        raise SweepError(f"ray.address / RAY_ADDRESS={address}: no Ray head answers there ({type(e).__name__}: {e}); "
                         f"start one with `ray start --head` or unset RAY_ADDRESS for a local Ray") from None
    code = "import ray; ray.init(address=%r, log_to_driver=False); print('ptsweep-probe: connected')" % address
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        ok, why = "ptsweep-probe: connected" in r.stdout, _last_error_line(r.stderr)
    except subprocess.TimeoutExpired:
        ok, why = False, f"no Ray answer within {PROBE_TIMEOUT_S:.0f} s"
    if not ok:
        hint = ("; this cluster uses token auth: put its token in RAY_AUTH_TOKEN (`ray get-auth-token` on the head "
                "prints it)") if "auth" in why.lower() else "; is it a Ray head (`ray start --head`)?"
        raise SweepError(f"ray.address / RAY_ADDRESS={address}: not a reachable Ray cluster ({why}){hint}")


def _last_error_line(stderr: str) -> str:
    """The last line of a child's traceback (the exception), or its last line of output."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return next((ln for ln in reversed(lines) if "Error" in ln.split(":")[0]), lines[-1] if lines else "no output")


def _init(address: str, ray_cfg) -> None:
    ray = import_ray()
    local = dict(num_cpus=ray_cfg.num_cpus or None, object_store_memory=ray_cfg.object_store_memory or None,
                 include_dashboard=False, _node_ip_address="127.0.0.1")
    try:
        ray.init(**(dict(address=address) if address else local), ignore_reinit_error=True, log_to_driver=True)
    except (ConnectionError, RuntimeError, ValueError) as e:
        hint = (" - this cluster uses token auth: put its token in RAY_AUTH_TOKEN (or ~/.ray/auth_token; "
                "`ray get-auth-token` on the head prints it)") if "auth" in str(e).lower() or address else ""
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise SweepError(f"Ray could not start/connect{f' to {address}' if address else ''}: {msg}{hint}") from None
    protect_token_file()


@contextlib.contextmanager
def ray_session(ray_cfg):
    """Ray for the duration of a sweep: an initialised Ray is reused (left running); ``ray.address`` or
    ``$RAY_ADDRESS`` is joined; else a local Ray (docs/running.md) is started and shut down on exit."""
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")  # no absl stack dump per Ray process on SIGTERM
    # a worker's children (a trial's wandb-core) live on until its exit hooks have finished the trial's W&B run
    os.environ.setdefault("RAY_kill_child_processes_on_worker_exit", "false")
    _require_token_auth()
    ray = import_ray()
    if ray.is_initialized():
        yield
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Tune's automatic CSV/JSON/TensorBoard result loggers duplicate the ledger (and choke on val_loss = inf).
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    # Tune's own SIGINT handler would make fit() return partial results; interrupt_guard handles Ctrl-C instead.
    os.environ.setdefault("TUNE_DISABLE_SIGINT_HANDLER", "1")
    address = ray_cfg.address or os.environ.get("RAY_ADDRESS", "")
    # workers on this machine inherit the repo root on PYTHONPATH: they import ptsweep even when it is not installed
    root = str(Path(__file__).resolve().parents[2])
    if root not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    if address:
        _probe(address)
    _init(address, ray_cfg)
    install_sigterm_handler()  # ray.init replaced it with sys.exit(15) (a traceback from wherever it lands)
    try:
        yield
    finally:
        ray.shutdown()


INTERRUPT = types.SimpleNamespace(requested=False)
"""State of the Ctrl-C handler during ``tuner.fit`` (read by the stopper and the searcher)."""


def make_stopper():
    """A Tune Stopper that stops the whole experiment once Ctrl-C was pressed."""
    from ray.tune.stopper import Stopper

    class _CtrlCStopper(Stopper):
        def __call__(self, trial_id, result):
            return INTERRUPT.requested

        def stop_all(self):
            return INTERRUPT.requested

    return _CtrlCStopper()


def _descendants(pid: int) -> list[int]:
    """Pids of all processes below ``pid`` (from /proc; empty where there is no /proc)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _hard_exit(signum: int = signal.SIGINT, detail: str = "second Ctrl-C: exiting now, running trials are lost") \
        -> None:
    """One line, then SIGKILL every descendant of this driver (the local Ray, trial workers; not a joined cluster)
    and exit now with 128 + signum."""
    with contextlib.suppress(Exception):
        sys.stderr.write("\n" + stop_line(signum, detail) + "\n")
        sys.stderr.flush()
    for pid in _descendants(os.getpid()):  # collected first: killing the raylet re-parents its agents
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    os._exit(128 + int(signum))


def silence_worker_output() -> None:
    """Send this trial worker's stdout and stderr to /dev/null after a Ctrl-C: what follows is teardown noise."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.close(devnull)


def quiet_worker_exit() -> None:
    """A trial worker's ``sys.unraisablehook`` that drops the "ignored" ``SystemExit`` of the SIGTERM ending its
    actor (a traceback on the driver's stderr otherwise)."""
    def hook(hook_args) -> None:
        if hook_args.exc_type is not SystemExit:
            sys.__unraisablehook__(hook_args)

    sys.unraisablehook = hook


def install_sigterm_handler() -> None:
    """SIGTERM -> one line with the resume command, the local Ray killed, exit 143. Main thread only."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda signum, frame: _hard_exit(
            signal.SIGTERM, "running trials start again on resume, from their last checkpoint"))


@contextlib.contextmanager
def interrupt_guard(name: str, marker: Path):
    """Install the two-stage Ctrl-C handler around ``tuner.fit`` (main thread only; elsewhere a no-op). The first
    Ctrl-C also creates ``marker`` (the study's ``.interrupted`` file: trials stopped now record "interrupted")."""
    INTERRUPT.requested = False
    with contextlib.suppress(OSError):
        marker.unlink()
    if threading.current_thread() is not threading.main_thread():
        yield INTERRUPT
        return

    def handler(signum, frame):
        if INTERRUPT.requested:
            _hard_exit()
        INTERRUPT.requested = True
        logging.getLogger("ray.tune").setLevel(logging.WARNING)  # no INFO lines about saved state after the stop line
        with contextlib.suppress(OSError):
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text("interrupted by Ctrl-C\n")
        print(f"\n[{name}] Ctrl-C: stopping the sweep - running trials end and are recorded as interrupted "
              f"(press Ctrl-C again to exit at once)", file=sys.stderr, flush=True)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield INTERRUPT
    finally:
        signal.signal(signal.SIGINT, previous)
