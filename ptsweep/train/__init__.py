"""One MLM training run: ``run(cfg, tracker) -> final metrics`` (no Hydra, no W&B imports).

Modules: ``loop`` (``run``: set-up, the step loop, the final metrics), ``step`` (LR schedule, micro-batches and
gradient accumulation, evaluation), ``state`` (device, precision, RNG, checkpoints, resume check, run folders).

Loop (one optimizer step per batch of ``train.batch_size`` blocks of ``data.seq_len`` tokens, in micro-batches of
``train.micro_batch_size`` blocks with exact gradient accumulation, ``accumulate_gradients``):

    steps      = ceil(train.tokens / (batch_size * seq_len))
    factor(s)  = (s + 1) / warmup            for s < warmup = round(optim.warmup_frac * steps)
               = linear | cosine decay from 1 to optim.min_lr_frac over the remaining steps (constant: 1)
    group lr   = optim.lr * factor(s) * group["lr_mult"]      (parametrization.set_lr: never an absolute LR)
    loss       = models.mlm_loss (cross-entropy at the masked positions only)
    update     = backward -> clip global grad norm (optim.grad_clip) -> AdamW step

Precision: bf16 autocast on CUDA (``train.precision=auto``), fp32 on CPU. Evaluation: every ``train.eval_every``
steps (0 = 10 evaluations per run), on the fixed-mask validation batches (``data.val_batches``), loss averaged over
every masked token counted once (``evaluate``, ``ptsweep.metrics``: standard errors clustered over blocks, and the
unigram baseline on the same tokens); one evaluation before the first step gives ``val_loss_init``.

Divergence: a non-finite training loss (checked at every log step, where the loss is read back anyway) or a
non-finite validation loss ends the run with ``diverged=True``, ``val_loss=inf``, ``status="diverged"``; no exception.

Checkpoints and resume: ``<run_dir>/checkpoint.pt`` holds model, optimizer, the next step, the RNG states (torch CPU
and CUDA, numpy, random), the metric history and counters. It is written every ``train.checkpoint_every_s`` seconds,
when ``train.stop_after_steps`` interrupts the run, and at the end; always via a temporary file + ``os.replace``.
``train.resume=true`` loads it and continues: batches are a pure function of (seed, step) (``data.train_batch``) and
the RNG state is restored, so a resumed run reproduces an uninterrupted one (to float rounding on CPU).

Run folders: ``<out_dir>/train/<run_name or model-w<width>-s<seed>>-<hash>``, the hash over every key that changes
the numbers (``result_config``: not tracker, Ray, sweep, progress, resume, checkpointing, device), so two runs that
differ only in ``optim.lr`` never share a folder. ``train.resume=true`` refuses (ConfigError, one line naming the
differing keys) a checkpoint written under another config - also when the folder of this config has no checkpoint
but a sibling run of the same name has one. ``<run_dir>/.hydra/`` holds the composed config and the CLI overrides.

Final metrics (also ``tracker.finish``): val_loss, val_loss_se, unigram_loss(_se), gain_over_unigram(_se) (paired:
unigram - model), val_tokens, val_blocks (last evaluation, ``ptsweep.metrics.summarize``), val_loss_init,
best_val_loss, train_loss (mean over the last log
window), diverged, status (ok | diverged | stopped), steps, tokens, tokens_per_s (training throughput of
this process), params (counted on the model), non_embedding_params, flops_per_token (analytic, models.sizing),
wall_s (all sessions of the run), device, run_dir, vocab_size, and history (the logged rows; kept out of the
results table). Runs that raise are recorded with status failed | interrupted | <exception.status> (see ``run``).
A finished run (status ok) is evaluated once more after the loop (``step.final_evaluation``): on every validation block
when ``train.eval_batches`` capped the in-loop evaluations (val_loss_subset keeps the capped number), and on the
held-out TEST split when the corpus has one (``data.max_test_blocks``): test_loss (+ _se), test_unigram_loss (+ _se),
test_gain_over_unigram (+ _se), test_tokens, test_blocks. Searches choose on validation; reports quote test.
"""

from ptsweep.train.loop import run
from ptsweep.train.state import (
    CHECKPOINT,
    default_run_dir,
    resolve_device,
    save_checkpoint,
    seed_everything,
)
from ptsweep.train.step import (
    accumulate_gradients,
    evaluate,
    largest_fitting,
    lr_factor,
    micro_slices,
    num_steps,
    resolve_micro_batch,
)

__all__ = [
    "run",
    "CHECKPOINT",
    "default_run_dir",
    "resolve_device",
    "save_checkpoint",
    "seed_everything",
    "accumulate_gradients",
    "evaluate",
    "largest_fitting",
    "lr_factor",
    "micro_slices",
    "num_steps",
    "resolve_micro_batch",
]
