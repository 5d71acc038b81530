"""Run planner (``python -m ptsweep plan``): per sweep trial, size, FLOPs, predicted memory, micro-batch, GPU-hours.

Trials per sweep (the same enumeration as the sweep modules; early stopping ignored, so an upper bound):

    tune-small        sweep.num_samples PT runs at model.width, train.tokens each
    verify-transfer   sweep.seeds + max(n_required(alpha, p), sweep.n) PT runs at sweep.width
    scaling-curves    per baseline (bert, ut) and scale (shape: ``sizing.match_shape``, sweep.match):
                      sweep.baseline.samples (0 = sweep.num_samples) search runs at baseline.search_frac * tokens
                      + sweep.seeds final runs; per PT scaling and scale: sweep.seeds runs

Activations of one sequence (``activation_bytes``; elements x ``bytes_per_element``, 4 = fp32, a bound for bf16):

    PT blockwise, saved per token and MFVI iteration: softmax(Z logits), P^ (N each), softmax(topic logits), G^
      (M each) = 2N + 2M; MLM head at the labelled fraction f: 2N + 2V; backward working set (pt_attention
      backward): ~ 6 K C r per token plus one row block's (B, C, b, L) tensors ~ 8 C b L / L
    PT dense (``attention_impl`` dense or auto): blockwise's + 5.5 K C r + 4 C L per token and iteration (fitted to
      saved-tensor counts at widths 128-1536, L 32-128); backward working set: one iteration's share of these
    BERT / UT per layer (Korthikanti et al. 2022 without dropout masks): 17 d + 2.5 a L per token (a = heads)

Static memory: 16 bytes per parameter (fp32 weights, gradients, AdamW moments) + PT's flat U/V copies and their
gradients (12 K C r N elements) + ``OVERHEAD_GB``. The micro-batch is the largest even split of train.batch_size
whose activations fit in ``gpu_mem * MEMORY_FRACTION`` next to it. Time: executed FLOPs / (peak x MFU), executed =
the analytic training FLOPs (``models.sizing``) + the blockwise path's backward recomputation of q, v and the
attention, 2 (2 K C N r + 3 C L r) per token and iteration. Measured on an H200 (bf16, paper preset, dense PT): MFU
0.21 at width 1536 and 0.04 at width 256 (bench/README.md, "GPU"), so the default 0.3 is optimistic for PT.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ptsweep.analysis.design import n_required
from ptsweep.config import PTConfig, RunConfig
from ptsweep.models.pt_attention import BLOCK_ROWS
from ptsweep.models.sizing import flops_per_token, match_shape, param_count

SWEEPS = ("tune-small", "verify-transfer", "scaling-curves")
OVERHEAD_GB = 3.0
MEMORY_FRACTION = 0.9


@dataclass
class TrialPlan:
    sweep: str
    model: str
    width: int
    scaling: str
    count: int
    tokens: float
    params: int
    flops_per_token: float
    exec_flops_per_token: float
    act_per_seq_bytes: float
    static_bytes: float
    micro_batch: int
    gpu_hours: float


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


def executed_flops(model_cfg, vocab: int, seq_len: int, mask_prob: float) -> float:
    """Training FLOPs per token including PT's backward recomputation on the blockwise path (module docstring)."""
    base = flops_per_token(model_cfg, vocab, seq_len, mask_prob)
    if model_cfg.name != "pt" or not model_cfg.use_blockwise("cuda"):
        return base
    m = model_cfg
    k, c, r, n = m.n_classes, m.channels, m.rank, m.width
    return base + m.n_iters * 2.0 * (2 * k * c * n * r + 3 * c * seq_len * r)


def micro_batch(batch: int, act_per_seq: float, static: float, gpu_mem_gb: float) -> int:
    """Largest even split m = ceil(batch / k) with static + m * act_per_seq <= gpu_mem * MEMORY_FRACTION (0: none)."""
    budget = gpu_mem_gb * 1e9 * MEMORY_FRACTION - static
    for k in range(1, batch + 1):
        m = math.ceil(batch / k)
        if m * act_per_seq <= budget:
            return m
    return 0


def plan_trial(cfg: RunConfig, sweep: str, model_cfg, count: int, tokens: float, gpu_mem_gb: float,
               peak_flops: float, mfu: float) -> TrialPlan:
    V, L, f = cfg.data.vocab_size, cfg.data.seq_len, cfg.data.mask_prob
    act = activation_bytes(model_cfg, V, L, f)["peak"]
    static = static_bytes(model_cfg, V)
    exec_fpt = executed_flops(model_cfg, V, L, f)
    return TrialPlan(sweep=sweep, model=model_cfg.name, width=model_cfg.width,
                     scaling=model_cfg.scaling if model_cfg.name == "pt" else "", count=count,
                     tokens=tokens, params=param_count(model_cfg, V)["total"],
                     flops_per_token=flops_per_token(model_cfg, V, L, f), exec_flops_per_token=exec_fpt,
                     act_per_seq_bytes=act, static_bytes=static,
                     micro_batch=micro_batch(cfg.train.batch_size, act, static, gpu_mem_gb),
                     gpu_hours=count * tokens * exec_fpt / (peak_flops * mfu) / 3600.0)


def _pt(cfg: RunConfig, width: int, scaling: str | None = None) -> PTConfig:
    base = cfg.model if cfg.model.name == "pt" else PTConfig()
    m = dataclasses.replace(base, width=width, **({"scaling": scaling} if scaling else {}))
    m.validate()
    return m


def plan(cfg: RunConfig, sweeps=SWEEPS, gpu_mem_gb: float = 80.0, peak_tflops: float = 989.0,
         mfu: float = 0.3) -> list[TrialPlan]:
    """TrialPlans (one per distinct trial shape) of the named sweeps under ``cfg`` (module docstring)."""
    sweep_cfg, tokens = cfg.sweep, cfg.train.tokens
    trials: list[tuple] = []  # (sweep, model config, runs, tokens per run)
    for name in sweeps:
        if name not in SWEEPS:
            raise ValueError(f"sweep: unknown sweep {name!r} (choose from {', '.join(SWEEPS)})")
        if name == "tune-small":
            trials.append((name, _pt(cfg, cfg.model.width), sweep_cfg.num_samples, tokens))
        elif name == "verify-transfer":
            n_run = max(n_required(sweep_cfg.alpha, sweep_cfg.p), sweep_cfg.n)
            trials.append((name, _pt(cfg, sweep_cfg.width), sweep_cfg.seeds + n_run, tokens))
        else:
            scalings = ["channels", "rank"] if sweep_cfg.scaling == "both" else [sweep_cfg.scaling]
            search = (sweep_cfg.baseline.samples or sweep_cfg.num_samples,
                      max(1.0, sweep_cfg.baseline.search_frac * tokens))
            for kind in (m for m in sweep_cfg.models if m != "pt"):
                for s in sweep_cfg.scales:
                    mcfg = match_shape(kind, _pt(cfg, s, scalings[0]), cfg.data.vocab_size, cfg.data.seq_len,
                                       cfg.data.mask_prob, sweep_cfg.match)
                    trials += [(name, mcfg, *search), (name, mcfg, sweep_cfg.seeds, tokens)]
            if "pt" in sweep_cfg.models:
                trials += [(name, _pt(cfg, s, sc), sweep_cfg.seeds, tokens)
                           for sc in scalings for s in sweep_cfg.scales]
    return [plan_trial(cfg, *trial, gpu_mem_gb, peak_tflops * 1e12, mfu) for trial in trials]


def format_plan(rows: list[TrialPlan], cfg: RunConfig, gpu_mem_gb: float, peak_tflops: float, mfu: float) -> str:
    """A text table per sweep plus the GPU-hours of each sweep and the assumptions."""
    B, L = cfg.train.batch_size, cfg.data.seq_len
    out = [f"plan: preset={cfg.preset or '-'}  batch {B} x {L} tokens  V={cfg.data.vocab_size}  "
           f"GPU memory {gpu_mem_gb:g} GB  assumed peak {peak_tflops:g} TFLOP/s (bf16 dense) x MFU {mfu:g}",
           f"{'sweep':<16}{'model':<6}{'scaling':<9}{'width':>6}{'runs':>5}{'tokens':>9}{'params':>9}"
           f"{'GFLOP/tok':>10}{'act MB/seq':>11}{'act GB/mb':>10}{'static GB':>10}{'micro':>6}{'GPU-h':>10}"]
    for r in rows:
        mb = r.micro_batch
        out.append(f"{r.sweep:<16}{r.model:<6}{r.scaling or '-':<9}{r.width:>6}{r.count:>5}{r.tokens:>9.3g}"
                   f"{r.params / 1e6:>8.1f}M{r.exec_flops_per_token / 1e9:>10.3f}{r.act_per_seq_bytes / 1e6:>11.1f}"
                   f"{mb * r.act_per_seq_bytes / 1e9:>10.2f}{r.static_bytes / 1e9:>10.2f}"
                   f"{mb if mb else 'OOM':>6}{r.gpu_hours:>10.1f}")
    out.append("")
    for name in dict.fromkeys(r.sweep for r in rows):
        part = [r for r in rows if r.sweep == name]
        runs = sum(r.count for r in part)
        out.append(f"{name}: {runs} runs, {sum(r.gpu_hours for r in part):,.1f} GPU-hours"
                   + ("" if all(r.micro_batch >= 1 for r in part) else "  (some trials do not fit even one sequence)"))
    out.append(f"total: {sum(r.gpu_hours for r in rows):,.1f} GPU-hours at {peak_tflops:g} TFLOP/s x MFU {mfu:g}; "
               "GFLOP/tok = executed training FLOPs (PT: incl. backward recomputation); act = predicted fp32 "
               "activation peak (bf16 autocast: about half); micro = rows per forward/backward")
    return "\n".join(out)
