"""Training batches built one step ahead on a background thread (``train.prefetch``).

Batch ``s`` is :func:`ptsweep.data.train_batch` of (seed, s), a pure function of its arguments, so building it
early on another thread gives the same tensors bit for bit, also after a resume (the prefetcher starts at the
resumed step). The numpy masking releases the GIL for most of its work, so it overlaps the previous step's GPU
work. On CUDA the tensors are copied into pinned (page-locked) host memory on that thread, so the training
thread's ``to(device, non_blocking=True)`` is a real asynchronous copy; on the CPU pinning would only cost time.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable

_DONE = object()  # sentinel after the last step


class BatchPrefetcher:
    """Iterates ``(step, batch)`` for step in [start, stop): ``make(step)`` runs on one daemon thread, at most
    ``depth`` batches ahead of the consumer. An exception raised by ``make`` is re-raised in the consumer at the
    step it belongs to. Use as a context manager (or call :meth:`close`) so the thread ends with the loop."""

    def __init__(self, make: Callable[[int], dict], start: int, stop: int, pin: bool = False, depth: int = 1):
        if depth < 1:
            raise ValueError(f"prefetch depth must be >= 1, got {depth}")
        self._make, self._pin = make, pin
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._next = start
        self._thread = threading.Thread(target=self._produce, args=(start, stop), name="batch-prefetch",
                                        daemon=True)
        self._thread.start()

    def _produce(self, start: int, stop: int) -> None:
        for step in range(start, stop):
            try:
                batch = self._make(step)
                if self._pin:
                    batch = {k: v.pin_memory() for k, v in batch.items()}
                item = (step, batch)
            except BaseException as e:  # noqa: BLE001 - handed to the consumer, which re-raises it
                item = (step, e)
            if not self._put(item) or isinstance(item[1], BaseException):
                return
        self._put((stop, _DONE))

    def _put(self, item) -> bool:
        """Wait for room in the queue; False once the consumer has closed the prefetcher."""
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def get(self, step: int) -> dict:
        """The batch of ``step``, which must be the next one in order (the loop never skips a step)."""
        if step != self._next:
            raise RuntimeError(f"prefetcher: asked for step {step}, next prepared step is {self._next}")
        got, batch = self._queue.get()
        if batch is _DONE:
            raise RuntimeError(f"prefetcher: step {step} is past the last step {got - 1}")
        if isinstance(batch, BaseException):
            raise batch
        if got != step:
            raise RuntimeError(f"prefetcher: built step {got} where step {step} was due")
        self._next = got + 1
        return batch

    def close(self) -> None:
        """Stop the thread (it may be blocked on a full queue) and wait for it."""
        self._stop.set()
        self._thread.join(timeout=30)

    def __enter__(self) -> "BatchPrefetcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

