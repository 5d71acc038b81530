"""The text of ``python -m ptsweep plan``: a table of the planned run groups (``planner.plan``), each sweep's runs and
GPU-hours by model and stage, and the most runs scaling-curves' LR edge rule adds."""

from __future__ import annotations

from ptsweep import planner
from ptsweep.config import RunConfig

COLUMNS = (f"{'sweep':<16}{'stage':<7}{'model':<11}{'scaling':<9}{'width':>6}{'runs':>5}{'tokens':>9}{'params':>9}"
           f"{'GFLOP/tok':>10}{'act MB/seq':>11}{'static GB':>10}{'micro':>6}{'peak GB':>9}{'GPU-h':>10}  time from")


def row_line(r: planner.TrialPlan, gpu_mem_gb: float) -> str:
    """One table line; the peak is marked '!' when it exceeds the GPU's memory."""
    over = "!" if r.peak_bytes > gpu_mem_gb * 1e9 else " "
    return (f"{r.sweep:<16}{r.stage:<7}{r.model:<11}{r.scaling or '-':<9}{r.width:>6}{r.count:>5}{r.tokens:>9.3g}"
            f"{r.params / 1e6:>8.1f}M{r.exec_flops_per_token / 1e9:>10.3f}{r.act_per_seq_bytes / 1e6:>11.1f}"
            f"{r.static_bytes / 1e9:>10.2f}{r.micro_batch if r.fit_micro_batch else 'OOM':>6}"
            f"{r.peak_bytes / 1e9:>8.1f}{over}{r.gpu_hours:>10.1f}  {r.time_source}")


def breakdown(rows: list[planner.TrialPlan]) -> dict[tuple[str, str], tuple[int, float]]:
    """(model, stage) -> (runs, GPU-hours) of one sweep's rows, in first-seen order."""
    out: dict[tuple[str, str], tuple[int, float]] = {}
    for r in rows:
        runs, hours = out.get((r.model, r.stage), (0, 0.0))
        out[(r.model, r.stage)] = (runs + r.count, hours + r.gpu_hours)
    return out


def sweep_lines(name: str, rows: list[planner.TrialPlan]) -> list[str]:
    """A sweep's total, then its runs and GPU-hours by model and stage with their share."""
    total = sum(r.gpu_hours for r in rows)
    sources = sorted({r.time_source for r in rows})
    out = [f"{name}: {sum(r.count for r in rows)} runs, {total:,.1f} GPU-hours (time from: {'; '.join(sources)})"]
    for (model, stage), (runs, hours) in breakdown(rows).items():
        share = hours / total if total > 0 else 0.0
        out.append(f"  {model:<11}{stage:<7}{runs:>6} runs {hours:>11,.1f} GPU-h {share:>7.1%}")
    if name == "coord-check":
        out.append("  (coord-check runs in-process on the CPU: its GPU-hours are nominal)")
    if any(r.peak_bytes > r.static_bytes + r.fit_micro_batch * r.act_per_seq_bytes for r in rows):
        fits = sorted({(r.model, r.width, r.fit_micro_batch) for r in rows if r.micro_batch > r.fit_micro_batch})
        out.append("  ! peak over the GPU at the run's micro-batch (train.micro_batch_size): fits at "
                   + ", ".join(f"{m} w{w}: {mb or 'none'}" for m, w, mb in fits))
    return out


def edge_lines(cfg: RunConfig, hw: planner.Hardware) -> list[str]:
    """scaling-curves' LR edge rule, which the plan's runs leave out (it runs only where a best LR is on an edge):
    its most runs and their GPU-hours (``baseline_tuning.edge_runs`` per (model, scale) searched)."""
    from ptsweep.sweeps import baseline_tuning

    most = baseline_tuning.edge_runs(cfg)
    if not most:
        return []
    firsts = {}  # (baseline, scale) -> its first planned search trial (shape, tokens, batch)
    for t in planner.planned(cfg, ["scaling-curves"])["scaling-curves"]:
        if t.stage == "search":
            firsts.setdefault((t.model_name, t.scale), t)
    if not firsts:
        return []
    # PT's LR grid (sweep.transfer_from=grid) adds one LR per round even where the baselines search with TPE
    runs = {key: cfg.sweep.baseline.lr_widen if key[0] == "pt" else most for key in firsts}
    hours = sum(planner.plan_trial(cfg, "scaling-curves", "search", t.model, runs[key], t.tokens, t.batch_size,
                                   hw).gpu_hours for key, t in firsts.items())
    return [f"  LR edge rule (sweep.baseline.lr_widen={cfg.sweep.baseline.lr_widen}), not counted above: up to "
            f"{sum(runs.values())} more search runs, {hours:,.1f} GPU-hours ({max(runs.values())} per searched "
            f"(model, scale) with an LR grid or search, run only while its best LR is on an edge of the LRs tried)"]


def record_lines(rows: list[planner.TrialPlan]) -> list[str]:
    """Which bench record files timed which runs, or that none did and every line is at the assumed MFU."""
    used: dict[str, int] = {}
    for r in rows:
        if r.time_record:
            used[r.time_record] = used.get(r.time_record, 0) + r.count
    if not used:
        return ["GPU-hours: every line at the assumed MFU (no bench record measures a planned shape)"]
    return ["GPU-hours from measured step times where a record matches (else the assumed MFU): "
            + "; ".join(f"{name} ({runs} runs)" for name, runs in used.items())]


def format_plan(rows: list[planner.TrialPlan], cfg: RunConfig, hw: planner.Hardware,
                bench_note: str = "") -> str:
    """The plan's table, each sweep's breakdown (scaling-curves with its LR edge rule's most runs) and the
    assumptions."""
    B, L = cfg.train.batch_size, cfg.data.seq_len
    out = [f"plan: preset={cfg.preset or '-'}  batch {B} x {L} tokens  V={cfg.data.vocab_size}  GPU memory "
           f"{hw.gpu_mem_gb:g} GB  peak {hw.peak_tflops:g} TFLOP/s (bf16 dense) x MFU {hw.mfu:g}  "
           f"train.micro_batch_size={cfg.train.micro_batch_size}", *([bench_note] if bench_note else []),
           COLUMNS, *(row_line(r, hw.gpu_mem_gb) for r in rows), ""]
    for name in dict.fromkeys(r.sweep for r in rows):
        part = [r for r in rows if r.sweep == name]
        out += sweep_lines(name, part)
        if name == "scaling-curves":
            out += edge_lines(cfg, hw)
    out += record_lines(rows)
    out.append(f"total: {sum(r.count for r in rows)} runs, {sum(r.gpu_hours for r in rows):,.1f} GPU-hours. "
               "GFLOP/tok = executed training FLOPs (PT: incl. backward recomputation); act = predicted fp32 "
               "activation peak per sequence (bf16 autocast: less); micro = rows per forward/backward the run uses; "
               "peak = static + micro x act; search stages ignore early stopping (an upper bound) and count no LR "
               "edge-rule runs (scaling-curves' 'LR edge rule' line: at most that many more)")
    return "\n".join(out)
