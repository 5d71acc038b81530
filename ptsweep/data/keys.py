"""What keeps the on-disk data caches correct: FORMAT_VERSION and the sha1 keys that name every cache entry, and the
file lock under which an entry is built (so concurrent processes and Ray trials never build one twice)."""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any, Iterator

from filelock import FileLock

FORMAT_VERSION = 1  # bump when the split/packing rule changes: it is part of every cache key


def sha_key(*parts: Any) -> str:
    """The sha1 hex digest of ``parts`` (JSON, sorted keys): the corpus identities and cache keys."""
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold ``<path>.lock`` (creating the parent folder) while a cache entry at ``path`` is checked or built."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        yield
