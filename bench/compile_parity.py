"""Does ``train.compile`` change what a model learns? The GPU check's training step (``cluster_measure``: a model the
plan prices, random token ids, bf16 autocast on CUDA, the fused AdamW, the grad-norm clip) run eager twice and
compiled once from the same initialisation on the same batches, with each step's loss: the largest |loss difference|
between compiled and eager, beside the one between the two eager runs (the noise floor of non-deterministic
kernels), and the compile's wall time.

    python bench/compile_parity.py [--model pt] [--scale 256] [--steps 30] [--mode reduce-overhead] [--out FILE]
    python bench/compile_parity.py --dry     (the CPU, the smoke preset's shapes, mode 'default')
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import bench_cluster
from cluster_measure import random_batch, train_step


def losses(spec: dict, steps: int, lr: float) -> dict:
    """Each step's loss of one run of ``spec`` (seed 0; batch i is the GPU check's batch at seed i) and the wall
    time of its first step (with ``spec['compile']``: the compile)."""
    import torch

    from ptsweep.models import build_model
    from ptsweep.parametrization import build_optimizer
    from ptsweep.train import resolve_device
    from ptsweep.train.state import compile_encoder, set_tf32

    device = resolve_device(spec["device"])
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = build_model(spec["model_cfg"], spec["vocab"], spec["seq_len"]).to(device)
    opt = build_optimizer(model, model.width, model.parametrization, lr=lr, device_type=device.type)
    compile_encoder(model, spec["compile"], device)
    set_tf32(device, True)
    out, first_s = [], 0.0
    for i in range(steps):
        torch.manual_seed(i)
        batch = random_batch(spec, device)
        t0 = time.perf_counter()
        out.append(float(train_step(model, opt, batch, spec["batch"], device, spec["compile"])))
        first_s = first_s or time.perf_counter() - t0
    return {"losses": out, "first_step_s": first_s}


def parity(model: str, scale: int, steps: int, mode: str, lr: float, dry: bool) -> dict:
    """Eager, eager again and compiled runs of one plan model (module docstring), and their largest differences."""
    shape = bench_cluster.DRY if dry else bench_cluster.FULL
    models, run = bench_cluster.plan_models({**shape, "scales": (scale,), "wide": ()})
    spec = bench_cluster.make_spec(shape, run, models, model, scale)
    runs = {name: losses({**spec, "compile": m}, steps, lr)
            for name, m in (("eager", "none"), ("eager_again", "none"), ("compiled", mode))}
    gap = {other: max(abs(a - b) for a, b in zip(runs["eager"]["losses"], runs[other]["losses"]))
           for other in ("eager_again", "compiled")}
    return {"model": model, "scale": scale, "width": int(spec["model_cfg"].width), "mode": mode, "steps": steps,
            "lr": lr, "batch": spec["batch"], "device": spec["device"], "max_abs_diff_eager_eager": gap["eager_again"],
            "max_abs_diff_compiled_eager": gap["compiled"], "compile_first_step_s": runs["compiled"]["first_step_s"],
            "eager_first_step_s": runs["eager"]["first_step_s"],
            **{f"{k}_losses": v["losses"] for k, v in runs.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="pt", choices=bench_cluster.MODELS)
    ap.add_argument("--scale", type=int, default=0, help="PT scale (default: the shape's first)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--mode", default="", help="train.compile mode (default: reduce-overhead; --dry: default)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--dry", action="store_true")
    ap.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    a = ap.parse_args(argv)
    shape = bench_cluster.DRY if a.dry else bench_cluster.FULL
    r = parity(a.model, a.scale or shape["scales"][0], a.steps, a.mode or ("default" if a.dry else "reduce-overhead"),
               a.lr, a.dry)
    print(f"{r['model']} width {r['width']}, {r['steps']} steps at lr {r['lr']:g}, {r['mode']}: max |loss diff| "
          f"compiled - eager {r['max_abs_diff_compiled_eager']:.2e}, eager - eager {r['max_abs_diff_eager_eager']:.2e};"
          f" first step {r['compile_first_step_s']:.1f} s compiled, {r['eager_first_step_s']:.2f} s eager; "
          f"final loss {r['eager_losses'][-1]:.4f} / {r['compiled_losses'][-1]:.4f}")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
