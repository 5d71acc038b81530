"""Training batches built ahead on a background thread (``train.prefetch``).

Batch ``s`` is :func:`ptsweep.data.train_batch` of (seed, s), a pure function, so building it early on another
thread gives the same tensors bit for bit, also after a resume. On CUDA the tensors are pinned on that thread, so the
training thread's ``to(device, non_blocking=True)`` is an asynchronous copy.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Callable


class BatchPrefetcher:
    """``get(step)`` for step in [start, stop), in order; ``make(step)`` runs on one worker thread, at most ``depth``
    steps ahead of the consumer. An exception raised by ``make`` is re-raised by the ``get`` of its step. Use as a
    context manager (or call :meth:`close`) so the thread ends with the loop."""

    def __init__(self, make: Callable[[int], dict], start: int, stop: int, pin: bool = False, depth: int = 2):
        if depth < 1:
            raise ValueError(f"prefetch depth must be >= 1, got {depth}")
        self._make, self._pin, self._stop = make, pin, stop
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batch-prefetch")
        self._next = self._ahead = start
        self._pending: deque = deque()
        for _ in range(depth):
            self._submit()

    def _build(self, step: int) -> dict:
        batch = self._make(step)
        return {k: v.pin_memory() for k, v in batch.items()} if self._pin else batch

    def _submit(self) -> None:
        if self._ahead < self._stop:
            self._pending.append(self._pool.submit(self._build, self._ahead))
            self._ahead += 1

    def get(self, step: int) -> dict:
        """The batch of ``step``, which must be the next one in order (the loop never skips a step)."""
        if step != self._next:
            raise RuntimeError(f"prefetcher: asked for step {step}, next prepared step is {self._next}")
        if not self._pending:
            raise RuntimeError(f"prefetcher: step {step} is past the last step {self._stop - 1}")
        batch = self._pending.popleft().result()
        self._next += 1
        self._submit()
        return batch

    def close(self) -> None:
        """Cancel the batches not started yet and wait for the one being built."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "BatchPrefetcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
