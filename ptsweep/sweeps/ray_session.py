"""The Ray session of a sweep: token authentication always on, one-line errors, and Ctrl-C that stops cleanly.

Security (measured on Ray 2.60, 2026-11): a local ``ray.init`` cannot be bound to the loopback interface. Ray turns
``_node_ip_address="127.0.0.1"`` into the machine's routable address (``services.resolve_ip_for_localhost``); the GCS,
the raylet and every worker listen on ``[::]`` and the runtime-env agent on the node address. What keeps other
machines out is Ray's token authentication: with ``RAY_AUTH_MODE=token`` every gRPC server and the agents' HTTP
servers refuse a request without the cluster token (a client with a wrong token gets "Failed to connect"; the agent
answers HTTP 401). So ptsweep

- never starts or joins Ray with authentication disabled: a ``RAY_AUTH_MODE`` set to "disabled" is refused with one line;
- sets ``RAY_AUTH_MODE=token`` (a local ``ray.init`` then generates ``~/.ray/auth_token``; Ray writes it 0644, ptsweep
  makes it 0600 so other users of a shared machine cannot read it);
- starts the dashboard off (``include_dashboard=False``) and asks for the loopback address anyway.

Errors: no Ray installed, an unreachable ``RAY_ADDRESS`` / ``ray.address`` (a TCP probe with a 5 s timeout, then a
connection from a child process with a 30 s deadline: an in-process ``ray.init`` waits without end on a port that is
no Ray head), a missing token, or a Ray imported before token auth was on each give one ``SweepError`` line.

Stopping (one line, the resume command, status 130 / 143, no native dumps):

- Ctrl-C (``interrupt_guard``, during ``tuner.fit``): the first SIGINT asks Tune to stop (a ``Stopper`` whose
  ``stop_all`` turns true): the running trials end, Ray saves the experiment, ``tuner.fit`` returns and the sweep
  raises :class:`SweepInterrupted` (a KeyboardInterrupt: the CLI prints the command that resumes it, status 130). The
  second SIGINT kills the local Ray and exits at once (status 130). Outside ``tuner.fit`` a SIGINT is Python's
  KeyboardInterrupt (same line, same status).
- SIGTERM (``install_sigterm_handler``, from the CLI's start and again after ``ray.init``, which installs its own
  ``sys.exit`` handler): a supervisor (``kill``, ``timeout``, systemd, docker stop) wants the process gone within
  seconds, so it never waits for Tune: one line with the resume command, every process this driver started (the
  local Ray, trial workers) is killed, exit status 143. Finished trials are in the ledger; the trials that were
  running have no record and run again on resume (from their checkpoint where one exists), and an Optuna trial left
  RUNNING is re-queued (``search._reconcile``).
- Ray's core installs absl's failure-signal handler in the driver and every worker; on SIGTERM it prints a stack
  dump per process (screens of ``*** SIGTERM received`` when a terminal or supervisor signals the whole process
  group). ``ray_session`` sets ``RAY_DISABLE_FAILURE_SIGNAL_HANDLER=1`` before Ray starts (a user who wants Ray's
  native crash dumps back sets it to 0).
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
from pathlib import Path

from ptsweep.errors import SweepError

AUTH_ENV = "RAY_AUTH_MODE"
PROBE_TIMEOUT_S = float(os.environ.get("PTSWEEP_RAY_PROBE_TIMEOUT_S", "30"))
"""Deadline of the probe that joins a cluster from a child process first (Ray's import and connect take ~5-10 s);
``PTSWEEP_RAY_PROBE_TIMEOUT_S`` sets another."""
TOKEN_PATH = Path.home() / ".ray" / "auth_token"


RESUME = {"command": "", "kept": "finished trials are kept"}
"""The command line that resumes the current command and what a stop keeps (set by the CLI; printed by every stop)."""

EXIT_STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}
SIGNAL_NAME = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


def stop_line(signum: int, detail: str = "") -> str:
    """The one line every stop prints: what stopped it and the command that resumes it."""
    what = SIGNAL_NAME.get(signum, f"signal {signum}")
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
    """Token authentication on before Ray reads its config: RAY_AUTH_MODE unset -> token, any other mode refused.
    Ray reads the mode once, when imported, so a Ray imported earlier without it is refused too (one line each)."""
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
    """One-line SweepError unless ``host:port`` accepts a TCP connection within ``timeout`` s ('auto': skipped)."""
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
    # Something listens: connect to it as Ray would, in a child process with a deadline (in this process ray.init
    # waits without end on a port that is not a Ray head, and prints a C++ retry line every 5 s)
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
    try:
        if address:
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=True)
        else:
            ray.init(num_cpus=ray_cfg.num_cpus or None, object_store_memory=ray_cfg.object_store_memory or None,
                     include_dashboard=False, _node_ip_address="127.0.0.1", ignore_reinit_error=True,
                     log_to_driver=True)
    except (ConnectionError, RuntimeError, ValueError) as e:
        hint = (" - this cluster uses token auth: put its token in RAY_AUTH_TOKEN (or ~/.ray/auth_token; "
                "`ray get-auth-token` on the head prints it)") if "auth" in str(e).lower() or address else ""
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise SweepError(f"Ray could not start/connect{f' to {address}' if address else ''}: {msg}{hint}") from None
    protect_token_file()


@contextlib.contextmanager
def ray_session(ray_cfg):
    """Connect to / start Ray for the duration of a sweep.

    - Ray already initialised (e.g. a test fixture, or the demo chaining sweeps): reuse it, leave it running.
    - ``ray.address`` or ``$RAY_ADDRESS`` set: join that cluster (its token in RAY_AUTH_TOKEN or ~/.ray/auth_token).
    - Otherwise: a local Ray with token auth, no dashboard, ``num_cpus`` / ``object_store_memory`` from the config;
      shut down on exit.
    Ray's native failure-signal dumps are off (module docstring) and SIGTERM keeps ptsweep's handler.
    """
    # read by Ray's core worker when it starts (driver and workers inherit it): no absl stack dumps on SIGTERM
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    # ... and a worker's child processes (a trial's wandb-core) are not killed as the worker exits, before its exit
    # hooks ran: the trial's W&B run is finished by its tracker's exit hook (tracking.WandbTracker), not cut off
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
    # Trial workers inherit the environment; the repo root on PYTHONPATH lets them import ptsweep even when it is
    # not installed (local clusters and nodes of this machine; a remote node needs ptsweep installed).
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


# --------------------------------------------------------------------------------------------------------------
# Ctrl-C
# --------------------------------------------------------------------------------------------------------------
class _Interrupt:
    """State of the Ctrl-C handler during ``tuner.fit`` (read by the stopper and the searcher)."""

    def __init__(self) -> None:
        self.requested = False


INTERRUPT = _Interrupt()


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
    """Kill every process this driver started (its descendants: the local Ray, trial workers) and exit now with
    128 + signum, after one line. A cluster joined with RAY_ADDRESS is not touched (its processes are not our
    descendants). SIGKILL: the killed processes print nothing."""
    with contextlib.suppress(Exception):
        sys.stderr.write("\n" + stop_line(signum, detail) + "\n")
        sys.stderr.flush()
    for pid in _descendants(os.getpid()):  # collected first: killing the raylet re-parents its agents
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    os._exit(EXIT_STATUS.get(signum, 128 + int(signum)))


def silence_worker_output() -> None:
    """Send this trial worker's stdout and stderr to /dev/null (a worker whose trial was stopped by Ctrl-C). What
    it would print from here on is teardown noise: Tune ends a stopped trial's actor without waiting for its thread,
    so W&B's exit hook prints a ConnectionResetError traceback per running trial; the trial's own record is
    ``interrupted.json``. Each trial runs in its own actor process, so no other trial's output is lost."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.close(devnull)


def _drop_worker_exit_noise(hook_args) -> None:
    """``sys.unraisablehook`` of a trial worker: Ray ends a finished trial's actor with SIGTERM, and its worker
    handler raises ``SystemExit``; landing in a weakref callback it is "ignored" and printed as a traceback on the
    driver's stderr after a trial that finished fine. Drop exactly that; print every other unraisable exception."""
    if hook_args.exc_type is SystemExit:
        return
    sys.__unraisablehook__(hook_args)


def quiet_worker_exit() -> None:
    """Install :func:`_drop_worker_exit_noise` (called at the start of every trial, in its worker)."""
    sys.unraisablehook = _drop_worker_exit_noise


def _on_sigterm(signum, frame) -> None:
    _hard_exit(signal.SIGTERM, "running trials start again on resume, from their last checkpoint")


def install_sigterm_handler() -> None:
    """SIGTERM -> one line with the resume command, the local Ray killed, exit 143 (module docstring). Main thread
    only (elsewhere a no-op)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)


@contextlib.contextmanager
def interrupt_guard(name: str, marker: Path | None = None):
    """Install the two-stage Ctrl-C handler around ``tuner.fit`` (main thread only; elsewhere a no-op). The first
    Ctrl-C also creates ``marker`` (the study's ``.interrupted`` file: trials stopped now record "interrupted")."""
    INTERRUPT.requested = False
    if marker is not None:
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
        if marker is not None:
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
