"""The training run: ``run`` records it around ``_train``, a short sequence of named steps - set up (device, data,
model, optimizer, fresh or resumed state), the initial evaluation, the step loop (optimizer step, log, evaluate and
report, stop, checkpoint) and the final metrics. What each step computes: ``ptsweep.train``'s docstring."""

from __future__ import annotations

import contextlib
import functools
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch
from tqdm import tqdm

from ptsweep import data as data_mod
from ptsweep import metrics
from ptsweep.config import RunConfig, to_dict
from ptsweep.models import build_model
from ptsweep.models.sizing import flops_per_token, param_count
from ptsweep.parametrization import build_optimizer, set_lr
from ptsweep.train import monitor
from ptsweep.train.prefetch import BatchPrefetcher
from ptsweep.train.state import (check_resume, compile_encoder, default_run_dir, initial_state, resolve_device,
                                 save_config_dir, seed_everything, set_tf32, uses_bf16, write_checkpoint)
from ptsweep.train.step import (accumulate_gradients, evaluate, final_evaluation, lr_factor, num_steps,
                                resolve_micro_batch, to_device)


def run(cfg: RunConfig, tracker, run_dir: Path | None = None,
        report_fn: Callable[[dict], None] | None = None, probes: Sequence[Callable] = ()) -> dict:
    """Train ``cfg`` and return the final metrics; ``report_fn(metrics)`` is called after every evaluation (Ray
    Tune). ``probes``: probe factories beside ``train.probes`` (``monitor.build_probes``). An exception is recorded
    with ``tracker.finish`` and re-raised: status "failed", "interrupted" or the exception's own ``status``."""
    t_start = time.perf_counter()
    default_dir = run_dir is None
    run_dir = (default_run_dir(cfg) if default_dir else Path(run_dir)).resolve()
    check_resume(cfg, run_dir, default_dir)  # before anything is written or recorded
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config_dir(run_dir, cfg)
    tracker.start(run_dir, to_dict(cfg), name=run_dir.name, group=cfg.tracker.group, tags=cfg.tracker.tags)
    try:
        metrics = _train(cfg, tracker, run_dir, report_fn, t_start, probes)
    except BaseException as e:  # keep failed / interrupted runs in the record, then re-raise
        status = getattr(e, "status", None)  # e.g. a scheduler's early stop raised from report_fn
        if not isinstance(status, str):
            status = "interrupted" if isinstance(e, (KeyboardInterrupt, SystemExit)) else "failed"
        tracker.finish({"status": status, "diverged": False, "val_loss": math.inf,
                        "error": f"{type(e).__name__}: {e}".splitlines()[0][:500], "run_dir": str(run_dir)})
        raise
    tracker.finish(metrics)
    return metrics


def _train(cfg: RunConfig, tracker, run_dir: Path, report_fn, t_start: float, probes: Sequence[Callable]) -> dict:
    """Set up, evaluate once before the first step (not when resuming), run the steps, return the final metrics."""
    r = _setup(cfg, tracker, run_dir, t_start, probes)
    if r.state["step"] == 0 and math.isnan(r.state["val_loss_init"]):
        r.state["val_loss_init"] = r.validate(0)
    end = _step_loop(r, report_fn)
    return _final_metrics(r, end, report_fn)


@dataclass
class _Run:
    """One run's model, optimizer, data and counters (``state``: step, history, losses; what a checkpoint keeps)."""

    cfg: RunConfig
    tracker: object
    run_dir: Path
    t_start: float
    device: torch.device
    corpus: object
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    val: list
    baseline: metrics.NoContextBaseline
    static: dict
    state: dict
    steps: int
    tokens_per_step: int
    wall_before: float
    probes: list | None = None  # train.probes (``monitor.build_probes``)
    peak: float | None = None  # the device's peak FLOP/s at the run's precision (None: unknown)
    micro: int | None = None  # rows per forward/backward: resolved on the first batch (train.micro_batch_size)
    batches: BatchPrefetcher | None = None  # train.prefetch: the step loop's batches, one step ahead
    sizes: dict | None = None  # the probes' metrics of the last log step

    def batch(self, step: int) -> dict:
        """Training batch ``step`` (``data.train_batch``; from the prefetch thread with ``train.prefetch``)."""
        if self.batches is not None:
            return self.batches.get(step)
        return data_mod.train_batch(self.corpus, self.cfg.data, step, self.cfg.train.batch_size, self.cfg.seed)

    def log(self, row: dict, step: int) -> None:
        self.state["history"].append({"step": step, **row})
        self.tracker.log(row, step)

    def checkpoint(self) -> None:
        if self.cfg.train.checkpoint:
            self.state["wall_s"] = self.wall_before + time.perf_counter() - self.t_start
            write_checkpoint(self.run_dir, self.cfg, self.model, self.optimizer, self.state)

    def validate(self, step: int) -> float:
        """Validation metrics at ``step`` into ``state`` and the log; returns the raw val_loss (maybe non-finite)."""
        state = self.state
        ev = evaluate(self.model, self.val, self.device, self.cfg.train.precision, self.baseline)
        loss = ev["val_loss"]
        state["val_loss"] = loss if math.isfinite(loss) else math.inf
        state["best_val_loss"] = min(state["best_val_loss"], state["val_loss"])
        state["eval"] = {**ev, "val_loss": state["val_loss"], "val_step": step}  # val_step: when it was measured
        sizes = {k: v for p in self.probes for k, v in p.on_evaluation().items()}
        self.log({**state["eval"], "tokens": step * self.tokens_per_step, **sizes}, step)
        return loss


def _setup(cfg: RunConfig, tracker, run_dir: Path, t_start: float, probes: Sequence[Callable] = ()) -> _Run:
    """Threads, device and seeds; corpus, model, optimizer; validation batches and baselines; the static metrics;
    the state, fresh or from the checkpoint (``train.resume``)."""
    tc, oc = cfg.train, cfg.optim
    if tc.threads > 0:
        torch.set_num_threads(tc.threads)
    device = resolve_device(tc.device)
    seed_everything(cfg.seed)

    corpus = data_mod.prepare(cfg.data)
    V = corpus.vocab_size
    model = build_model(cfg.model, V, cfg.data.seq_len).to(device)
    optimizer = build_optimizer(model, model.width, model.parametrization, oc.lr, betas=oc.betas, eps=oc.eps,
                                weight_decay=oc.weight_decay, device_type=device.type)
    compile_encoder(model, tc.compile_mode, device)
    tf32 = set_tf32(device, tc.tf32)

    val = data_mod.val_batches(corpus, cfg.data, tc.batch_size)[: tc.eval_batches or None]
    baseline = metrics.NoContextBaseline.of(corpus, cfg.data)
    counts = param_count(cfg.model, V)
    static = {
        "params": int(sum(p.numel() for p in model.parameters())),
        "non_embedding_params": int(counts["non_embedding"]),
        "flops_per_token": float(flops_per_token(cfg.model, V, cfg.data.seq_len, cfg.data.mask_prob)),
        "vocab_size": int(V),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # ATen's CPU kernel set: CPU numbers depend on it
        "run_dir": str(run_dir),
        "tf32": tf32,
        "compile": tc.compile_mode,
        "adamw": "fused" if device.type == "cuda" else "foreach",
    }
    precision = monitor.matmul_precision(device, uses_bf16(device, tc.precision))
    state = initial_state(cfg, run_dir, model, optimizer, tracker, device)
    return _Run(cfg=cfg, tracker=tracker, run_dir=run_dir, t_start=t_start, device=device, corpus=corpus,
                model=model, optimizer=optimizer, val=val, baseline=baseline, static=static, state=state,
                steps=num_steps(cfg), tokens_per_step=tc.batch_size * cfg.data.seq_len, wall_before=state["wall_s"],
                probes=monitor.build_probes(tc.probes, model, optimizer, val, device, probes),
                peak=monitor.peak_flops(static["device_name"], precision))


@dataclass
class _LoopEnd:
    """Where the step loop ended."""

    step: int
    start_step: int
    t_train: float  # seconds spent in training steps (throughput excludes evaluation)
    diverged: bool
    stopped: bool
    reported: int  # last step given to report_fn


def _step_loop(r: _Run, report_fn) -> _LoopEnd:
    """Optimizer steps from ``state["step"]`` to the end: log (a non-finite training loss ends the run as diverged),
    evaluate and report, stop after ``train.stop_after_steps``, checkpoint every ``train.checkpoint_every_s``."""
    tc = r.cfg.train
    eval_every = tc.eval_every or max(1, r.steps // 10)
    r.model.train()
    diverged = not math.isfinite(r.state["val_loss_init"])
    stopped = False
    start_step = step = r.state["step"]
    window_sum = torch.zeros((), device=r.device)
    window_terms: dict = {}  # the model's auxiliary loss terms, summed over the window like the loss
    window_n = 0
    t_train = 0.0
    last_ckpt = time.perf_counter()
    reported = -1
    make = functools.partial(data_mod.train_batch, r.corpus, r.cfg.data, batch_size=tc.batch_size, seed=r.cfg.seed)
    with tqdm(total=r.steps, initial=start_step, desc=r.run_dir.name, unit="step", dynamic_ncols=True,
              file=sys.stderr, leave=False, disable=not tc.progress) as bar, \
            (BatchPrefetcher(make, start_step, r.steps, pin=r.device.type == "cuda") if tc.prefetch
             else contextlib.nullcontext()) as r.batches:
        while step < r.steps and not diverged:
            t0 = time.perf_counter()
            log_step = (step + 1) % tc.log_every == 0 or step + 1 == r.steps
            loss, grad_norm, factor = _optimizer_step(r, step, log_step, window_terms)
            window_sum += loss.detach().float()
            window_n += 1
            step += 1
            r.state["step"] = step
            t_train += time.perf_counter() - t0  # CUDA: asynchronous, but the log steps below synchronise

            if log_step:
                train_loss = float(window_sum) / window_n
                terms = {f"aux/{name}": float(v) / window_n for name, v in window_terms.items()}
                window_sum.zero_()
                window_terms.clear()
                window_n = 0
                tps = (step - start_step) * r.tokens_per_step / max(t_train, 1e-9)
                _log_training(r, step, train_loss, tps, factor, grad_norm, bar, terms)
                if not math.isfinite(train_loss):
                    diverged = True
                    break
            if step % eval_every == 0 or step == r.steps:
                diverged = _evaluate_and_report(r, step, report_fn)
                if report_fn is not None:
                    reported = step
            bar.update(1)
            if tc.stop_after_steps and step - start_step >= tc.stop_after_steps and step < r.steps:
                stopped = True
                break
            if tc.checkpoint_every_s > 0 and time.perf_counter() - last_ckpt >= tc.checkpoint_every_s:
                r.checkpoint()
                last_ckpt = time.perf_counter()
    return _LoopEnd(step, start_step, t_train, diverged, stopped, reported)


def _optimizer_step(r: _Run, step: int, log_step: bool,
                    terms: dict | None = None) -> tuple[torch.Tensor, torch.Tensor | None, float]:
    """One update on batch ``step``: schedule -> micro-batched forward/backward -> clip -> AdamW. Returns the batch
    loss, the gradient norm before clipping (or None) and the schedule factor; adds the auxiliary terms to
    ``terms``; at a ``log_step`` the probes' metrics go to ``r.sizes``."""
    tc, oc = r.cfg.train, r.cfg.optim
    factor = lr_factor(step, r.steps, oc.warmup_frac, oc.schedule, oc.min_lr_frac)
    set_lr(r.optimizer, oc.lr, factor)
    b = to_device(r.batch(step), r.device)
    if r.micro is None:
        _resolve_micro(r, b)
    if tc.compile_mode == "reduce-overhead":
        torch.compiler.cudagraph_mark_step_begin()  # a new iteration: earlier graph outputs may be overwritten
    loss = accumulate_gradients(r.model, b, r.micro, r.device, tc.precision, terms)
    grad_norm = torch.nn.utils.clip_grad_norm_(r.model.parameters(), oc.grad_clip) if oc.grad_clip > 0 else None
    if log_step:
        for p in r.probes:
            p.before_logged_step()
    r.optimizer.step()
    if log_step:
        r.sizes = {k: v for p in r.probes for k, v in p.on_logged_step().items()}
    r.optimizer.zero_grad(set_to_none=True)
    return loss, grad_norm, factor


def _resolve_micro(r: _Run, batch: dict) -> None:
    """``train.micro_batch_size`` on the first batch; the peak-memory count then starts afresh."""
    tc = r.cfg.train
    r.micro = resolve_micro_batch(tc.micro_batch_size, r.model, batch, r.device, tc.precision, r.optimizer)
    r.static["micro_batch_size"] = r.micro
    if r.device.type == "cuda":
        if tc.micro_batch_size == "auto":
            print(f"train.micro_batch_size=auto: {r.micro} of {tc.batch_size} rows per micro-batch", file=sys.stderr)
        torch.cuda.reset_peak_memory_stats(r.device)


def _log_training(r: _Run, step: int, train_loss: float, tps: float, factor: float, grad_norm, bar,
                  terms: dict | None = None) -> None:
    """The log row of a log step: window mean training loss, tokens, schedule, throughput, grad norm, LRs, the
    probes' metrics and the window means of the auxiliary loss terms (aux/<name>)."""
    r.state["train_loss"] = train_loss if math.isfinite(train_loss) else math.inf
    row = {"train_loss": r.state["train_loss"], "tokens": step * r.tokens_per_step, "lr_factor": factor,
           "tokens_per_s": tps, **(r.sizes or {}), **(terms or {})}
    if grad_norm is not None:
        row["grad_norm"] = float(grad_norm)
    for key, value in (("mfu", monitor.mfu(r.static["flops_per_token"], tps, r.peak)),
                       ("gpu_peak_mem_gib", monitor.peak_memory_gib(r.device))):
        if value is not None:  # W&B and the history get only the metrics this device has
            row[key] = value
    for g in r.optimizer.param_groups:
        row[f"lr/{g.get('role', 'group')}"] = g["lr"]
    r.log(row, step)
    bar.set_postfix(loss=f"{train_loss:.3f}", tok_s=f"{tps:,.0f}")


def _evaluate_and_report(r: _Run, step: int, report_fn) -> bool:
    """Evaluate at ``step`` and give the result to ``report_fn``; True when the validation loss is not finite."""
    diverged = not math.isfinite(r.validate(step))
    if report_fn is not None:
        report_fn({"val_loss": math.inf if diverged else r.state["val_loss"],
                   "val_loss_se": r.state["eval"].get("val_loss_se", math.nan),
                   "train_loss": r.state["train_loss"], "step": step, "tokens": step * r.tokens_per_step,
                   "diverged": diverged})
    return diverged


def _final_metrics(r: _Run, end: _LoopEnd, report_fn) -> dict:
    """Status (ok | diverged | stopped), the last checkpoint (not after divergence), the final evaluation of a
    finished run and the final metrics dict."""
    state, step = r.state, end.step
    if end.diverged:
        state["val_loss"] = math.inf
        if report_fn is not None and end.reported != step:
            report_fn({"val_loss": math.inf, "train_loss": state["train_loss"], "step": step,
                       "tokens": step * r.tokens_per_step, "diverged": True})
    else:
        r.checkpoint()  # at the end, or where stop_after_steps interrupted the run
    status = "diverged" if end.diverged else ("stopped" if end.stopped else "ok")
    if status == "ok":
        state["eval"].update(final_evaluation(r.model, r.corpus, r.cfg, r.device, r.baseline, state, len(r.val)))
    tps = (step - end.start_step) * r.tokens_per_step / max(end.t_train, 1e-9)
    return {
        **state["eval"],
        "val_loss": state["val_loss"],  # the full validation set when the run finished (see final_evaluation)
        "val_loss_init": state["val_loss_init"],
        "best_val_loss": state["best_val_loss"],
        "train_loss": state["train_loss"],
        "diverged": end.diverged,
        "status": status,
        "steps": step,
        "tokens": step * r.tokens_per_step,
        "start_step": end.start_step,  # > 0: the run resumed from a checkpoint at that step
        "tokens_per_s": tps,
        "mfu": monitor.mfu(r.static["flops_per_token"], tps, r.peak),
        "gpu_peak_mem_gib": monitor.peak_memory_gib(r.device),
        **r.static,
        "wall_s": r.wall_before + time.perf_counter() - r.t_start,
        "history": state["history"],
    }
