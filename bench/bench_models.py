"""Speed and memory of PT vs BERT vs UT at matched parameter counts (``make bench``).

PT uses its base shape at ``--width`` (default 256: C = 4, r = 64, K = 8, M = 4N, T = 4 MFVI iterations); BERT
(4 layers) and UT (one shared layer, 4 steps) get the width whose parameter count matches PT's
(``ptsweep.models.sizing.match_width``). Inputs are random token ids (V = 30522 by default, no data needed), batch
16 x 128, 15% of the positions labelled, so the MLM head runs on the masked positions only, as in training.

One timed step = forward + backward + grad-norm clip + AdamW step (what ``ptsweep.train`` does), after warm-up
steps; bf16 autocast on CUDA, fp32 on CPU. Reported per model: tokens/s, achieved FLOP/s (the analytic
``sizing.flops_per_token`` x tokens/s: useful work, not hardware counters) and peak memory (CUDA
``max_memory_allocated``; on CPU the peak resident set size of a fresh process that benchmarks only that model), and
the process CPU time per step (on shared cores wall time mostly measures the other processes; with ``--threads 1``
CPU time is the step's own work).
Each model runs in its own spawned process so memory numbers do not mix.

    python bench/bench_models.py [--steps 3] [--warmup 1] [--device auto] [--width 256] [--out runs/bench]

Writes <out>/bench.json and <out>/bench.md (a markdown table) and prints the table and the PT/BERT FLOP/s ratio.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import platform
import statistics
import sys
import time
from pathlib import Path

from bench_output import write_outputs

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout without installing
    sys.path.insert(0, str(ROOT))


def model_configs(width: int, vocab: int, layers: int, pt_impl: str = "auto",
                  names: tuple[str, ...] = ("pt", "bert", "ut")) -> dict:
    """PT at ``width`` and the baselines among ``names`` at the width matched to its parameter count."""
    from ptsweep.config import PTConfig
    from ptsweep.models.sizing import match_width

    pt = PTConfig(width=width, n_iters=layers, attention_impl=pt_impl)
    pt.validate()
    return {"pt": pt, **{b: match_width(b, pt, vocab, n_layers=layers) for b in ("bert", "ut") if b in names}}


def pt_path(cfg, device_type: str) -> str:
    """The attention path a PT training step takes on ``device_type``."""
    return "blockwise" if cfg.use_blockwise(device_type) else "dense"


def bench_one(name: str, args: dict) -> dict:
    """Benchmark one model (runs in a fresh process)."""
    import resource

    import torch

    from ptsweep.models import build_model, mlm_loss
    from ptsweep.models.sizing import flops_per_token, param_count
    from ptsweep.parametrization import build_optimizer
    from ptsweep.train import resolve_device

    if args["threads"] > 0:
        torch.set_num_threads(args["threads"])
    device = resolve_device(args["device"])  # also flushes denormals on the CPU, as training does
    V, B, L = args["vocab"], args["batch"], args["seq_len"]
    cfg = model_configs(args["width"], V, args["layers"], args["pt_impl"])[name]
    torch.manual_seed(0)
    model = build_model(cfg, V, L).to(device)
    opt = build_optimizer(model, model.width, model.parametrization, lr=1e-4)

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, V, (B, L), generator=g)  # (B, L)
    selected = torch.rand(B, L, generator=g) < args["mask_prob"]  # (B, L)
    labels = torch.where(selected, ids, torch.full_like(ids, -100))
    inputs = torch.where(selected, torch.full_like(ids, 4), ids)  # [MASK]-like id at the labelled positions
    mask = torch.ones(B, L, dtype=torch.bool)
    inputs, labels, mask = inputs.to(device), labels.to(device), mask.to(device)
    amp = (torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda"
           else torch.autocast("cpu", enabled=False))

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def step() -> float:
        with amp:
            loss, _ = mlm_loss(model, inputs, mask, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss.detach())

    for _ in range(args["warmup"]):
        step()
    sync()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times, cpu_times = [], []
    for _ in range(args["steps"]):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        sync()
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
    if device.type == "cuda":
        peak_mb = torch.cuda.max_memory_allocated(device) / 2**20
        mem_kind = "cuda max_memory_allocated"
    else:
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
        mem_kind = "peak RSS of the process"
    step_s, cpu_s = statistics.median(times), statistics.median(cpu_times)
    tps = B * L / step_s
    fpt = flops_per_token(cfg, V, L, args["mask_prob"])
    shape = (f"N={cfg.width} C={cfg.channels} r={cfg.rank} M={cfg.topics} K={cfg.n_classes} T={cfg.n_iters} "
             f"{pt_path(cfg, device.type)}"
             if name == "pt" else f"d={cfg.width} layers={cfg.n_layers}")
    return {"model": name, "shape": shape, "width": cfg.width, "params": param_count(cfg, V)["total"],
            "params_counted": sum(p.numel() for p in model.parameters()), "step_s_median": step_s,
            "step_s_all": times, "tokens_per_s": tps,
            "cpu_s_median": cpu_s, "cpu_s_all": cpu_times, "tokens_per_cpu_s": B * L / cpu_s,
            "flops_per_token": fpt, "flops_per_s": fpt * tps,
            "peak_mem_mb": peak_mb, "mem_kind": mem_kind, "device": str(device),
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor(),
            "threads": torch.get_num_threads()}


def markdown(results: list[dict], meta: dict) -> str:
    lines = [f"# PT vs BERT vs UT at matched size ({meta['device']}, batch {meta['batch']} x {meta['seq_len']}, "
             f"V={meta['vocab']}, {meta['steps']} timed steps after {meta['warmup']} warm-up)", "",
             "| model | shape | params | step (s, median) | CPU s/step | tokens/s | train FLOPs/token | "
             "achieved FLOP/s | peak mem (MB) |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['model']} | {r['shape']} | {r['params'] / 1e6:.2f}M | {r['step_s_median']:.3f} | "
                     f"{r['cpu_s_median']:.3f} | {r['tokens_per_s']:,.0f} | {r['flops_per_token']:.3g} | "
                     f"{r['flops_per_s']:.3g} | "
                     f"{r['peak_mem_mb']:,.0f} |")
    lines += ["", f"Memory: {results[0]['mem_kind']}. FLOP/s = analytic FLOPs/token x tokens/s. CPU s/step: the "
              "process's CPU time (all its threads); on shared cores it counts only the time the step ran.", "",
              ratio_line(results)]
    return "\n".join(lines) + "\n"


def ratio_line(results: list[dict]) -> str:
    by = {r["model"]: r for r in results}
    if "pt" not in by or "bert" not in by:
        return ""
    pt, bert = by["pt"], by["bert"]
    cpu = pt["tokens_per_cpu_s"] / bert["tokens_per_cpu_s"]
    return (f"PT/BERT achieved FLOP/s ratio: {pt['flops_per_s'] / bert['flops_per_s']:.3f} "
            f"(tokens/s ratio {pt['tokens_per_s'] / bert['tokens_per_s']:.3f}, "
            f"FLOPs/token ratio {pt['flops_per_token'] / bert['flops_per_token']:.2f}); per process CPU second: "
            f"tokens ratio {cpu:.3f}, FLOP ratio {cpu * pt['flops_per_token'] / bert['flops_per_token']:.3f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=3, help="timed steps per model (median reported)")
    p.add_argument("--warmup", type=int, default=1, help="untimed warm-up steps")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda[:i]")
    p.add_argument("--width", type=int, default=256, help="PT width N (base shape); baselines are matched to it")
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--layers", type=int, default=4, help="PT MFVI iterations = BERT layers = UT steps")
    p.add_argument("--mask-prob", type=float, default=0.15)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    p.add_argument("--models", default="pt,bert,ut")
    p.add_argument("--pt-impl", default="auto", choices=["auto", "dense", "blockwise"],
                   help="PT's model.attention_impl (the path it took is printed in the shape column)")
    p.add_argument("--out", default=str(ROOT / "runs" / "bench"))
    p.add_argument("--tracker", default="offline", choices=["offline", "online", "disabled"],
                   help="W&B mode of the summary run (local files are always written)")
    a = p.parse_args(argv)
    args = {k: getattr(a, k) for k in ("steps", "warmup", "device", "width", "vocab", "batch", "seq_len", "layers",
                                       "mask_prob", "threads", "pt_impl")}
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    try:  # every shape first: an impossible width is one line before any model is timed, not a pool traceback
        shapes = model_configs(a.width, a.vocab, a.layers, a.pt_impl)
    except ValueError as e:
        print(f"bench_models: --width {a.width}: {e}", file=sys.stderr)
        return 2
    unknown = [m for m in models if m not in shapes]
    if unknown:
        print(f"bench_models: unknown model(s) {', '.join(unknown)} (choose from {', '.join(shapes)})", file=sys.stderr)
        return 2
    ctx = mp.get_context("spawn")
    results = []
    for name in models:
        with ctx.Pool(1) as pool:  # a fresh process per model: clean peak-memory numbers
            r = pool.apply(bench_one, (name, args))
        print(f"{name}: {r['shape']}  {r['tokens_per_s']:,.0f} tokens/s  {r['flops_per_s']:.3g} FLOP/s  "
              f"peak {r['peak_mem_mb']:,.0f} MB", flush=True)
        results.append(r)
    meta = {**args, "device": results[0]["device"], "platform": platform.platform(),
            "python": platform.python_version(), "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    out = write_outputs(a.out, "bench", meta, results, markdown(results, meta))
    _log_to_tracker(a.tracker, out, results, meta)
    return 0


def _log_to_tracker(mode: str, out: Path, results: list[dict], meta: dict) -> None:
    """One W&B summary run (table + bench.json/bench.md artifact) through the tracker interface; never fails."""
    if mode == "disabled":
        return
    try:
        import pandas as pd

        from ptsweep.config import TrackerConfig
        from ptsweep.tracking import make_tracker

        tracker = make_tracker(TrackerConfig(mode=mode), results_path=out / "results.jsonl")
        tracker.start(out / "wandb_summary", {"bench": meta}, name="bench", group="bench", job_type="summary")
        tracker.log_table("bench", pd.DataFrame(results).drop(columns=["shape"], errors="ignore"))
        tracker.log_artifact("bench-summary", "bench-summary", [out / "bench.json", out / "bench.md"])
        tracker.finish({"status": "ok"})
    except Exception as e:  # noqa: BLE001 - the local files are the record
        print(f"W&B summary run failed: {type(e).__name__}: {e}".splitlines()[0], file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
