"""Interleaved A/B timing of a PT training step: this checkout's PT vs the PT of another source tree (``--base``),
or this checkout's ``--impl`` vs its ``--base-impl`` (two attention implementations, e.g. dense vs blockwise).

Both models are built from the same config and seed in one process and stepped alternately (A, B, B, A, ...), so a
load that changes during the run hits both alike; reports each step time, the medians and their ratio, and the
losses of both (equal up to float rounding when the change is a pure speed-up).

    python bench/compare_pt.py --base /tmp/base [--width 256] [--impl dense] [--rounds 3] [--threads 2]
    python bench/compare_pt.py --base-impl dense --impl blockwise [--width 256] [--rounds 3] [--threads 2]

``--base``: a directory holding an older ``ptsweep`` package (e.g. ``git archive <rev> ptsweep | tar -x -C DIR``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def load_base_pt(base: Path):
    """The ``ptsweep.models.pt`` module of the base tree, imported under another name (its imports of ptsweep's
    config and parametrization resolve to this checkout: the change under test must not touch them)."""
    sys.path.insert(1, str(base))
    name = "base_ptsweep_pt"
    spec = importlib.util.spec_from_file_location(name, base / "ptsweep" / "models" / "pt.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    import torch

    from ptsweep.config import PTConfig
    from ptsweep.models import mlm_loss
    from ptsweep.models.pt import ProbabilisticTransformer

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", type=Path, help="an older source tree (or use --base-impl)")
    p.add_argument("--base-impl", choices=["dense", "blockwise"], help="this checkout with this impl")
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--impl", default="dense", choices=["dense", "blockwise"])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args(argv)
    if (a.base is None) == (a.base_impl is None):
        p.error("give exactly one of --base and --base-impl")
    torch.set_num_threads(a.threads)
    base_cls = ProbabilisticTransformer if a.base is None else load_base_pt(a.base).ProbabilisticTransformer
    cfgs = {"new": PTConfig(width=a.width, attention_impl=a.impl),
            "base": PTConfig(width=a.width, attention_impl=a.base_impl or a.impl)}
    models = {}
    for label, cls in (("new", ProbabilisticTransformer), ("base", base_cls)):
        torch.manual_seed(0)
        models[label] = cls(cfgs[label], a.vocab)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, a.vocab, (a.batch, a.seq_len), generator=g)
    labels = torch.where(torch.rand(a.batch, a.seq_len, generator=g) < 0.15, ids, torch.full_like(ids, -100))
    mask = torch.ones_like(ids, dtype=torch.bool)
    times: dict[str, list[float]] = {k: [] for k in models}
    cpu: dict[str, list[float]] = {k: [] for k in models}
    losses: dict[str, float] = {}
    for rnd in range(a.rounds + 1):  # round 0: warm-up, untimed
        for label, model in (models.items() if rnd % 2 else reversed(models.items())):
            t0, c0 = time.perf_counter(), time.process_time()
            loss, _ = mlm_loss(model, ids, mask, labels)
            loss.backward()
            model.zero_grad(set_to_none=True)
            if rnd:
                times[label].append(time.perf_counter() - t0)
                cpu[label].append(time.process_time() - c0)
            losses[label] = float(loss.detach())
    med = {k: statistics.median(v) for k, v in times.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"load average at the end: {os.getloadavg()}")
    print(f"PT width {a.width} impl={a.impl} (base: {a.base or ''}{a.base_impl or ''}) B={a.batch} L={a.seq_len} "
          f"threads={a.threads}, forward+backward")
    for k in models:
        print(f"  {k}: wall median {med[k]:.3f} s/step {[round(t, 2) for t in times[k]]}; process CPU median "
              f"{med_cpu[k]:.3f} s/step {[round(t, 2) for t in cpu[k]]}; loss {losses[k]:.10f}")
    print(f"  speed-up base/new: wall {med['base'] / med['new']:.3f}x, "
          f"CPU time {med_cpu['base'] / med_cpu['new']:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
