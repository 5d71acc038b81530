"""Packed trials of the GPU check (``bench/bench_cluster.py``, part ``pack``): n copies of one PT step setting on one
GPU at once, scheduled by Ray Tune with the fractional GPU request ``ray.gpus_per_trial = 1/n`` that the sweeps make
(``ptsweep.trials.placement``): each trial caps its CUDA memory at its share, then waits at a gate (a named Ray
actor) until all n have warmed up, so their timed steps overlap. The sweep's own Ray session starts Ray
(``ptsweep.trials.ray_session``: token auth, 127.0.0.1, no dashboard).

Where Ray is not installed (a lent GPU machine may lack it), the same n trials run as spawned processes with the same
memory cap and a barrier (``cluster_measure.run_packed_processes``); each row says which packer measured it. On the
CPU (the dry mode) Ray is given no GPU, so each trial asks for 1/n of the CPUs instead.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
import time
from functools import partial
from pathlib import Path

from cluster_measure import error_row, measure, run_packed_processes

BENCH = Path(__file__).resolve().parent
GATE_WAIT_S = 120.0
"""How long a warmed-up trial waits for the others before timing alone (its row then says so)."""


class Gate:
    """Counts the trials that have finished warming up (a Ray actor)."""

    def __init__(self) -> None:
        self.arrived = 0

    def arrive(self) -> int:
        self.arrived += 1
        return self.arrived

    def count(self) -> int:
        return self.arrived


def _trial(config: dict, spec: dict, n: int, gate: str) -> None:
    """One Ray trial: cap memory at the share Ray assigned, measure with the gate between warm-up and timing, report
    the row as JSON (a failed trial reports its error row)."""
    import ray
    from ray import tune

    from ptsweep.trials.placement import assigned_gpus, cap_gpu_memory

    handle = ray.get_actor(gate)
    waited = {"alone": False}

    def wait() -> None:
        ray.get(handle.arrive.remote())
        deadline = time.time() + GATE_WAIT_S
        while ray.get(handle.count.remote()) < n:
            if time.time() > deadline:
                waited["alone"] = True
                return
            time.sleep(0.05)

    try:
        share = cap_gpu_memory(assigned_gpus()) or 1.0
        row = {**measure({**spec, "fraction": share}, wait), "timed_alone": waited["alone"]}
    except Exception as e:  # noqa: BLE001 - one failed trial, reported
        row = error_row(spec, f"{type(e).__name__}: {e}")
    tune.report({"row": json.dumps(row)})


def _ray_rows(spec: dict, n: int, timeout_s: float, gpu: bool, cpus: int) -> list[dict]:
    """n packed trials in the running Ray session (module docstring)."""
    import ray
    from ray import tune

    name = f"gpu-check-gate-{os.getpid()}-{n}"
    gate = ray.remote(num_cpus=0)(Gate).options(name=name).remote()
    need = {"cpu": max(1, cpus // n), "gpu": 1.0 / n} if gpu else {"cpu": cpus / n}
    trainable = tune.with_resources(partial(_trial, spec=spec, n=n, gate=name), need)
    tuner = tune.Tuner(trainable, param_space={"copy": tune.grid_search(list(range(n)))},
                       tune_config=tune.TuneConfig(max_concurrent_trials=n, time_budget_s=timeout_s),
                       run_config=tune.RunConfig(name=f"pack-{n}", verbose=0,
                                                 storage_path=tempfile.mkdtemp(prefix="gpu-check-ray-")))
    rows = []
    for result in tuner.fit():
        text = (result.metrics or {}).get("row")
        rows.append(json.loads(text) if text else error_row(spec, f"Ray trial: {result.error or 'no result'}"))
    ray.kill(gate)
    return rows + [error_row(spec, f"no result within {timeout_s:.0f} s")] * (n - len(rows))


def packed_rows(spec: dict, packs, timeout_s: float, on_pack) -> None:
    """For each n in ``packs``: ``on_pack(n, packer, rows)`` with the n trials' rows, measured through Ray when it is
    installed, else by spawned processes (module docstring)."""
    if importlib.util.find_spec("ray") is None:  # not imported here: ray_session turns on token auth first
        for n in packs:
            on_pack(n, "processes (Ray not installed)", run_packed_processes(spec, n, timeout_s))
        return
    from ptsweep.config import RayConfig
    from ptsweep.trials.ray_session import ray_session

    # Ray's workers import this module and cluster_measure by name: they need bench/ on their path
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(BENCH), os.environ.get("PYTHONPATH", "")) if p)
    gpu = spec["device"] == "cuda"
    cpus = os.cpu_count() or 1
    with ray_session(RayConfig(num_cpus=cpus if gpu else min(cpus, 2))):
        for n in packs:
            on_pack(n, "ray", _ray_rows(spec, n, timeout_s, gpu, cpus if gpu else min(cpus, 2)))
