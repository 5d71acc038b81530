"""What ``train.compile`` costs and gains on this machine: a PT training step eager vs ``torch.compile(model.encode)``
(as ``ptsweep.train`` compiles it), with the compile cost measured cold (an empty inductor cache) and warm (the cache
that the cold run filled), each in a fresh process.

Each child process builds the model from ``--overrides`` (default: the demo's PT at width 64), runs ``--steps``
AdamW steps on the same batches eager and compiled (same seed), and reports: the first compiled step's wall time (the
compile), the median of the later steps of both, and the largest |loss difference| over the steps.

    python bench/bench_compile.py [--steps 8] [--threads 1] [--out runs/bench/compile.json] [overrides ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OVERRIDES = ["preset=demo", "model.width=64", "model.scaling=rank", "tracker=disabled"]


def _steps(overrides: list[str], steps: int, compiled: bool) -> dict:
    """Wall time and loss of each of ``steps`` training steps (fresh model and optimizer, seed from the config)."""
    import torch

    from ptsweep import data as data_mod
    from ptsweep.config import compose
    from ptsweep.models import build_model
    from ptsweep.parametrization import build_optimizer
    from ptsweep.train import accumulate_gradients, seed_everything

    cfg = compose(overrides)
    seed_everything(cfg.seed)
    corpus = data_mod.prepare(cfg.data)
    model = build_model(cfg.model, corpus.vocab_size, cfg.data.seq_len)
    opt = build_optimizer(model, model.width, model.parametrization, cfg.optim.lr, betas=cfg.optim.betas)
    if compiled:
        model.encode = torch.compile(model.encode)
    times, losses = [], []
    for step in range(steps):
        batch = data_mod.train_batch(corpus, cfg.data, step, cfg.train.batch_size, cfg.seed)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = accumulate_gradients(model, batch, 0, torch.device("cpu"), "fp32")
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
    return {"times": times, "losses": losses}


def child(overrides: list[str], steps: int, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    eager = _steps(overrides, steps, compiled=False)
    comp = _steps(overrides, steps, compiled=True)
    return {"first_compiled_step_s": comp["times"][0], "eager_step_s": statistics.median(eager["times"][1:]),
            "compiled_step_s": statistics.median(comp["times"][1:]),
            "max_abs_loss_diff": max(abs(a - b) for a, b in zip(eager["losses"], comp["losses"])),
            "eager_losses": eager["losses"], "compiled_losses": comp["losses"]}


def run_child(overrides: list[str], steps: int, threads: int, cache: Path) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, __file__, "--child", "--steps", str(steps), "--threads", str(threads), *overrides]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"bench_compile: child failed ({out.returncode}): {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "bench" / "compile.json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args(argv)
    overrides = args.overrides or DEFAULT_OVERRIDES
    if args.child:
        print(json.dumps(child(overrides, args.steps, args.threads)))
        return 0
    with tempfile.TemporaryDirectory(prefix="inductor-cache-") as cache:
        cold = run_child(overrides, args.steps, args.threads, Path(cache))
        warm = run_child(overrides, args.steps, args.threads, Path(cache))
    result = {"overrides": overrides, "steps": args.steps, "threads": args.threads, "cold": cold, "warm": warm,
              "load_average": os.getloadavg()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    for name, r in (("cold", cold), ("warm", warm)):
        print(f"{name}: first compiled step {r['first_compiled_step_s']:.1f} s; step eager {r['eager_step_s']:.3f} s, "
              f"compiled {r['compiled_step_s']:.3f} s (x{r['eager_step_s'] / r['compiled_step_s']:.2f}); "
              f"max |loss diff| {r['max_abs_loss_diff']:.2e}")
    print(f"load average {result['load_average']}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
