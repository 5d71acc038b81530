"""How much of AdamW's step its eps takes, per parameter: in a run's checkpoint (trained) or at the first step of the
weight study's model at several widths (init).

AdamW's step on a coordinate is lr m / (sqrt(v) + eps), so a coordinate whose gradient RMS sqrt(v) is near eps
moves less than lr: by the share eps / (sqrt(v) + eps). Under muP a Z-logit coordinate's gradient falls like 1/N
([S] Table 2's feature gradients: the head reads N Q_z through an output layer of size 1/N, and dQ_n / dl_n ~ Q_n
~ 1/N), so with a fixed eps the unary S's share grows like N. ``--widths`` prints, for one real training batch at
init, the median of |g| over the entries each parameter's batch touches, the share eps / (|g| + eps) that AdamW's
bias-corrected first step gives them, and the slope of log median |g| against log N.

    python experiments/weight-drift/adam_eps.py --checkpoint runs/<study>/trials/<key>/checkpoint.pt
    python experiments/weight-drift/adam_eps.py --widths 32 128 512 data=python_docs  # overrides: k=v
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ptsweep import data as data_mod
from ptsweep.config import compose, from_dict
from ptsweep.models import build_model, mlm_logits
from ptsweep.parametrization import param_groups
from ptsweep.train import seed_everything

STUDY = ["+experiment=candidate"]
"""The weight study's settings (conf/experiment/candidate.yaml)."""

POINT = ["model.scaling=rank", "model.base_channels=4", "model.parametrization=mup_sp", "optim.lr=0.02", "seed=0"]
"""The weight study's trial beyond ``STUDY`` (``lr_transfer_plan.point_trial``: mup_sp, rank, seed 0)."""


def eps_share(rms: torch.Tensor, eps: float) -> float:
    """Mean over coordinates of eps / (rms + eps): the fraction of AdamW's step that eps takes away."""
    return float((eps / (rms + eps)).mean())


def _ordered_names(model: torch.nn.Module, cfg) -> list[str]:
    """Parameter names in the optimizer's order (``parametrization.param_groups``: one group per role)."""
    names = {id(p): n for n, p in model.named_parameters()}
    groups = param_groups(model, cfg.model.width, cfg.model.parametrization)
    return [names[id(p)] for g in groups for p in g["params"]]


def from_checkpoint(path: Path) -> list[str]:
    """One line per parameter: shape, quantiles of sqrt(v) (Adam's second moment, not bias-corrected: the run is
    past its first hundred steps) and eps's share of the step."""
    ck = torch.load(path, map_location="cpu", weights_only=False)
    cfg = from_dict(ck["config"])
    model = build_model(cfg.model, ck["model"]["unary"].shape[0], cfg.data.seq_len)
    names, eps = _ordered_names(model, cfg), cfg.optim.eps
    out = [f"{path}: width {cfg.model.width}, step {ck['state']['step']}, eps {eps:g}"]
    for i, st in sorted(ck["optimizer"]["state"].items()):
        rms = st["exp_avg_sq"].flatten().sqrt()
        q = np.quantile(rms.numpy(), [0.1, 0.5, 0.9])
        out.append(f"  {names[i]:12s} {str(tuple(st['exp_avg_sq'].shape)):18s} sqrt(v) q10 / 50 / 90 "
                   f"{q[0]:.1e} / {q[1]:.1e} / {q[2]:.1e}   eps share {eps_share(rms, eps):.3f}")
    return out


def first_step(widths: list[int], overrides: list[str]) -> list[str]:
    """Per width, the init gradient of one training batch: median |g| over touched entries and eps's share."""
    rows: dict[str, list[tuple[int, float]]] = {}
    out = []
    cfg = compose(STUDY + POINT + overrides)  # the data and the batch are the same at every width
    corpus = data_mod.prepare(cfg.data)
    batch = data_mod.train_batch(corpus, cfg.data, 0, cfg.train.batch_size, cfg.seed)
    ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
    for width in widths:
        cfg = compose(STUDY + POINT + [f"model.width={width}", *overrides])
        seed_everything(cfg.seed)
        model = build_model(cfg.model, corpus.vocab_size, cfg.data.seq_len)
        F.cross_entropy(mlm_logits(model, ids, mask, labels), labels[labels != -100]).backward()
        line = [f"width {width}:"]
        for name, p in model.named_parameters():
            g = p.grad.abs().flatten()
            g = g[g > 0]
            med = float(g.median())
            rows.setdefault(name, []).append((width, med))
            line.append(f"{name} {med:.1e} ({eps_share(g, cfg.optim.eps):.3f})")
        out.append("  ".join(line))
    if len(widths) > 1:
        slopes = {n: np.polyfit(np.log([w for w, _ in r]), np.log([m for _, m in r]), 1)[0] for n, r in rows.items()}
        out.append("slope of log median |g| on log N: " + "  ".join(f"{n} {s:+.2f}" for n, s in slopes.items()))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", type=Path, nargs="*", default=[])
    ap.add_argument("--widths", type=int, nargs="*", default=[])
    argv = sys.argv[1:] if argv is None else argv
    overrides = [a for a in argv if "=" in a and not a.startswith("-")]  # Hydra overrides for --widths
    args = ap.parse_args([a for a in argv if a not in overrides])
    if not args.checkpoint and not args.widths:
        sys.exit("adam_eps: give --checkpoint PATH... or --widths N...")
    for path in args.checkpoint:
        if not path.is_file():
            sys.exit(f"adam_eps: no checkpoint at {path}")
        print("\n".join(from_checkpoint(path)))
    if args.widths:
        torch.set_num_threads(1)
        print("median |g| over touched entries (eps share at AdamW's first step)")
        print("\n".join(first_step(args.widths, overrides)))


if __name__ == "__main__":
    main()
