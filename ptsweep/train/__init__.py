"""One MLM training run: ``run(cfg, tracker) -> final metrics`` (no Hydra, no W&B imports).

Modules: ``loop`` (``run``: set-up, the step loop, the final metrics), ``step`` (LR schedule, micro-batches with
exact gradient accumulation, evaluation; the schedule's formulas), ``state`` (device, precision, TF32, compile, RNG,
checkpoints, resume check, run folders), ``prefetch`` (the next batch built on a background thread), ``monitor``
(the probes of ``train.probes``: update sizes per muP role, PT's message sizes at each evaluation from
``message_stats``; peak GPU memory, MFU). One AdamW step per batch of ``train.batch_size`` blocks: group lr =
factor(step) * optim.lr * group["lr_mult"] (``parametrization.set_lr``), loss ``models.mlm_loss``, global grad
norm clipped at ``optim.grad_clip``. Precision: bf16 autocast on CUDA (``train.precision=auto``), fp32 on CPU; on CUDA
TF32 for the fp32 matmuls (``train.tf32``) and the fused AdamW kernel (foreach on the CPU).

Evaluation every ``train.eval_every`` steps (0 = 10 per run) on the fixed-mask validation batches, every masked
token counted once (``ptsweep.metrics``: block-clustered SEs, the unigram baseline on the same tokens); one before
the first step gives ``val_loss_init``. With the probe 'message_stats' each evaluation row also holds PT's message
sizes (``msg/*``, ``msg_mean/*``). A non-finite training (at log steps) or validation loss ends
the run with ``diverged=True``, ``val_loss=inf``, ``status="diverged"``, no exception.

``<run_dir>/checkpoint.pt`` (model, optimizer, next step, RNG states, history) is written every
``train.checkpoint_every_s`` seconds, at ``train.stop_after_steps`` and at the end; ``train.resume=true`` continues
from it and reproduces an uninterrupted run (batches are a pure function of (seed, step)), and refuses a checkpoint
of another config (``state.check_resume``).

Log rows of the log steps: train_loss, tokens, lr_factor, tokens_per_s, grad_norm, lr/<role>, mfu and
gpu_peak_mem_gib (where the device has them), the probes' metrics (the probe 'update_sizes': update_rms/<role>,
param_rms/<role>) and, for a model with auxiliary loss terms (a variant of PT's), aux/<name>: the window means of the
weighted terms that the gradient includes and train_loss (the MLM loss alone) does not.

Final metrics (also ``tracker.finish``): the last evaluation's metrics (``ptsweep.metrics.summarize``),
val_loss_init, best_val_loss, train_loss (last log window), diverged, status (ok | diverged | stopped), steps,
start_step (the step a resumed run continued from; 0 for a fresh one), tokens, tokens_per_s, mfu and
gpu_peak_mem_gib (None on the CPU), params, non_embedding_params, flops_per_token, wall_s, device, device_name,
tf32, compile, adamw (fused | foreach), micro_batch_size (rows per forward/backward), run_dir, vocab_size, history.
A finished run is evaluated once more (``step.final_evaluation``): on every validation block when
``train.eval_batches`` capped the in-loop ones (val_loss_subset keeps the capped number), and on the held-out TEST
split (test_* metrics). Searches choose on validation; reports quote test. Runs that raise are recorded with status
failed | interrupted | <exception.status> (``run``).
"""

from ptsweep.train.loop import run
from ptsweep.train.state import CHECKPOINT, default_run_dir, resolve_device, save_checkpoint, seed_everything
from ptsweep.train.step import (accumulate_gradients, choose_micro_batch, evaluate, largest_fitting, lr_factor,
                                micro_slices, num_steps, optimizer_state_allocated, resolve_micro_batch)

__all__ = ["run", "CHECKPOINT", "default_run_dir", "resolve_device", "save_checkpoint", "seed_everything",
           "accumulate_gradients", "choose_micro_batch", "evaluate", "largest_fitting", "lr_factor", "micro_slices",
           "num_steps", "optimizer_state_allocated", "resolve_micro_batch"]
