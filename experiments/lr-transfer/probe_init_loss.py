"""Step-0 validation loss of the lr-study's seed-0 muP width-256 model, to every digit, and which ptsweep produced it.

Used to trace the two width-256 trials that ran on a mutated model (README.md, log entry "2026-11-22, c7ffb24"): every
correct run gives 9.011966135905; the s_H = 1/sqrt(r) mutation gives 9.011962462479. To probe a modified copy of the
package, run from outside the repository with ``PYTHONPATH=/path/to/copy`` (that copy is imported before the
editable install).

    python experiments/lr-transfer/probe_init_loss.py [--threads 1] [--junk 0] [--flush-denormal]
"""

from __future__ import annotations

import argparse
import hashlib

import torch

import ptsweep
from ptsweep import data as data_mod
from ptsweep import metrics
from ptsweep.config import compose
from ptsweep.models import build_model
from ptsweep.train import evaluate, seed_everything

OVERRIDES = ["preset=lr_study", "model.scaling=rank", "model.parametrization=mup", "model.width=256", "seed=0",
             "tracker=disabled"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--junk", type=int, default=0, help="floats allocated first (shifts later allocations)")
    ap.add_argument("--flush-denormal", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(args.flush_denormal)
    _junk = torch.empty(args.junk)  # noqa: F841
    cfg = compose(OVERRIDES)
    seed_everything(cfg.seed)
    corpus = data_mod.prepare(cfg.data)
    model = build_model(cfg.model, corpus.vocab_size, cfg.data.seq_len)
    h = hashlib.sha1()
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
    val = data_mod.val_batches(corpus, cfg.data, cfg.train.batch_size)
    ev = evaluate(model, val, torch.device("cpu"), cfg.train.precision, metrics.NoContextBaseline.of(corpus, cfg.data))
    print(f"ptsweep={ptsweep.__file__} threads={args.threads} junk={args.junk} flush_denormal={args.flush_denormal} "
          f"params_sha1={h.hexdigest()[:12]} val_loss_init={ev['val_loss']:.12f}")


if __name__ == "__main__":
    main()
