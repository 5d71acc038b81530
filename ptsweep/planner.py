"""Run planner (``python -m ptsweep plan``): each sweep's runs, their size, FLOPs, predicted memory, micro-batch and
GPU-hours, by model and by stage.

Runs: each sweep module's ``planned_trials`` (``trials.trial_plan``), grouped by (stage, shape, tokens). Early
stopping (ASHA) is not modelled, so search stages are an upper bound.

Activations of one sequence (``activation_bytes``; elements x ``bytes_per_element``, 4 = fp32, a bound for bf16):

    PT blockwise, saved per token and MFVI iteration: softmax(Z logits), P^ (N each), softmax(topic logits), G^
      (M each) = 2N + 2M; MLM head at the labelled fraction f: 2N + 2V; backward working set (pt_attention
      backward): ~ 6 K C r per token plus one row block's (B, C, b, L) tensors ~ 8 C b L / L
    PT dense (``attention_impl`` dense or auto): blockwise's + 5.5 K C r + 4 C L per token and iteration (fitted to
      saved-tensor counts at widths 128-1536, L 32-128); backward working set: one iteration's share of these
    BERT / UT per layer (Korthikanti et al. 2022 without dropout masks): 17 d + 2.5 a L per token (a = heads)

Static memory: 16 bytes per parameter (fp32 weights, gradients, AdamW moments) + PT's flat U/V copies and their
gradients (12 K C r N elements) + ``OVERHEAD_GB``. The run's micro-batch follows ``train.micro_batch_size``
(:func:`run_micro_batch`); its peak is static + micro-batch x activations.

Time of a run: tokens / the tokens/s of a GPU bench record of the same shape, compile mode and packing
(``bench_times``), else executed FLOPs / (peak x MFU), executed = the analytic training FLOPs + the blockwise path's
backward recomputation, 2 (2 K C N r + 3 C L r) per token and iteration. Each line of the plan says which it used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from ptsweep import bench_times
from ptsweep.config import RunConfig
from ptsweep.models.pt_attention import BLOCK_ROWS
from ptsweep.models.sizing import flops_per_token, param_count

SWEEPS = ("tune-small", "verify-transfer", "scaling-curves", "lr-transfer", "coord-check")
DEFAULT_SWEEPS = SWEEPS[:3]
"""What ``plan`` covers unless told: the paper's three sweeps (lr-transfer and coord-check are CPU studies)."""
OVERHEAD_GB = 3.0
MEMORY_FRACTION = 0.9


@dataclass(frozen=True)
class Hardware:
    """What a plan assumes about the GPU: memory, peak FLOP/s x MFU, and the bench records that time runs instead."""

    gpu_mem_gb: float = 80.0
    peak_tflops: float = 989.0
    mfu: float = 0.3
    device: str = ""
    """The GPU of ``records`` whose step times are used ('' = none: every run timed by MFU)."""
    records: tuple = field(default=(), repr=False)
    """``bench_times.Measurement`` records."""


@dataclass
class TrialPlan:
    """One group of identical runs of a sweep: same stage, shape, tokens and batch."""

    sweep: str
    stage: str
    model: str
    width: int
    scaling: str
    count: int
    tokens: float
    batch: int
    params: int
    flops_per_token: float
    exec_flops_per_token: float
    act_per_seq_bytes: float
    static_bytes: float
    micro_batch: int
    """Rows per forward/backward the run uses (:func:`run_micro_batch`; 0: not even one sequence fits)."""
    fit_micro_batch: int
    """The largest even split of the batch that fits (:func:`micro_batch`)."""
    peak_bytes: float
    gpu_hours: float
    time_source: str
    """'MFU <x>' or 'measured <GPU> B=<batch>[ x<n>/GPU][ <compile>]': where the GPU-hours come from."""
    time_record: str = ""
    """The bench record file the measured time came from ('' when timed by MFU)."""


def activation_bytes(model_cfg, vocab: int, seq_len: int, mask_prob: float = 0.15,
                     bytes_per_element: int = 4) -> dict[str, float]:
    """Predicted activation memory of one sequence: ``saved`` (kept for backward) and ``peak`` (saved + the
    backward working set), in bytes (module docstring)."""
    L, f = seq_len, mask_prob
    if model_cfg.name == "pt":
        n, m, t = model_cfg.width, model_cfg.topics, model_cfg.n_iters
        k, c, r = model_cfg.n_classes, model_cfg.channels, model_cfg.rank
        saved = t * L * (2 * n + 2 * m) + f * L * (2 * n + 2 * vocab)
        if model_cfg.use_blockwise("cuda"):
            work = L * 6 * k * c * r + 8 * c * min(BLOCK_ROWS, L) * L
        else:
            work = L * (5.5 * k * c * r + 4 * c * L)
            saved += t * work
    else:
        d = model_cfg.width
        heads = model_cfg.n_heads or max(1, d // 64)
        saved = model_cfg.n_layers * L * (17 * d + 2.5 * heads * L) + f * L * (2 * d + 2 * vocab)
        work = L * (4 * d + heads * L)  # one layer's gradients in flight
    return {"saved": saved * bytes_per_element, "peak": (saved + work) * bytes_per_element}


def static_bytes(model_cfg, vocab: int) -> float:
    """Parameters + gradients + AdamW state (fp32) + PT's flat weight copies + fixed overhead."""
    m = model_cfg
    extra = 12 * m.n_classes * m.channels * m.rank * m.width * 4 if m.name == "pt" else 0.0
    return 16.0 * param_count(m, vocab)["total"] + extra + OVERHEAD_GB * 1e9


def executed_flops(model_cfg, fpt: float, seq_len: int) -> float:
    """``fpt`` (training FLOPs per token) plus PT's backward recomputation on the blockwise path (module docstring)."""
    if model_cfg.name != "pt" or not model_cfg.use_blockwise("cuda"):
        return fpt
    m = model_cfg
    k, c, r, n = m.n_classes, m.channels, m.rank, m.width
    return fpt + m.n_iters * 2.0 * (2 * k * c * n * r + 3 * c * seq_len * r)


def micro_batch(batch: int, act_per_seq: float, static: float, gpu_mem_gb: float) -> int:
    """Largest even split m = ceil(batch / k) with static + m * act_per_seq <= gpu_mem * MEMORY_FRACTION (0: none)."""
    budget = gpu_mem_gb * 1e9 * MEMORY_FRACTION - static
    for k in range(1, batch + 1):
        m = math.ceil(batch / k)
        if m * act_per_seq <= budget:
            return m
    return 0


def run_micro_batch(setting, batch: int, fitting: int) -> int:
    """Rows per forward/backward a run uses under ``train.micro_batch_size`` (as ``train.resolve_micro_batch``;
    'auto': ``fitting``, the planner's estimate of what the probe finds)."""
    if setting == "auto":
        return fitting
    return min(int(setting), batch) if int(setting) > 0 else batch


def plan_trial(cfg: RunConfig, sweep: str, stage: str, model_cfg, count: int, tokens: float, batch: int,
               hw: Hardware) -> TrialPlan:
    """The memory, micro-batch and GPU-hours of ``count`` runs of one shape (module docstring)."""
    V, L, f = cfg.data.vocab_size, cfg.data.seq_len, cfg.data.mask_prob
    act = activation_bytes(model_cfg, V, L, f)["peak"]
    static = static_bytes(model_cfg, V)
    fpt = flops_per_token(model_cfg, V, L, f)
    exec_fpt = executed_flops(model_cfg, fpt, L)
    fitting = micro_batch(batch, act, static, hw.gpu_mem_gb)
    micro = run_micro_batch(cfg.train.micro_batch_size, batch, fitting)
    per_gpu = trials_per_gpu(cfg, model_cfg)
    hours, source, record = run_hours(model_cfg, tokens, fpt, exec_fpt, L, max(micro, 1), hw,
                                      cfg.train.compile_mode, per_gpu)
    return TrialPlan(sweep=sweep, stage=stage, model=model_cfg.name, width=model_cfg.width,
                     scaling=model_cfg.scaling if model_cfg.name == "pt" else "", count=count, tokens=tokens,
                     batch=batch, params=param_count(model_cfg, V)["total"], flops_per_token=fpt,
                     exec_flops_per_token=exec_fpt, act_per_seq_bytes=act, static_bytes=static, micro_batch=micro,
                     fit_micro_batch=fitting, peak_bytes=static + micro * act, gpu_hours=count * hours,
                     time_source=source, time_record=record)


def trials_per_gpu(cfg: RunConfig, model_cfg) -> int:
    """Trials of this model's width that share one GPU (``trials.placement.gpus_for_width``: a fraction 1/n packs
    n)."""
    from ptsweep.trials.placement import gpus_for_width

    gpus = gpus_for_width(cfg, int(model_cfg.width))
    return max(1, round(1.0 / gpus)) if 0 < gpus < 1 else 1


def run_hours(model_cfg, tokens: float, fpt: float, exec_fpt: float, seq_len: int, micro: int, hw: Hardware,
              compile_mode: str = "none", per_gpu: int = 1) -> tuple[float, str, str]:
    """(GPU-hours of one run, where they come from, the record file or ''): by the measured tokens/s of
    ``hw.device`` (``bench_times.pick``), else by executed FLOPs at ``hw.peak_tflops`` x ``hw.mfu``."""
    rec = bench_times.pick(list(hw.records), hw.device, model_cfg, fpt, seq_len, micro, compile_mode,
                           per_gpu) if hw.device else None
    if rec is not None:
        label = (f"measured {rec.device} B={rec.batch}" + (f" x{rec.trials}/GPU" if rec.trials > 1 else "")
                 + (f" {rec.compile}" if rec.compile != "none" else ""))
        return tokens / rec.tokens_per_s / 3600.0, label, rec.source
    return tokens * exec_fpt / (hw.peak_tflops * 1e12 * hw.mfu) / 3600.0, f"MFU {hw.mfu:g}", ""


def trial_lists() -> dict[str, Callable]:
    """Sweep name -> its module's ``planned_trials`` (imported here: the sweeps load pandas and the analysis)."""
    from ptsweep.sweeps import coord_check, lr_transfer_plan, scaling_curves, tune_small, verify_transfer

    return {"tune-small": tune_small.planned_trials, "verify-transfer": verify_transfer.planned_trials,
            "scaling-curves": scaling_curves.planned_trials, "lr-transfer": lr_transfer_plan.planned_trials,
            "coord-check": coord_check.planned_trials}


def planned(cfg: RunConfig, sweeps=DEFAULT_SWEEPS) -> dict[str, list]:
    """Sweep name -> its ``planned_trials(cfg)``; an unknown name is a one-line ValueError."""
    lists = trial_lists()
    unknown = [n for n in sweeps if n not in lists]
    if unknown:
        raise ValueError(f"sweep: unknown sweep {unknown[0]!r} (choose from {', '.join(SWEEPS)})")
    return {name: lists[name](cfg) for name in sweeps}


def plan(cfg: RunConfig, sweeps=DEFAULT_SWEEPS, hw: Hardware = Hardware()) -> list[TrialPlan]:
    """TrialPlans of the named sweeps: their runs grouped by (sweep, stage, shape, tokens, batch), in run order."""
    groups: dict[tuple, list] = {}
    for name, trials in planned(cfg, sweeps).items():
        for t in trials:
            groups.setdefault((name, t.stage, repr(t.model), t.tokens, t.batch_size), []).append(t)
    return [plan_trial(cfg, name, stage, ts[0].model, len(ts), tokens, batch, hw)
            for (name, stage, _, tokens, batch), ts in groups.items()]
