"""One MLM training run: ``run(cfg, tracker) -> final metrics`` (no Hydra, no W&B imports; docs/contracts.md).

Modules: ``loop`` (``run``: set-up, the step loop, the final metrics), ``step`` (LR schedule, micro-batches with
exact gradient accumulation, evaluation), ``state`` (device, precision, compile, RNG, checkpoints, resume check, run
folders), ``prefetch`` (batches built on a background thread), ``monitor`` (the probes of ``train.probes``, peak GPU
memory, MFU) and ``message_stats`` (PT's message sizes). A non-finite loss ends a run with ``status="diverged"``;
``train.resume=true`` continues from ``<run_dir>/checkpoint.pt`` as an uninterrupted run would.
"""

from ptsweep.train.loop import run
from ptsweep.train.state import CHECKPOINT, default_run_dir, resolve_device, save_checkpoint, seed_everything
from ptsweep.train.step import (accumulate_gradients, choose_micro_batch, evaluate, largest_fitting, lr_factor,
                                micro_slices, num_steps, optimizer_state_allocated, resolve_micro_batch)

__all__ = ["run", "CHECKPOINT", "default_run_dir", "resolve_device", "save_checkpoint", "seed_everything",
           "accumulate_gradients", "choose_micro_batch", "evaluate", "largest_fitting", "lr_factor", "micro_slices",
           "num_steps", "optimizer_state_allocated", "resolve_micro_batch"]
