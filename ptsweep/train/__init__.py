"""One MLM training run: ``run(cfg, tracker) -> final metrics`` (no Hydra, no W&B imports).

Modules: ``loop`` (``run``: set-up, the step loop, the final metrics), ``step`` (LR schedule, micro-batches with
exact gradient accumulation, evaluation), ``state`` (device, precision, compile, RNG, checkpoints, resume check, run
folders), ``prefetch`` (the next batch built on a background thread), ``monitor`` (the probes of ``train.probes``,
peak GPU memory, MFU) and ``message_stats`` (PT's message sizes).

One AdamW step per batch of ``train.batch_size`` blocks, group lr = factor(step) * optim.lr * group["lr_mult"]
(``parametrization.set_lr``); bf16 autocast on CUDA, fp32 on CPU. Evaluations on the fixed-mask validation batches
(``ptsweep.metrics``); a non-finite loss ends the run with ``status="diverged"``, no exception. The checkpoint
(``<run_dir>/checkpoint.pt``) lets ``train.resume=true`` reproduce an uninterrupted run. A finished run is evaluated
once more on every validation block and on the held-out TEST split (test_* metrics). The final metrics are
``loop._final_metrics``'s (docs/contracts.md).
"""

from ptsweep.train.loop import run
from ptsweep.train.state import CHECKPOINT, default_run_dir, resolve_device, save_checkpoint, seed_everything
from ptsweep.train.step import (accumulate_gradients, choose_micro_batch, evaluate, largest_fitting, lr_factor,
                                micro_slices, num_steps, optimizer_state_allocated, resolve_micro_batch)

__all__ = ["run", "CHECKPOINT", "default_run_dir", "resolve_device", "save_checkpoint", "seed_everything",
           "accumulate_gradients", "choose_micro_batch", "evaluate", "largest_fitting", "lr_factor", "micro_slices",
           "num_steps", "optimizer_state_allocated", "resolve_micro_batch"]
