"""Per-sequence peak training memory of PT (both scalings), BERT and UT at matched parameters (``make bench-memory``).

Method (CPU): one forward + backward (fp32, 15% of positions labelled; parameter gradients allocated beforehand, no
optimizer step, whose state does not depend on the batch) runs in a fresh spawned process at batch b1 and again at
batch b2; the peak resident set size (``ru_maxrss``) of each process is read after the step, and

    per-sequence memory = (peakRSS(b2) - peakRSS(b1)) / (b2 - b1)

which cancels everything that does not depend on the batch (weights, optimizer state, the interpreter, allocator
slack that is the same at both sizes). It includes the backward pass's transient tensors (e.g. PT's blockwise
recomputation), unlike a count of saved tensors. A second number, ``saved_mb``, counts the unique storages that
autograd saves for backward in one forward (``torch.autograd.graph.saved_tensors_hooks``), also as a difference
between the two batch sizes: it is what ``ptsweep.planner`` models. On CUDA both processes report
``torch.cuda.max_memory_allocated`` instead of RSS.

PT runs at ``--width`` in the given scalings and attention implementations (``model.attention_impl``); BERT and UT
are matched to PT's parameter count (channels scaling) with ``sizing.match_width``.

    python bench/bench_memory.py [--width 1536] [--seq-lens 128,512] [--batches 1,3] [--impls blockwise,dense]

Writes <out>/memory.json and <out>/memory.md and prints the table.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import sys
import time
from pathlib import Path

from bench_output import write_outputs

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def model_config(name: str, width: int, scaling: str, impl: str, vocab: int, layers: int):
    """PT at ``width`` (scaling, impl) or a baseline matched to PT's channels-scaling parameter count."""
    from ptsweep.config import PTConfig
    from ptsweep.models.sizing import match_width

    pt = PTConfig(width=width, n_iters=layers, scaling=scaling, attention_impl=impl)
    pt.validate()
    if name == "pt":
        return pt
    return match_width(name, PTConfig(width=width, n_iters=layers), vocab, n_layers=layers)


def saved_bytes(fn) -> int:
    """Bytes of the unique storages autograd saves while running ``fn()`` (forward only)."""
    import torch

    seen: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    del out
    return sum(seen.values())


def measure(spec: dict) -> dict:
    """One process, one batch size: peak memory of one forward + backward (gradients preallocated, no optimizer:
    its state does not depend on the batch) and the saved-tensor bytes of one forward."""
    import resource

    import torch

    from ptsweep.models import build_model, mlm_loss
    from ptsweep.train import resolve_device

    device = resolve_device(spec["device"])
    cfg = model_config(spec["model"], spec["width"], spec["scaling"], spec["impl"], spec["vocab"], spec["layers"])
    V, B, L = spec["vocab"], spec["batch"], spec["seq_len"]
    torch.manual_seed(0)
    model = build_model(cfg, V, L).to(device)
    for p in model.parameters():  # resident before the step, so the step's peak is parameters + grads + activations
        p.grad = torch.zeros_like(p)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, V, (B, L), generator=g)                      # (B, L)
    labels = torch.where(torch.rand(B, L, generator=g) < 0.15, ids, torch.full_like(ids, -100))
    mask = torch.ones(B, L, dtype=torch.bool)
    ids, labels, mask = ids.to(device), labels.to(device), mask.to(device)
    amp = torch.autocast(device.type, dtype=torch.bfloat16, enabled=spec["precision"] == "bf16")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    with amp:
        loss, _ = mlm_loss(model, ids, mask, labels)
    loss.backward()
    step_s = time.perf_counter() - t0
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(device)
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    with amp:
        saved = saved_bytes(lambda: mlm_loss(model, ids, mask, labels)[0])  # after the peak was read
    return {"peak_bytes": peak, "saved_bytes": saved, "step_s": step_s, "device": str(device),
            "params": sum(p.numel() for p in model.parameters()), "width": cfg.width}


def run_pair(base: dict, batches: tuple[int, int]) -> dict:
    ctx = mp.get_context("spawn")
    res = []
    for b in batches:
        with ctx.Pool(1) as pool:  # fresh process: a clean peak
            res.append(pool.apply(measure, ({**base, "batch": b},)))
    db = batches[1] - batches[0]
    return {**base, "batches": list(batches), "params": res[0]["params"], "matched_width": res[0]["width"],
            "per_seq_mb": (res[1]["peak_bytes"] - res[0]["peak_bytes"]) / db / 1e6,
            "saved_per_seq_mb": (res[1]["saved_bytes"] - res[0]["saved_bytes"]) / db / 1e6,
            "peak_mb": [r["peak_bytes"] / 1e6 for r in res], "step_s": [r["step_s"] for r in res],
            "device": res[0]["device"]}


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [f"# Per-sequence training memory ({meta['device']}, {meta['precision']}, batches {meta['batches']}, "
             f"{meta['layers']} layers/iterations, V={meta['vocab']})", "",
             "| model | scaling | attention | width | params | L | per-seq peak (MB) | saved/seq (MB) | peaks (MB) |",
             "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['scaling'] if r['model'] == 'pt' else '-'} | "
                     f"{r['impl'] if r['model'] == 'pt' else '-'} | {r['matched_width']} | {r['params'] / 1e6:.1f}M | "
                     f"{r['seq_len']} | {r['per_seq_mb']:.1f} | {r['saved_per_seq_mb']:.1f} | "
                     f"{', '.join(f'{p:,.0f}' for p in r['peak_mb'])} |")
    lines += ["", "per-seq peak = (peak(b2) - peak(b1)) / (b2 - b1), fresh process each (peak RSS on CPU); "
              "saved/seq = unique storages saved for backward in one forward, same difference."]
    growth = growth_lines(rows)
    return "\n".join(lines + ([""] + growth if growth else [])) + "\n"


def growth_lines(rows: list[dict]) -> list[str]:
    """Per-sequence growth from the shortest to the longest L for each (model, scaling, impl)."""
    out = []
    keys = {(r["model"], r["scaling"], r["impl"]) for r in rows}
    for key in sorted(keys):
        rs = sorted((r for r in rows if (r["model"], r["scaling"], r["impl"]) == key), key=lambda r: r["seq_len"])
        if len(rs) >= 2 and rs[0]["per_seq_mb"] > 0:
            out.append(f"- {'/'.join(key)}: L {rs[0]['seq_len']} -> {rs[-1]['seq_len']}: per-seq peak x"
                       f"{rs[-1]['per_seq_mb'] / rs[0]['per_seq_mb']:.2f}, saved x"
                       f"{rs[-1]['saved_per_seq_mb'] / max(rs[0]['saved_per_seq_mb'], 1e-9):.2f}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=1536)
    p.add_argument("--seq-lens", default="128,512")
    p.add_argument("--batches", default="1,3", help="two batch sizes b1 < b2")
    p.add_argument("--models", default="pt,bert,ut")
    p.add_argument("--scalings", default="channels,rank", help="PT scalings")
    p.add_argument("--impls", default="blockwise", help="PT attention implementations (blockwise, dense)")
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--device", default="auto")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"], help="bf16: autocast, as training on CUDA")
    p.add_argument("--out", default=str(ROOT / "runs" / "bench"))
    a = p.parse_args(argv)
    # glibc: a fixed mmap threshold (no dynamic raise after frees) returns freed tensors to the OS, so the peak RSS
    # follows the live tensors instead of heap fragmentation; spawned children inherit it.
    os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", "65536")
    batches = tuple(int(x) for x in a.batches.split(","))
    if len(batches) != 2 or not 1 <= batches[0] < batches[1]:
        p.error(f"--batches must be two sizes b1 < b2, got {a.batches}")
    rows = []
    for L in (int(x) for x in a.seq_lens.split(",")):
        for model in (m.strip() for m in a.models.split(",") if m.strip()):
            variants = ([(s, i) for s in a.scalings.split(",") for i in a.impls.split(",")] if model == "pt"
                        else [("channels", "dense")])
            for scaling, impl in variants:
                base = {"model": model, "scaling": scaling, "impl": impl, "width": a.width, "seq_len": L,
                        "vocab": a.vocab, "layers": a.layers, "device": a.device, "precision": a.precision}
                r = run_pair(base, batches)
                print(f"{model:4s} {scaling:8s} {impl:9s} L={L:4d}: {r['per_seq_mb']:7.1f} MB/seq peak, "
                      f"{r['saved_per_seq_mb']:7.1f} MB/seq saved  (peaks {r['peak_mb'][0]:,.0f} / "
                      f"{r['peak_mb'][1]:,.0f} MB)", flush=True)
                rows.append(r)
    meta = {"width": a.width, "batches": list(batches), "layers": a.layers, "vocab": a.vocab, "precision": a.precision,
            "device": rows[0]["device"], "platform": platform.platform(), "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
    write_outputs(a.out, "memory", meta, rows, markdown(rows, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
