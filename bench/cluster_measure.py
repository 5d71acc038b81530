"""One measured training step setting of the GPU check (``bench/bench_cluster.py``), and the spawned processes that
run it: timed steps of ``ptsweep.train``'s step on random token ids, one row of tokens/s, FLOP/s, MFU and peak memory.

A spec is a dict: ``model_cfg`` (the model config the plan prices: ``bench_cluster.plan_models``), ``scale`` (the PT
width it belongs to), ``vocab``, ``seq_len``, ``batch``, ``micro`` (``train.micro_batch_size``: 'auto' probes the
largest micro-batch that fits), ``steps``, ``warmup``, ``compile`` ('none' | 'reduce-overhead'), ``device``
('cuda' | 'cpu'), ``fraction`` (the share of the GPU's memory a packed trial may use; 1 = all). A step is what
training does: bf16 autocast on CUDA, TF32, the fused AdamW, the grad-norm clip, exact gradient accumulation over
the micro-batch; data loading is not timed (the prefetch thread overlaps it in training).
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout without installing
    sys.path.insert(0, str(ROOT))

KEYS = ("model", "scale", "compile")
"""What names a row even when it failed."""


def head(spec: dict) -> dict:
    """The fields that name a spec's row: model name, PT scale, compile mode."""
    return {"model": spec["model_cfg"].name, "scale": spec["scale"], "compile": spec["compile"]}


def random_batch(spec: dict, device):
    """Random ids, 15 % of the positions labelled and shown as a [MASK]-like id (as bench_models)."""
    import torch

    g = torch.Generator().manual_seed(0)
    B, L, V = spec["batch"], spec["seq_len"], spec["vocab"]
    ids = torch.randint(5, V, (B, L), generator=g)  # (B, L)
    selected = torch.rand(B, L, generator=g) < 0.15  # (B, L)
    return {"input_ids": torch.where(selected, torch.full_like(ids, 4), ids).to(device),
            "attention_mask": torch.ones(B, L, dtype=torch.bool, device=device),
            "labels": torch.where(selected, ids, torch.full_like(ids, -100)).to(device)}


def _timed_steps(step, spec: dict, gate) -> tuple[float, list[float]]:
    """(seconds of the warm-up steps, seconds of each timed step); ``gate()`` runs between them (packed trials wait
    there for each other, so their timed steps overlap)."""
    t0 = time.perf_counter()
    for _ in range(spec["warmup"]):
        step()
    warmup_s = time.perf_counter() - t0
    if gate is not None:
        gate()
    times = []
    for _ in range(spec["steps"]):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return warmup_s, times


def train_step(model, opt, batch: dict, micro: int, device, compile_mode: str):
    """One training step as training takes it (exact accumulation over ``micro``-row slices, bf16 autocast on CUDA,
    the grad-norm clip, AdamW); returns the loss."""
    import torch

    from ptsweep.train import accumulate_gradients

    if compile_mode == "reduce-overhead":
        torch.compiler.cudagraph_mark_step_begin()
    loss = accumulate_gradients(model, batch, micro, device, "auto")
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def measure(spec: dict, gate=None) -> dict:
    """Build the spec's model and optimizer, resolve its micro-batch, time its steps (module docstring)."""
    import torch

    from ptsweep.bench_times import planned_path
    from ptsweep.models import build_model
    from ptsweep.models.sizing import flops_per_token
    from ptsweep.parametrization import build_optimizer
    from ptsweep.train import monitor, resolve_device, resolve_micro_batch
    from ptsweep.train.state import compile_encoder, set_tf32, uses_bf16

    device = resolve_device(spec["device"])
    cuda = device.type == "cuda"
    if cuda and spec.get("fraction", 1.0) < 1:
        torch.cuda.set_per_process_memory_fraction(spec["fraction"], torch.cuda.current_device())
    cfg, V, L = spec["model_cfg"], spec["vocab"], spec["seq_len"]
    torch.manual_seed(0)
    model = build_model(cfg, V, L).to(device)
    opt = build_optimizer(model, model.width, model.parametrization, lr=1e-4, device_type=device.type)
    compile_encoder(model, spec["compile"], device)
    set_tf32(device, True)
    batch = random_batch(spec, device)
    micro = resolve_micro_batch(spec["micro"], model, batch, device, "auto", opt)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)

    def step() -> None:
        train_step(model, opt, batch, micro, device, spec["compile"])
        if cuda:
            torch.cuda.synchronize(device)

    warmup_s, times = _timed_steps(step, spec, gate)
    tps = spec["batch"] * L * len(times) / sum(times)
    name = torch.cuda.get_device_name(device) if cuda else "cpu"
    fpt = flops_per_token(cfg, V, L, 0.15)
    peak = monitor.peak_flops(name, monitor.matmul_precision(device, uses_bf16(device, "auto")))
    return {**head(spec), "width": int(cfg.width), "shape": planned_path(cfg), "batch": spec["batch"],
            "micro_batch": micro, "seq_len": L, "vocab": V, "steps": len(times),
            "step_s_median": statistics.median(times), "tokens_per_s": tps,
            "flops_per_token": fpt, "flop_per_s": fpt * tps, "mfu": monitor.mfu(fpt, tps, peak),
            "peak_mem_gib": monitor.peak_memory_gib(device), "warmup_s": warmup_s, "device": device.type,
            "device_name": name, "fraction": spec.get("fraction", 1.0),
            "total_mem_gib": torch.cuda.get_device_properties(device).total_memory / 2**30 if cuda else None}


def error_row(spec: dict, why: str) -> dict:
    """The row of a spec that measured nothing, with one line saying why."""
    return {**head(spec), "error": why.splitlines()[0][:300] if why else "failed"}


def _free() -> None:
    """Release the last row's model, compiled graphs and cached CUDA memory before the next row's peak is read."""
    import torch

    gc.collect()
    torch._dynamo.reset()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _group_child(specs: list[dict], results) -> None:
    """Measure each spec in turn in this process, putting each row on ``results`` as soon as it is measured."""
    for spec in specs:
        try:
            results.put(measure(spec))
        except BaseException as e:  # noqa: BLE001 - one failed row, reported, not the whole group
            results.put(error_row(spec, f"{type(e).__name__}: {e}"))
        _free()


def run_group(specs: list[dict], timeout_s: float, on_row) -> None:
    """Measure ``specs`` one after another in one spawned process; ``on_row(spec, row)`` for each as it arrives. What
    has not arrived when ``timeout_s`` is spent is an error row, and the process is killed."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    proc = ctx.Process(target=_group_child, args=(specs, results))
    proc.start()
    deadline = time.time() + timeout_s
    for i, spec in enumerate(specs):
        try:
            row = results.get(timeout=max(1.0, deadline - time.time()))
        except Exception:  # noqa: BLE001 - queue.Empty: the process hung, died or ran out of time
            for rest in specs[i:]:
                on_row(rest, error_row(rest, f"no result within {timeout_s:.0f} s"))
            break
        on_row(spec, row)
    proc.join(timeout=5)
    if proc.is_alive():
        proc.kill()


def _packed_child(spec: dict, barrier, results) -> None:
    """One packed trial without Ray: cap this process's memory at its share (as a Ray trial does), measure."""
    from ptsweep.trials.placement import cap_gpu_memory

    try:
        share = cap_gpu_memory(spec["fraction"]) or 1.0
        results.put(measure({**spec, "fraction": share}, barrier.wait))
    except BaseException as e:  # noqa: BLE001 - one failed trial, reported
        barrier.abort()
        results.put(error_row(spec, f"{type(e).__name__}: {e}"))


def run_packed_processes(spec: dict, n: int, timeout_s: float) -> list[dict]:
    """``n`` copies of ``spec`` at once in spawned processes, each at 1/n of the GPU's memory, their timed steps
    started together (a barrier): the packing that Ray's fractional GPUs give, where Ray is not installed."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_packed_child, args=({**spec, "fraction": 1.0 / n}, barrier, results))
             for _ in range(n)]
    for p in procs:
        p.start()
    out, deadline = [], time.time() + timeout_s
    for _ in range(n):
        try:
            out.append(results.get(timeout=max(1.0, deadline - time.time())))
        except Exception:  # noqa: BLE001 - queue.Empty
            out.append(error_row(spec, f"no result within {timeout_s:.0f} s"))
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
    return out
