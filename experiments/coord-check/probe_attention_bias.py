"""The default's attention logits at init under scaling=channels (experiments/coord-check/attention-logits.md).

``model``: for each width (mup_sp anchored at ``--anchor``), seeds 0..S-1, random tokens (4 x 64, vocabulary 8192),
the coordinate check's statistic of the MFVI iteration-1 attention logits (mean |A - row mean| over valid pairs)
beside the same statistic of the per-(class, channel) bias beta = s_H <U^T 1, V^T 1> alone, and their correlation
over seeds (1 = the logits at init are that bias); also the RMS of beta (derivation: r_A / r0^(3/2) = 1/64).

``null``: the check's log-log slope of that statistic when the logits are exactly such biases (Gaussian U^T 1,
V^T 1 ~ N(0, 1/r0) per coordinate, the same law at every width), over ``--trials`` repetitions of the check with
``--seeds`` seeds per width (``--equal-draws``: seeds x C(widest) / C(width), as sweep.coord_check.equal_draws).

    .venv/bin/python experiments/coord-check/probe_attention_bias.py model [--widths 64,128,256]
        [--anchor 64] [--seeds 24]
    .venv/bin/python experiments/coord-check/probe_attention_bias.py null [--widths 64,128,256]
        [--seeds 2] [--equal-draws] [--trials 2000]
"""

from __future__ import annotations

import argparse
import dataclasses
import math

import torch

from ptsweep.config import PTConfig
from ptsweep.models.pt import ProbabilisticTransformer, class_index

LENGTH, VOCAB = 64, 8192


def row_centred_size(logits: torch.Tensor, keep: torch.Tensor) -> float:
    """The check's statistic (``sweep.coords._pt_activations``): mean |A - mean_j A| over valid pairs."""
    row_mean = torch.where(keep, logits, 0.0).sum(-1, keepdim=True) / keep.sum(-1, keepdim=True)
    return float((logits - row_mean).masked_select(keep).abs().mean())


def class_bias_logits(beta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """beta (K, C) spread over the pairs of one sequence: (C, L, L) logits beta[k(i, j), c] and the valid mask."""
    kappa = class_index(LENGTH, PTConfig().dists)                    # (L, L), -1 on the diagonal
    logits = beta[kappa.clamp_min(0)].permute(2, 0, 1)               # (C, L, L)
    return logits, (kappa >= 0).expand_as(logits)


def model_rows(widths: list[int], anchor: int, seeds: int) -> None:
    for width in widths:
        base = dataclasses.replace(PTConfig(), width=anchor, scaling="channels")
        cfg = dataclasses.replace(base, width=width, **{k.split(".")[1]: v for k, v in base.anchor_overrides().items()})
        real, bias, rms = [], [], []
        for seed in range(seeds):
            torch.manual_seed(seed)
            model = ProbabilisticTransformer(cfg, VOCAB)
            ids = torch.randint(0, VOCAB, (4, LENGTH), generator=torch.Generator().manual_seed(100 + seed))
            trace = model.inspect(ids, torch.ones_like(ids, dtype=torch.bool))
            attn = trace[0]["attn_logits"]                           # (B, C, L, L)
            real.append(row_centred_size(attn, model.valid_pairs(torch.ones_like(ids, dtype=torch.bool))
                                         .expand_as(attn)))
            with torch.no_grad():
                beta = model.const.s_h * (model.U.sum(2) * model.V.sum(2)).sum(-1)   # (K, C)
            bias.append(row_centred_size(*class_bias_logits(beta)))
            rms.append(float(beta.pow(2).mean().sqrt()))
        r, b = torch.tensor(real), torch.tensor(bias)
        print(f"N={width} C={cfg.channels} r={cfg.rank}: logits {r.mean():.4f} +- {r.std() / math.sqrt(seeds):.4f} | "
              f"bias alone {b.mean():.4f} | corr {torch.corrcoef(torch.stack([r, b]))[0, 1]:.3f} | "
              f"rms beta {torch.tensor(rms).pow(2).mean().sqrt():.4f} (seeds 0, 1: {r[0]:.4f}, {r[1]:.4f})")


def null_slopes(widths: list[int], seeds: int, equal_draws: bool, trials: int, r0: int = 64, r_a: int = 8) -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.log(torch.tensor(widths, dtype=torch.float64))
    slopes = []
    for _ in range(trials):
        y = []
        for width in widths:
            channels = width // 64                                   # C = N / 64 (base shape N0 = 256, C0 = 4)
            n_seeds = seeds * (max(widths) // width if equal_draws else 1)
            sizes = []
            for _ in range(n_seeds):
                u, v = (torch.randn(8, channels, r0, generator=gen) / math.sqrt(r0) for _ in range(2))
                sizes.append(row_centred_size(*class_bias_logits((r_a / r0) * (u * v).sum(-1))))
            y.append(math.log(sum(sizes) / n_seeds))
        xc, y = x - x.mean(), torch.tensor(y, dtype=torch.float64)
        slopes.append(float((xc * (y - y.mean())).sum() / (xc ** 2).sum()))
    s = torch.tensor(slopes)
    print(f"widths {widths}, {seeds} seeds{' x C(widest)/C' if equal_draws else ''}: null slope mean {s.mean():+.3f}, "
          f"sd {s.std():.3f}, P(|slope| > 0.25) = {(s.abs() > 0.25).double().mean():.3f}, "
          f"P(slope >= 0.47) = {(s >= 0.47).double().mean():.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("model", "null"))
    ap.add_argument("--widths", default="64,128,256")
    ap.add_argument("--anchor", type=int, default=64)
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--equal-draws", action="store_true")
    ap.add_argument("--trials", type=int, default=2000)
    args = ap.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    if args.mode == "model":
        model_rows(widths, args.anchor, args.seeds or 24)
    else:
        null_slopes(widths, args.seeds or 2, args.equal_draws, args.trials)


if __name__ == "__main__":
    main()
