"""What the paper preset costs on one GPU, measured the way training runs (``make bench-cluster``; on a lent GPU
machine through ``bench/gpu_cluster_check.sh``).

Every measurement is a fresh process running ``ptsweep.train``'s step on the paper's batch (256 x 128, V = 30522,
15 % of the positions labelled): the micro-batch of ``train.micro_batch_size=auto``, bf16 autocast, TF32, the fused
AdamW, the grad-norm clip; timed steps after warm-up steps (the micro-batch probe and any compiling happen there).
Inputs are random token ids: data loading is not timed (the prefetch thread overlaps it in training). Parts:

- ``pack``: total tokens/s of 1, 2 and 4 PT trials at width 256 on one GPU (each process capped at 1/n of the memory,
  as ``ray.pack_gpus_per_trial`` does; their timed steps start together);
- ``mfu``: PT's MFU at widths 256 and 1536, eager and with ``train.compile`` (CUDA graphs: reduce-overhead);
- ``ratio``: BERT at the width matched to PT's parameter count (``sizing.match_width``), for PT/BERT tokens/s;
- ``wide``: 20 steps of PT at width 3072;
- ``plan`` (from the rows above): measured peak memory and micro-batch against ``ptsweep.planner``'s prediction.

``--smoke`` runs every part but the compiled rows on the CPU at tiny shapes (widths 128 / 192 / 256, batch 8 x 32,
V = 1000) in well under two minutes: the CPU inductor compile alone takes minutes (``tests/test_compile.py`` covers
the compiled step's losses). Writes ``<out>/cluster.json`` and ``<out>/cluster.md``.

    python bench/bench_cluster.py [--smoke] [--parts pack,mfu,ratio,wide] [--out runs/bench/cluster]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import platform
import statistics
import sys
import time
from pathlib import Path

from bench_models import model_configs
from bench_output import write_outputs

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout without installing
    sys.path.insert(0, str(ROOT))

FULL = {"widths": (256, 1536), "wide": 3072, "batch": 256, "seq_len": 128, "vocab": 30522, "steps": 10, "warmup": 3,
        "wide_steps": 20, "packs": (1, 2, 4), "compile": "reduce-overhead", "device": "cuda"}
SMOKE = {"widths": (128, 192), "wide": 256, "batch": 8, "seq_len": 32, "vocab": 1000, "steps": 2, "warmup": 1,
         "wide_steps": 2, "packs": (1, 2), "compile": None, "device": "cpu"}
PARTS = ("pack", "mfu", "ratio", "wide")


def _batch(spec: dict, device):
    """Random ids, 15 % of the positions labelled and shown as a [MASK]-like id (as bench_models)."""
    import torch

    g = torch.Generator().manual_seed(0)
    B, L, V = spec["batch"], spec["seq_len"], spec["vocab"]
    ids = torch.randint(5, V, (B, L), generator=g)  # (B, L)
    selected = torch.rand(B, L, generator=g) < 0.15  # (B, L)
    return {"input_ids": torch.where(selected, torch.full_like(ids, 4), ids).to(device),
            "attention_mask": torch.ones(B, L, dtype=torch.bool, device=device),
            "labels": torch.where(selected, ids, torch.full_like(ids, -100)).to(device)}


def measure(spec: dict, barrier=None) -> dict:
    """One process: ``spec["steps"]`` timed training steps of ``spec["model"]`` at ``spec["width"]`` after
    ``spec["warmup"]`` (``barrier``: wait for the other packed processes before timing)."""
    import torch

    from ptsweep.models import build_model
    from ptsweep.models.sizing import flops_per_token
    from ptsweep.parametrization import build_optimizer
    from ptsweep.train import accumulate_gradients, resolve_device, resolve_micro_batch
    from ptsweep.train import monitor
    from ptsweep.train.state import compile_encoder, set_tf32, uses_bf16

    device = resolve_device(spec["device"])
    cuda = device.type == "cuda"
    if cuda and spec["fraction"] < 1:
        torch.cuda.set_per_process_memory_fraction(spec["fraction"], device)
    cfg = model_configs(spec["width"], spec["vocab"], 4, names=(spec["model"],))[spec["model"]]
    torch.manual_seed(0)
    model = build_model(cfg, spec["vocab"], spec["seq_len"]).to(device)
    opt = build_optimizer(model, model.width, model.parametrization, lr=1e-4, device_type=device.type)
    compile_encoder(model, spec["compile"] or "none", device)
    set_tf32(device, True)
    batch = _batch(spec, device)
    micro = resolve_micro_batch("auto", model, batch, device, "auto", opt)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)

    def step() -> None:
        if spec["compile"] == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        accumulate_gradients(model, batch, micro, device, "auto")
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize(device)

    t0 = time.perf_counter()
    for _ in range(spec["warmup"]):
        step()
    warmup_s = time.perf_counter() - t0
    if barrier is not None:
        barrier.wait()
    times = []
    for _ in range(spec["steps"]):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    tps = spec["batch"] * spec["seq_len"] * len(times) / sum(times)
    name = torch.cuda.get_device_name(device) if cuda else "cpu"
    peak = monitor.peak_flops(name, monitor.matmul_precision(device, uses_bf16(device, "auto")))
    fpt = flops_per_token(cfg, spec["vocab"], spec["seq_len"], 0.15)
    return {**{k: spec[k] for k in ("model", "width", "compile", "fraction")}, "model_width": cfg.width,
            "device_name": name, "micro_batch": micro, "step_s_median": statistics.median(times),
            "tokens_per_s": tps, "flops_per_token": fpt, "mfu": monitor.mfu(fpt, tps, peak),
            "peak_mem_gib": monitor.peak_memory_gib(device), "warmup_s": warmup_s,
            "total_mem_gib": torch.cuda.get_device_properties(device).total_memory / 2**30 if cuda else None}


def _child(spec: dict, barrier, results) -> None:
    try:
        results.put(measure(spec, barrier))
    except BaseException as e:  # noqa: BLE001 - one failed row, reported, not the whole bench
        if barrier is not None:
            barrier.abort()
        results.put({**{k: spec[k] for k in ("model", "width", "compile", "fraction")},
                     "error": f"{type(e).__name__}: {e}".splitlines()[0][:300]})


def run_processes(specs: list[dict], timeout_s: float) -> list[dict]:
    """``measure`` each spec in its own spawned process, all at once (their timed steps start together)."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(specs)) if len(specs) > 1 else None
    results = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(s, barrier, results)) for s in specs]
    for p in procs:
        p.start()
    out = []
    deadline = time.time() + timeout_s
    for s in specs:
        try:
            out.append(results.get(timeout=max(1.0, deadline - time.time())))
        except Exception:  # noqa: BLE001 - queue.Empty: a process hung or died
            out.append({**{k: s[k] for k in ("model", "width", "compile", "fraction")},
                        "error": f"no result within {timeout_s:.0f} s"})
    for p in procs:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
    return out


def _spec(shape: dict, model: str, width: int, compile_mode=None, fraction: float = 1.0, steps=None) -> dict:
    return {"model": model, "width": width, "compile": compile_mode, "fraction": fraction,
            "steps": steps or shape["steps"], **{k: shape[k] for k in ("batch", "seq_len", "vocab", "warmup",
                                                                      "device")}}


def run_parts(shape: dict, parts, timeout_s: float, save) -> dict:
    """The rows of each requested part (module docstring), ``save(results)`` after each (a run cut short keeps what
    it measured); the compiled rows last, since their compile takes longest. One trial alone on the GPU is the
    eager PT row at the small width, measured once."""
    out: dict = {}
    small, large = shape["widths"]
    alone: dict = {}

    def single(model: str, width: int, compile_mode=None, steps=None) -> dict:
        key = (model, width, compile_mode, steps)
        if key not in alone:
            alone[key] = run_processes([_spec(shape, model, width, compile_mode, steps=steps)], timeout_s)[0]
        return alone[key]

    if "pack" in parts:
        out["pack"] = []
        for n in shape["packs"]:
            rows = [single("pt", small)] if n == 1 else \
                run_processes([_spec(shape, "pt", small, fraction=1.0 / n)] * n, timeout_s)
            ok = [r for r in rows if "error" not in r]
            out["pack"].append({"trials": n, "total_tokens_per_s": sum(r["tokens_per_s"] for r in ok)
                                if len(ok) == n else None, "rows": rows})
        save(out)
    if "mfu" in parts or "ratio" in parts:
        out["mfu"] = [single("pt", w) for w in (small, large)]
        save(out)
    if "ratio" in parts:
        out["ratio"] = [single("bert", w) for w in (small, large)]
        save(out)
    if "wide" in parts:
        out["wide"] = single("pt", shape["wide"], steps=shape["wide_steps"])
        save(out)
    if "mfu" in parts and shape["compile"]:
        for w in (small, large):
            out["mfu"].append(single("pt", w, shape["compile"]))
            save(out)
    return out


def plan_rows(shape: dict, measured: list[dict]) -> list[dict]:
    """Each measured PT row beside ``ptsweep.planner``'s activation and static memory and its micro-batch for this
    device's memory (planned peak = static + micro x activation peak per sequence; the planner counts fp32, so bf16
    autocast should land below it)."""
    from ptsweep import planner

    rows = []
    for r in measured:
        if "error" in r or r["model"] != "pt" or r["compile"]:
            continue
        cfg = model_configs(r["width"], shape["vocab"], 4, names=("pt",))["pt"]
        act = planner.activation_bytes(cfg, shape["vocab"], shape["seq_len"])["peak"]
        static = planner.static_bytes(cfg, shape["vocab"])
        mem_gb = (r["total_mem_gib"] or 0.0) * 2**30 / 1e9
        micro = planner.micro_batch(shape["batch"], act, static, mem_gb) if mem_gb else None
        rows.append({"width": r["width"], "planned_micro_batch": micro, "auto_micro_batch": r["micro_batch"],
                     "planned_peak_gib": (static + (micro or r["micro_batch"]) * act) / 2**30,
                     "measured_peak_gib": r["peak_mem_gib"]})
    return rows


def _fmt(v, spec: str = ".3g") -> str:
    return "-" if v is None else format(v, spec)


def markdown(res: dict, meta: dict) -> str:
    lines = [f"# Cluster check ({meta['device_name']}, batch {meta['batch']} x {meta['seq_len']}, V={meta['vocab']}, "
             f"{meta['steps']} timed steps after {meta['warmup']})", ""]
    if "pack" in res:
        lines += [f"| PT trials on one GPU (width {meta['widths'][0]}) | total tokens/s | per trial |",
                  "|---|---:|---|"]
        for p in res["pack"]:
            per = ", ".join(r.get("error") or f"{r['tokens_per_s']:,.0f}" for r in p["rows"])
            lines.append(f"| {p['trials']} | {_fmt(p['total_tokens_per_s'], ',.0f')} | {per} |")
        lines.append("")
    rows = res.get("mfu", []) + res.get("ratio", []) + ([res["wide"]] if "wide" in res else [])
    lines += ["| model | width | compile | micro | step s | tokens/s | MFU | peak GiB |",
              "|---|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['width']} | {r['compile'] or 'none'} | {r['error']} |||||")
            continue
        lines.append(f"| {r['model']} | {r['model_width']} | {r['compile'] or 'none'} | {r['micro_batch']} | "
                     f"{r['step_s_median']:.3f} | {r['tokens_per_s']:,.0f} | {_fmt(r['mfu'])} | "
                     f"{_fmt(r['peak_mem_gib'], '.2f')} |")
    pt = {r["width"]: r for r in res.get("mfu", []) if not r.get("compile") and "error" not in r}
    for b in res.get("ratio", []):
        if "error" not in b and b["width"] in pt:
            ratio = pt[b["width"]]["tokens_per_s"] / b["tokens_per_s"]
            lines.append(f"\nPT/BERT tokens/s at PT width {b['width']} (BERT width {b['model_width']}): {ratio:.3f}")
    if res.get("plan"):
        lines += ["", "| PT width | planned micro | auto micro | planned peak GiB | measured peak GiB |",
                  "|---:|---:|---:|---:|---:|"]
        lines += [f"| {p['width']} | {_fmt(p['planned_micro_batch'])} | {p['auto_micro_batch']} | "
                  f"{p['planned_peak_gib']:.2f} | {_fmt(p['measured_peak_gib'], '.2f')} |" for p in res["plan"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny shapes, no compiled rows")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per measured process group")
    ap.add_argument("--out", default=str(ROOT / "runs" / "bench" / "cluster"))
    a = ap.parse_args(argv)
    parts = [p for p in a.parts.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        print(f"bench_cluster: unknown part(s) {', '.join(unknown)} (choose from {', '.join(PARTS)})", file=sys.stderr)
        return 2
    shape = SMOKE if a.smoke else FULL
    started = time.strftime("%Y-%m-%dT%H:%M:%S")

    def save(res: dict) -> None:
        measured = res.get("mfu", []) + ([res["wide"]] if "wide" in res else [])
        res["plan"] = plan_rows(shape, measured)
        first = next((r for r in measured + res.get("ratio", []) if "error" not in r), {})
        meta = {**shape, "smoke": a.smoke, "parts": parts, "platform": platform.platform(),
                "device_name": first.get("device_name", "?"), "started": started,
                "saved": time.strftime("%Y-%m-%dT%H:%M:%S")}
        write_outputs(a.out, "cluster", meta, [res], markdown(res, meta))

    save(run_parts(shape, parts, a.timeout, save))
    return 0


if __name__ == "__main__":
    sys.exit(main())
