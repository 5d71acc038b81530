"""Where a PT training step spends its time, by op (torch.profiler, CPU self time).

One training step = forward + backward of the MLM loss (mlm_loss) on random ids, as ``bench_models.py`` builds them
(batch B x L, 15% labelled, V = 30522), PT at its base shape of ``--width`` (C = 4, r = 64 at 256). Warm-up steps run
first; the table sums the profiled steps.

    python bench/profile_pt.py [--width 256] [--impl dense|blockwise] [--steps 2] [--threads 2] [--top 20]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from ptsweep.config import PTConfig
    from ptsweep.models import build_model, mlm_loss

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--impl", default="dense", choices=["dense", "blockwise"])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--top", type=int, default=20)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    cfg = PTConfig(width=a.width, attention_impl=a.impl)
    torch.manual_seed(0)
    model = build_model(cfg, a.vocab, a.seq_len)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, a.vocab, (a.batch, a.seq_len), generator=g)
    labels = torch.where(torch.rand(a.batch, a.seq_len, generator=g) < 0.15, ids, torch.full_like(ids, -100))
    mask = torch.ones_like(ids, dtype=torch.bool)

    def step() -> None:
        loss, _ = mlm_loss(model, ids, mask, labels)
        loss.backward()
        model.zero_grad(set_to_none=True)

    for _ in range(a.warmup):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        wall = (time.perf_counter() - t0) / a.steps
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    print(f"PT width {a.width} C={cfg.channels} r={cfg.rank} impl={a.impl} B={a.batch} L={a.seq_len} "
          f"threads={a.threads}: {wall:.3f} s/step (profiled), {a.steps} steps")
    print("| op | self time (s/step) | share | calls/step |")
    print("|---|---:|---:|---:|")
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[: a.top]:
        print(f"| `{e.key}` | {e.self_cpu_time_total / 1e6 / a.steps:.3f} | {e.self_cpu_time_total / total:.1%} | "
              f"{e.count / a.steps:g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
