"""One MLM training run: ``run(cfg, tracker) -> final metrics`` (no Hydra, no W&B imports).

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
A finished run (status ok) is evaluated once more after the loop (``_final_evaluation``): on every validation block
when ``train.eval_batches`` capped the in-loop evaluations (val_loss_subset keeps the capped number), and on the
held-out TEST split when the corpus has one (``data.max_test_blocks``): test_loss (+ _se), test_unigram_loss (+ _se),
test_gain_over_unigram (+ _se), test_tokens, test_blocks. Searches choose on validation; reports quote test.
"""

from __future__ import annotations

import glob
import hashlib
import json
import math
import os
import random
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from ptsweep import data as data_mod
from ptsweep import metrics
from ptsweep.config import ConfigError, RunConfig, flatten, to_dict
from ptsweep.models import IGNORE_INDEX, build_model, mlm_logits, mlm_loss
from ptsweep.models.sizing import flops_per_token, param_count
from ptsweep.parametrization import build_optimizer, set_lr
from ptsweep.tracking import OVERRIDES_ENV

CHECKPOINT = "checkpoint.pt"


# --------------------------------------------------------------------------------------------------------------
# Small pieces (each testable on its own)
# --------------------------------------------------------------------------------------------------------------
# Keys that do not change what a run computes: left out of the run folder's config hash and of the resume check
# (the same keys the sweeps leave out of their trial keys).
RESULT_NEUTRAL_PREFIXES = ("tracker.", "ray.", "sweep.")
RESULT_NEUTRAL_KEYS = {"out_dir", "run_name", "preset", "data.cache_dir", "data.num_proc", "train.progress",
                       "train.threads", "train.resume", "train.checkpoint", "train.checkpoint_every_s", "train.device",
                       "train.stop_after_steps", "train.log_every"}


def result_config(cfg_or_dict) -> dict:
    """The flat config (dotted keys) minus the result-neutral keys: what defines a run's numbers."""
    d = cfg_or_dict if isinstance(cfg_or_dict, dict) else to_dict(cfg_or_dict)
    return {k: v for k, v in sorted(flatten(d).items())
            if k not in RESULT_NEUTRAL_KEYS and not k.startswith(RESULT_NEUTRAL_PREFIXES)}


def config_hash(cfg: RunConfig) -> str:
    """8 hex digits of sha1 over :func:`result_config` (floats by repr): same numbers, same hash."""
    norm = {k: (repr(v) if isinstance(v, float) else v) for k, v in result_config(cfg).items()}
    return hashlib.sha1(json.dumps(norm, sort_keys=True, default=str).encode()).hexdigest()[:8]


def run_label(cfg: RunConfig) -> str:
    return cfg.run_name or f"{cfg.model.name}-w{cfg.model.width}-s{cfg.seed}"


def default_run_dir(cfg: RunConfig) -> Path:
    """<out_dir>/train/<run_name or model-w<width>-s<seed>>-<config hash>: runs that differ in any result-relevant
    key (e.g. only optim.lr) never share a folder."""
    return Path(cfg.out_dir) / "train" / f"{run_label(cfg)}-{config_hash(cfg)}"


def _differing(old: dict, new: dict, limit: int = 6) -> str:
    keys = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    parts = [f"{k}={old.get(k, '<unset>')} (now {new.get(k, '<unset>')})" for k in keys[:limit]]
    return ", ".join(parts) + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def check_resume(cfg: RunConfig, run_dir: Path, default_dir: bool) -> None:
    """``train.resume=true``: ConfigError (one line naming the differing keys) if the checkpoint to resume was
    written under another config; for a default folder without a checkpoint, the same if a sibling run of the same
    name has one (the user most likely changed a hyperparameter and expects to resume)."""
    if not cfg.train.resume:
        return
    now = result_config(cfg)
    ckpt = run_dir / CHECKPOINT
    candidates = [ckpt] if ckpt.exists() else []
    if not candidates and default_dir:
        candidates = sorted(run_dir.parent.glob(f"{glob.escape(run_label(cfg))}-*/{CHECKPOINT}"))
    best = None
    for path in candidates:
        try:
            old = result_config(torch.load(path, map_location="cpu", weights_only=False).get("config", {}))
        except Exception:  # noqa: BLE001 - an unreadable checkpoint is reported by the load itself
            continue
        diff = _differing(old, now)
        if diff and (best is None or diff.count("(now") < best[1].count("(now")):
            best = (path, diff)
    if best is not None:
        raise ConfigError(f"train.resume: {best[0]} was written under another config: {best[1]} - resume with "
                          f"those values, or drop train.resume to start a new run")


def save_config_dir(run_dir: Path, cfg: RunConfig) -> None:
    """``<run_dir>/.hydra/config.yaml`` (the composed config) and ``overrides.yaml`` (the CLI overrides as typed)."""
    import yaml

    d = run_dir / ".hydra"
    d.mkdir(parents=True, exist_ok=True)
    try:
        overrides = json.loads(os.environ.get(OVERRIDES_ENV, "[]"))
    except json.JSONDecodeError:
        overrides = []
    (d / "config.yaml").write_text(yaml.safe_dump(json.loads(json.dumps(to_dict(cfg), default=str)),
                                                  sort_keys=False))
    (d / "overrides.yaml").write_text(yaml.safe_dump([str(o) for o in overrides], sort_keys=False))


def num_steps(cfg: RunConfig) -> int:
    """ceil(train.tokens / (batch_size * seq_len))."""
    return max(1, math.ceil(cfg.train.tokens / (cfg.train.batch_size * cfg.data.seq_len)))


def lr_factor(step: int, total: int, warmup_frac: float, schedule: str, min_frac: float) -> float:
    """Schedule factor of step ``step`` (0-based) in a run of ``total`` steps (module docstring)."""
    warmup = round(warmup_frac * total)
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup - 1))
    if schedule == "cosine":
        return min_frac + (1.0 - min_frac) * 0.5 * (1.0 + math.cos(math.pi * progress))
    return 1.0 - (1.0 - min_frac) * progress  # linear


def resolve_device(spec: str) -> torch.device:
    """'auto' -> cuda if available else cpu. On the CPU, also flush denormal floats to zero: PT's saturated MFVI
    softmaxes produce denormal probabilities and gradients, which made CPU matmuls ~4x slower (bench/, 2026-11)."""
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if spec == "auto" else spec)
    if device.type == "cpu":
        torch.set_flush_denormal(True)
    return device


def autocast_context(device: torch.device, precision: str):
    """bf16 autocast on CUDA for precision auto/bf16; bf16 on CPU only when asked explicitly; else fp32."""
    if precision == "bf16" or (precision == "auto" and device.type == "cuda"):
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return nullcontext()


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: Path, payload: dict) -> None:
    """torch.save to a temporary file in the same folder, then os.replace (atomic on POSIX)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)


def _to_device(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


@torch.no_grad()
def evaluate(model, batches: list[dict], device: torch.device, precision: str,
             baseline: metrics.NoContextBaseline | None = None) -> dict[str, float]:
    """Validation metrics over every masked token of ``batches`` (``ptsweep.metrics.summarize``): val_loss with its
    block-clustered SE and, given the corpus's context-free ``baseline``, the unigram and no-context losses on the
    same tokens, the paired gains over them, and the [MASK]-target ``context_gain``."""
    was_training = model.training
    model.eval()
    losses, blocks, targets_all, inputs_all = [], [], [], []
    offset = 0
    for batch in batches:
        b = _to_device(batch, device)
        with autocast_context(device, precision):
            logits = mlm_logits(model, b["input_ids"], b["attention_mask"], b["labels"])  # (n, V)
        selected = b["labels"] != IGNORE_INDEX                                          # (B, L)
        targets = b["labels"][selected]                                                  # (n,)
        losses.append(metrics.token_losses(logits, targets).cpu())
        blocks.append(selected.nonzero()[:, 0].cpu() + offset)  # block id of each target, row-major like logits
        targets_all.append(targets.cpu())
        inputs_all.append(b["input_ids"][selected].cpu())                                # what each target showed
        offset += b["labels"].shape[0]
    model.train(was_training)
    model_losses, block, targets = torch.cat(losses), torch.cat(blocks), torch.cat(targets_all)
    if baseline is None:
        return metrics.summarize(model_losses, torch.full_like(model_losses, math.nan), block)
    inputs = torch.cat(inputs_all)
    return metrics.summarize(model_losses, baseline.unigram_losses(targets), block,
                             is_mask=inputs == baseline.mask_id,
                             no_context_losses=baseline.no_context_losses(inputs, targets))


def _final_evaluation(model, corpus, cfg: RunConfig, device, baseline, state: dict, n_eval_batches: int) -> dict:
    """After a finished run: (1) when ``train.eval_batches`` capped the in-loop evaluations, the validation metrics
    again on every validation block (the loop's cheaper subset only served ASHA / curves); (2) the held-out TEST
    split (``data.max_test_blocks``), which no search ever looks at: test_loss (+ _se), test_unigram_loss (+ _se),
    test_gain_over_unigram (+ _se), test_tokens, test_blocks. Returns the metrics to merge into the final ones."""
    tc = cfg.train
    out: dict = {}
    full = data_mod.val_batches(corpus, cfg.data, tc.batch_size)
    if len(full) > n_eval_batches:
        ev = evaluate(model, full, device, tc.precision, baseline)
        if math.isfinite(ev["val_loss"]):
            out.update(ev, val_loss_subset=state["val_loss"])
            state["val_loss"] = ev["val_loss"]
    test = data_mod.test_batches(corpus, cfg.data, tc.batch_size)
    if test:
        ev = evaluate(model, test, device, tc.precision, baseline)
        out.update({f"test_{k}".replace("test_val_", "test_"): v for k, v in ev.items()})
    return out


def micro_slices(batch_size: int, micro: int) -> list[slice]:
    """Consecutive row slices of at most ``micro`` rows covering ``batch_size`` (micro <= 0: one slice)."""
    micro = batch_size if micro <= 0 else micro
    return [slice(i, min(i + micro, batch_size)) for i in range(0, batch_size, micro)]


def accumulate_gradients(model, batch: dict, micro: int, device: torch.device, precision: str) -> torch.Tensor:
    """Forward + backward of one batch in micro-batches of ``micro`` rows (0 = all); returns the batch loss
    (detached). The loss is a token average over the labelled positions, so micro-batch m is weighted by
    n_m / n_total (its share of the targets), not 1/k: the accumulated gradient is the full batch's to float
    rounding. Micro-batches without targets are skipped. Dropout masks differ from the full-batch ones."""
    labels = batch["labels"]
    slices = micro_slices(labels.shape[0], micro)
    if len(slices) == 1:
        with autocast_context(device, precision):
            loss, _ = mlm_loss(model, batch["input_ids"], batch["attention_mask"], labels)
        loss.backward()
        return loss.detach()
    counts = [int((labels[sl] != IGNORE_INDEX).sum()) for sl in slices]
    total = sum(counts)
    acc = torch.zeros((), device=labels.device)
    for sl, n in zip(slices, counts):
        if n == 0 and total > 0:
            continue
        with autocast_context(device, precision):
            loss, _ = mlm_loss(model, batch["input_ids"][sl], batch["attention_mask"][sl], labels[sl])
        weight = n / total if total > 0 else 1.0 / len(slices)
        (loss * weight).backward()
        acc += loss.detach().float() * weight
    return acc


def largest_fitting(batch_size: int, fits: Callable[[int], bool]) -> int:
    """Largest m in [1, batch_size] with ``fits(m)`` (assumed monotone: fits(m) -> fits(m') for m' < m), by
    bisection (log2(batch_size) + 1 probes). Raises RuntimeError when not even m = 1 fits."""
    if fits(batch_size):
        return batch_size
    lo, hi = 0, batch_size  # fits(lo) (or lo = 0), not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    if lo == 0:
        raise RuntimeError("train.micro_batch_size=auto: not even one sequence fits in device memory")
    return lo


def resolve_micro_batch(setting, model, batch: dict, device: torch.device, precision: str) -> int:
    """``train.micro_batch_size`` -> rows per forward/backward. 0 -> the full batch; 'auto' -> the full batch on
    the CPU, on CUDA the largest micro-batch whose forward + backward on ``batch``'s rows runs without
    ``torch.cuda.OutOfMemoryError`` (probe steps; gradients are discarded), capped at the batch size."""
    bsz = batch["labels"].shape[0]
    if setting != "auto":
        return min(int(setting), bsz) if int(setting) > 0 else bsz
    if device.type != "cuda":
        return bsz

    def fits(m: int) -> bool:
        try:
            accumulate_gradients(model, {k: v[:m] for k, v in batch.items()}, m, device, precision)
            torch.cuda.synchronize(device)
            return True
        except torch.cuda.OutOfMemoryError:
            return False
        finally:
            model.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()

    return largest_fitting(bsz, fits)


# --------------------------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------------------------
def run(cfg: RunConfig, tracker, run_dir: Path | None = None,
        report_fn: Callable[[dict], None] | None = None) -> dict:
    """Train ``cfg`` and return the final metrics (module docstring). ``tracker``: a ``ptsweep.tracking.Tracker``
    (start/log/finish are called here). ``report_fn(metrics)`` is called after every evaluation (Ray Tune).

    An exception (from the loop or from ``report_fn``) is recorded with ``tracker.finish`` and re-raised: status
    "failed", "interrupted" (KeyboardInterrupt / SystemExit) or the exception's own ``status`` string attribute (a
    sweep's early-stop exception can carry ``status = "early_stopped"``)."""
    t_start = time.perf_counter()
    default_dir = run_dir is None
    run_dir = Path(run_dir) if run_dir is not None else default_run_dir(cfg)
    run_dir = run_dir.resolve()
    check_resume(cfg, run_dir, default_dir)  # before anything is written or recorded
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config_dir(run_dir, cfg)
    tracker.start(run_dir, to_dict(cfg), name=run_dir.name, group=cfg.tracker.group, tags=cfg.tracker.tags)
    try:
        metrics = _train(cfg, tracker, run_dir, report_fn, t_start)
    except BaseException as e:  # keep failed / interrupted runs in the record, then re-raise
        status = getattr(e, "status", None)  # e.g. a scheduler's early stop raised from report_fn
        if not isinstance(status, str):
            status = "interrupted" if isinstance(e, (KeyboardInterrupt, SystemExit)) else "failed"
        tracker.finish({"status": status, "diverged": False, "val_loss": math.inf,
                        "error": f"{type(e).__name__}: {e}".splitlines()[0][:500], "run_dir": str(run_dir)})
        raise
    tracker.finish(metrics)
    return metrics


def _train(cfg: RunConfig, tracker, run_dir: Path, report_fn, t_start: float) -> dict:
    tc, oc = cfg.train, cfg.optim
    if tc.threads > 0:
        torch.set_num_threads(tc.threads)
    device = resolve_device(tc.device)
    seed_everything(cfg.seed)

    corpus = data_mod.prepare(cfg.data)
    V = corpus.vocab_size
    model = build_model(cfg.model, V, cfg.data.seq_len).to(device)
    note = cfg.model.attention_note(device.type) if hasattr(cfg.model, "attention_note") else None
    if note:
        print(note, file=sys.stderr)
    optimizer = build_optimizer(model, model.width, model.parametrization, oc.lr, betas=oc.betas, eps=oc.eps,
                                weight_decay=oc.weight_decay)
    if tc.compile:
        model.encode = torch.compile(model.encode)  # the heavy part; the head is one matmul

    steps = num_steps(cfg)
    tokens_per_step = tc.batch_size * cfg.data.seq_len
    eval_every = tc.eval_every or max(1, steps // 10)
    val = data_mod.val_batches(corpus, cfg.data, tc.batch_size)
    if tc.eval_batches:
        val = val[: tc.eval_batches]
    baseline = metrics.NoContextBaseline.of(corpus, cfg.data)
    counts = param_count(cfg.model, V)
    static = {
        "params": int(sum(p.numel() for p in model.parameters())),
        "non_embedding_params": int(counts["non_embedding"]),
        "flops_per_token": float(flops_per_token(cfg.model, V, cfg.data.seq_len, cfg.data.mask_prob)),
        "vocab_size": int(V),
        "device": str(device),
        "run_dir": str(run_dir),
    }

    # ---- state: fresh or from the checkpoint -------------------------------------------------------------------
    ckpt_path = run_dir / CHECKPOINT
    state = {"step": 0, "history": [], "wall_s": 0.0, "val_loss": math.nan, "val_loss_init": math.nan,
             "best_val_loss": math.inf, "train_loss": math.nan, "eval": {}}
    if tc.resume and ckpt_path.exists():
        ckpt = torch.load(ckpt_path, map_location=device, weights_only=False)
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        state.update(ckpt["state"])
        set_rng_state(ckpt["rng"])
        # the tracker starts a fresh local history file: restore what was kept (W&B resumes its own run by id,
        # so nothing is replayed there)
        restore = getattr(tracker, "restore_history", None)
        for row in state["history"]:
            if restore is not None:
                restore({k: v for k, v in row.items() if k != "step"}, row["step"])
            else:
                tracker.log({k: v for k, v in row.items() if k != "step"}, row["step"])
    elif tc.resume:
        print(f"train.resume: no checkpoint in {run_dir}, starting from step 0", file=sys.stderr)
    wall_before = state["wall_s"]

    def log(row: dict, step: int) -> None:
        state["history"].append({"step": step, **row})
        tracker.log(row, step)

    def checkpoint() -> None:
        if tc.checkpoint:
            state["wall_s"] = wall_before + time.perf_counter() - t_start
            save_checkpoint(ckpt_path, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                        "state": dict(state), "rng": rng_state(), "config": to_dict(cfg)})

    def do_eval(step: int) -> float:
        ev = evaluate(model, val, device, tc.precision, baseline)
        loss = ev["val_loss"]
        state["val_loss"] = loss if math.isfinite(loss) else math.inf
        state["best_val_loss"] = min(state["best_val_loss"], state["val_loss"])
        state["eval"] = {**ev, "val_loss": state["val_loss"]}
        log({**state["eval"], "tokens": step * tokens_per_step}, step)
        return loss

    if state["step"] == 0 and math.isnan(state["val_loss_init"]):
        state["val_loss_init"] = do_eval(0)

    # ---- loop -------------------------------------------------------------------------------------------------
    model.train()
    diverged = not math.isfinite(state["val_loss_init"])
    stopped = False
    start_step = step = state["step"]
    window_sum = torch.zeros((), device=device)
    window_n = 0
    t_train = 0.0  # seconds spent in training steps (throughput excludes evaluation)
    last_ckpt = time.perf_counter()
    reported = -1  # last step given to report_fn
    micro = None  # rows per forward/backward: resolved on the first batch (train.micro_batch_size)
    bar = None
    if tc.progress:
        from tqdm import tqdm

        bar = tqdm(total=steps, initial=start_step, desc=run_dir.name, unit="step", dynamic_ncols=True,
                   file=sys.stderr, leave=False)
    try:
        while step < steps and not diverged:
            t0 = time.perf_counter()
            factor = lr_factor(step, steps, oc.warmup_frac, oc.schedule, oc.min_lr_frac)
            set_lr(optimizer, oc.lr, factor)
            b = _to_device(data_mod.train_batch(corpus, cfg.data, step, tc.batch_size, cfg.seed), device)
            if micro is None:
                micro = resolve_micro_batch(tc.micro_batch_size, model, b, device, tc.precision)
                if tc.micro_batch_size == "auto" and device.type == "cuda":
                    print(f"train.micro_batch_size=auto: {micro} of {tc.batch_size} rows per micro-batch",
                          file=sys.stderr)
            loss = accumulate_gradients(model, b, micro, device, tc.precision)
            grad_norm = (torch.nn.utils.clip_grad_norm_(model.parameters(), oc.grad_clip) if oc.grad_clip > 0
                         else None)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            window_sum += loss.detach().float()
            window_n += 1
            step += 1
            state["step"] = step
            t_train += time.perf_counter() - t0  # CUDA: asynchronous, but the log steps below synchronise

            if step % tc.log_every == 0 or step == steps:
                train_loss = float(window_sum) / window_n
                window_sum.zero_()
                window_n = 0
                state["train_loss"] = train_loss if math.isfinite(train_loss) else math.inf
                tps = (step - start_step) * tokens_per_step / max(t_train, 1e-9)
                row = {"train_loss": state["train_loss"], "tokens": step * tokens_per_step, "lr_factor": factor,
                       "tokens_per_s": tps}
                if grad_norm is not None:
                    row["grad_norm"] = float(grad_norm)
                for g in optimizer.param_groups:
                    row[f"lr/{g.get('role', 'group')}"] = g["lr"]
                log(row, step)
                if bar is not None:
                    bar.set_postfix(loss=f"{train_loss:.3f}", tok_s=f"{tps:,.0f}")
                if not math.isfinite(train_loss):
                    diverged = True
                    break
            if step % eval_every == 0 or step == steps:
                if not math.isfinite(do_eval(step)):
                    diverged = True
                if report_fn is not None:
                    report_fn({"val_loss": math.inf if diverged else state["val_loss"],
                               "val_loss_se": state["eval"].get("val_loss_se", math.nan),
                               "train_loss": state["train_loss"], "step": step, "tokens": step * tokens_per_step,
                               "diverged": diverged})
                    reported = step
            if bar is not None:
                bar.update(1)
            if tc.stop_after_steps and step - start_step >= tc.stop_after_steps and step < steps:
                stopped = True
                break
            if tc.checkpoint_every_s > 0 and time.perf_counter() - last_ckpt >= tc.checkpoint_every_s:
                checkpoint()
                last_ckpt = time.perf_counter()
    finally:
        if bar is not None:
            bar.close()

    if diverged:
        state["val_loss"] = math.inf
        if report_fn is not None and reported != step:
            report_fn({"val_loss": math.inf, "train_loss": state["train_loss"], "step": step,
                       "tokens": step * tokens_per_step, "diverged": True})
    else:
        checkpoint()  # at the end, or where stop_after_steps interrupted the run
    status = "diverged" if diverged else ("stopped" if stopped else "ok")
    if status == "ok":
        state["eval"].update(_final_evaluation(model, corpus, cfg, device, baseline, state, len(val)))
    return {
        **state["eval"],
        "val_loss": state["val_loss"],  # the full validation set when the run finished (see _final_evaluation)
        "val_loss_init": state["val_loss_init"],
        "best_val_loss": state["best_val_loss"],
        "train_loss": state["train_loss"],
        "diverged": diverged,
        "status": status,
        "steps": step,
        "tokens": step * tokens_per_step,
        "tokens_per_s": (step - start_step) * tokens_per_step / max(t_train, 1e-9),
        **static,
        "wall_s": wall_before + time.perf_counter() - t_start,
        "history": state["history"],
    }
