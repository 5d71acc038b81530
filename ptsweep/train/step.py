"""One optimizer step's and one evaluation's math: the LR schedule, micro-batches with exact gradient accumulation,
validation / test metrics.

    steps      = ceil(train.tokens / (batch_size * seq_len))
    factor(s)  = (s + 1) / warmup            for s < warmup = round(optim.warmup_frac * steps)
               = linear | cosine decay from 1 to optim.min_lr_frac over the remaining steps (constant: 1)
    loss       = models.mlm_loss (cross-entropy at the masked positions only), accumulated over micro-batches of
                 ``train.micro_batch_size`` rows weighted by their share of the targets (``accumulate_gradients``);
                 the gradient is that of models.training_objective (the loss + the model's auxiliary terms, if any)
"""

from __future__ import annotations

import contextlib
import math
from typing import Callable, Iterator

import torch

from ptsweep import data as data_mod
from ptsweep import metrics
from ptsweep.config import RunConfig
from ptsweep.models import IGNORE_INDEX, mlm_logits, training_objective
from ptsweep.train.state import autocast_context, with_index


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


def to_device(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def micro_slices(batch_size: int, micro: int) -> list[slice]:
    """Consecutive row slices of at most ``micro`` rows covering ``batch_size`` (micro <= 0: one slice)."""
    micro = batch_size if micro <= 0 else micro
    return [slice(i, min(i + micro, batch_size)) for i in range(0, batch_size, micro)]


def _add_terms(terms: dict | None, aux: dict, weight: float) -> None:
    """terms[name] += weight * aux[name] (detached, float32) for each auxiliary term of a (micro-)batch."""
    if terms is not None:
        for name, value in aux.items():
            terms[name] = terms.get(name, 0.0) + value.detach().float() * weight


def accumulate_gradients(model, batch: dict, micro: int, device: torch.device, precision: str,
                         terms: dict | None = None) -> torch.Tensor:
    """Forward + backward of ``models.training_objective`` on one batch in micro-batches of ``micro`` rows (0 = all),
    micro-batch m weighted by its share of the targets n_m / n_total, so the gradient is the full batch's (micro-
    batches without targets are skipped). Returns the MLM loss (detached); adds the weighted auxiliary terms to
    ``terms``."""
    labels = batch["labels"]
    slices = micro_slices(labels.shape[0], micro)
    if len(slices) == 1:
        with autocast_context(device, precision):
            objective, loss, aux = training_objective(model, batch["input_ids"], batch["attention_mask"], labels)
        objective.backward()
        _add_terms(terms, aux, 1.0)
        return loss.detach()
    counts = [int((labels[sl] != IGNORE_INDEX).sum()) for sl in slices]
    total = sum(counts)
    acc = torch.zeros((), device=labels.device)
    for sl, n in zip(slices, counts):
        if n == 0 and total > 0:
            continue
        with autocast_context(device, precision):
            objective, loss, aux = training_objective(model, batch["input_ids"][sl], batch["attention_mask"][sl],
                                                      labels[sl])
        weight = n / total if total > 0 else 1.0 / len(slices)
        (objective * weight).backward()
        acc += loss.detach().float() * weight
        _add_terms(terms, aux, weight)
    return acc


def largest_fitting(batch_size: int, fits: Callable[[int], bool]) -> int:
    """Largest m in [1, batch_size] with ``fits(m)`` (assumed monotone), by bisection; RuntimeError when not even
    m = 1 fits."""
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


AUTO_HEADROOM = 0.10
"""Share of the memory budget ``train.micro_batch_size=auto`` leaves free (fragmentation, temporaries)."""


def choose_micro_batch(batch_size: int, peak_bytes: Callable[[int], float | None], budget_bytes: float,
                       headroom: float = AUTO_HEADROOM) -> int:
    """Largest m in [1, batch_size] whose peak ``peak_bytes(m)`` (None: out of memory) stays within ``(1 -
    headroom) * budget_bytes`` (``largest_fitting``)."""
    limit = (1.0 - headroom) * budget_bytes

    def fits(m: int) -> bool:
        peak = peak_bytes(m)
        return peak is not None and peak <= limit

    return largest_fitting(batch_size, fits)


@contextlib.contextmanager
def optimizer_state_allocated(optimizer: torch.optim.Optimizer | None) -> Iterator[int]:
    """While the block runs, hold placeholders of the AdamW state (exp_avg, exp_avg_sq) the optimizer has not
    allocated yet, so a memory probe sees a real step's memory. Yields the placeholder bytes."""
    held = []
    if optimizer is not None:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad and not optimizer.state.get(p):
                    held += [torch.empty_like(p), torch.empty_like(p)]
    try:
        yield sum(t.numel() * t.element_size() for t in held)
    finally:
        held.clear()


def device_memory_budget(device: torch.device) -> float:
    """Bytes this process may allocate on CUDA ``device``: total memory times the per-process fraction. A device
    without an index ('cuda') means the current one (torch's fraction getter refuses it)."""
    index = with_index(device).index
    total = torch.cuda.get_device_properties(index).total_memory
    # torch < 2.7 has no getter; the cap, if one is set, still turns an over-budget probe into an OOM
    get_fraction = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    return float(total * (get_fraction(index) if get_fraction is not None else 1.0))


def resolve_micro_batch(setting, model, batch: dict, device: torch.device, precision: str,
                        optimizer: torch.optim.Optimizer | None = None, budget_bytes: float | None = None) -> int:
    """``train.micro_batch_size`` -> rows per forward/backward. 0 -> the full batch; 'auto' -> the full batch on
    the CPU, on CUDA the largest whose probe step (``optimizer``'s state allocated) peaks within ``1 -
    AUTO_HEADROOM`` of ``budget_bytes`` (default :func:`device_memory_budget`)."""
    bsz = batch["labels"].shape[0]
    if setting != "auto":
        return min(int(setting), bsz) if int(setting) > 0 else bsz
    if device.type != "cuda":
        return bsz

    def peak_bytes(m: int) -> float | None:
        torch.cuda.reset_peak_memory_stats(device)
        try:
            accumulate_gradients(model, {k: v[:m] for k, v in batch.items()}, m, device, precision)
            torch.cuda.synchronize(device)
            return float(torch.cuda.max_memory_allocated(device))
        except torch.cuda.OutOfMemoryError:
            return None
        finally:
            model.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()

    budget = device_memory_budget(device) if budget_bytes is None else budget_bytes
    with optimizer_state_allocated(optimizer):
        return choose_micro_batch(bsz, peak_bytes, budget)


@torch.no_grad()
def evaluate(model, batches: list[dict], device: torch.device, precision: str,
             baseline: metrics.NoContextBaseline | None = None) -> dict[str, float]:
    """Validation metrics over every masked token of ``batches`` (``ptsweep.metrics.summarize``), with the
    ``baseline``'s unigram and no-context losses on the same tokens when given."""
    was_training = model.training
    model.eval()
    losses, blocks, targets_all, inputs_all = [], [], [], []
    offset = 0
    for batch in batches:
        b = to_device(batch, device)
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


def final_evaluation(model, corpus, cfg: RunConfig, device, baseline, state: dict, n_eval_batches: int) -> dict:
    """After a finished run, the validation metrics on every block when ``train.eval_batches`` capped the in-loop
    ones, and the held-out TEST split's, prefixed test_ (test_loss, test_loss_se, ...)."""
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
