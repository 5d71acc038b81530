"""Instrumented PT training ("find why, white-box"): one run of ``ptsweep.train``'s loop with MFVI and
optimizer statistics recorded along the way, and the context metrics at the end.

Every ``--every`` steps, on a fixed batch of validation blocks (eval mode, no dropout):

- per MFVI iteration t: mean over tokens of max N*Q_z (``maxNQ``; 1 = uniform, N = one-hot), the entropies of Q_z,
  Q_h, Q_g as fractions of their maxima (log N, log(L-1), log M), the std of the attention logits over valid pairs,
  and the RMS of each message into Z (unary, child, head, topic) on real tokens;
- per parameter (S, U, V, B, W_out, gamma, b_out): the RMS of the last update / RMS of the weight, and the
  weight RMS itself.

The run trains exactly as ``python -m ptsweep train`` would (same batches, schedule, clipping, optimizer groups);
the final validation metrics come from ``ptsweep.train.evaluate`` with the corpus's context-free baselines.

    PYTHONPATH=. .venv/bin/python experiments/context/probe_training.py --out runs/context/probe-mup-w32.json \\
        preset=lr_study model.width=32 model.scaling=rank optim.lr=0.03125 seed=0

Writes one JSON (config, trace rows, final metrics) and prints a compact table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

from ptsweep import data as data_mod
from ptsweep import metrics
from ptsweep.config import compose, to_dict
from ptsweep.models import build_model
from ptsweep.parametrization import build_optimizer, set_lr
from ptsweep.train import accumulate_gradients, evaluate, lr_factor, num_steps, seed_everything

PARAMS = ("unary", "U", "V", "B", "head_weight", "head_gain", "head_bias")


def _entropy_frac(p: torch.Tensor, size: int, keep: torch.Tensor) -> float:
    """Mean entropy of the distributions ``p`` (..., size) at rows ``keep``, as a fraction of log(size)."""
    h = -(p.clamp_min(1e-30).log() * p).sum(-1)
    return float(h[keep].mean() / math.log(size)) if size > 1 else 0.0


@torch.no_grad()
def mfvi_stats(model, batch: dict) -> list[dict]:
    """Per-iteration statistics of the MFVI on ``batch`` (module docstring)."""
    ids, mask = batch["input_ids"], batch["attention_mask"].bool()
    trace = model.inspect(ids, mask)
    n, length = model.width, ids.shape[1]
    valid = model.valid_pairs(mask)[:, 0]                                    # (B, L, L)
    rows = []
    for t, tr in enumerate(trace):
        q_z, q_h, q_g = tr["q_z"], tr["q_h"], tr["q_g"]                         # (B,L,N) (B,C,L,L) (B,L,M)
        row = {"t": t + 1, "maxNQ": float((n * q_z.max(-1).values)[mask].mean()),
               "H_z": _entropy_frac(q_z, n, mask), "H_g": _entropy_frac(q_g, q_g.shape[-1], mask),
               "H_h": _entropy_frac(q_h.transpose(1, 2), length - 1, mask) if q_h is not None else math.nan,
               "attn_std": float(tr["attn_logits"].permute(0, 2, 3, 1)[valid].std())
               if tr["attn_logits"] is not None else math.nan}
        for name in ("unary", "child", "head", "topic"):
            row[f"rms_{name}"] = float(tr[f"msg_{name}"][mask].pow(2).mean().sqrt())
        rows.append(row)
    return rows


def cap_features(model, cap: float) -> None:
    """Bound every Z feature: P^ -> cap * tanh(P^ / cap) (linear near 0, |P^| < cap). Under muP P^ = N Q_z - 1 grows
    N-fold as Q_z sharpens; under SP it is Q_z (<= 1). Shadows the model's ``features`` method on this instance."""
    plain = model.features
    model.features = lambda q_z: cap * torch.tanh(plain(q_z) / cap)


def independent_weight_decay(opt: torch.optim.AdamW, per_step: float) -> None:
    """Weight decay that does not follow eta (Kosson et al. 2025, arXiv 2510.19093): torch's AdamW shrinks each
    weight by ``lr_t * weight_decay`` per step, so a group's weight_decay of ``per_step / lr_peak`` shrinks its
    matrices by ``per_step`` x the schedule factor, whatever eta and the group's muP multiplier. Gains and biases
    are not decayed. Call after the optimizer is built with the peak LRs and before any ``set_lr``."""
    for g in opt.param_groups:
        g["weight_decay"] = 0.0 if g["role"] in ("gain", "bias") else per_step / g["lr"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--every", type=int, default=50, help="record the statistics every this many steps")
    ap.add_argument("--feature-cap", type=float, default=0.0,
                    help="a lever, not a model option: replace the Z features P^ by cap * tanh(P^ / cap) (0 = off)")
    ap.add_argument("--independent-wd", type=float, default=0.0,
                    help="a lever, not an optim option: decoupled weight decay of this much per step on every matrix "
                         "(x the schedule factor), independent of eta and of the muP LR multipliers (0 = off)")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides, as for python -m ptsweep train")
    args = ap.parse_args(argv)
    cfg = compose(list(args.overrides))
    torch.set_num_threads(max(1, cfg.train.threads))
    seed_everything(cfg.seed)
    corpus = data_mod.prepare(cfg.data)
    model = build_model(cfg.model, corpus.vocab_size, cfg.data.seq_len)
    if args.feature_cap > 0:
        cap_features(model, args.feature_cap)
    oc, tc = cfg.optim, cfg.train
    opt = build_optimizer(model, model.width, model.parametrization, oc.lr, betas=oc.betas, eps=oc.eps,
                          weight_decay=oc.weight_decay)
    if args.independent_wd > 0:
        independent_weight_decay(opt, args.independent_wd)
    val = data_mod.val_batches(corpus, cfg.data, tc.batch_size)
    probe = val[0]
    baseline = metrics.NoContextBaseline.of(corpus, cfg.data)
    steps = num_steps(cfg)
    named = dict(model.named_parameters())
    trace: list[dict] = []
    t0 = time.time()

    def record(step: int, before: dict | None) -> None:
        row = {"step": step, "mfvi": mfvi_stats(model, probe)}
        for name in PARAMS:
            w = named[name].detach()
            row[f"rms_{name}"] = float(w.pow(2).mean().sqrt())
            if before is not None:
                row[f"upd_{name}"] = float((w - before[name]).pow(2).mean().sqrt() / (w.pow(2).mean().sqrt() + 1e-30))
        trace.append(row)
        if not row["mfvi"]:  # T = 0: no MFVI iteration to describe
            print(f"step {step:4d}  (no MFVI iterations)", file=sys.stderr, flush=True)
            return
        last = row["mfvi"][-1]
        print(f"step {step:4d}  maxNQ {last['maxNQ']:6.2f}  H_z {last['H_z']:.3f}  H_h {last['H_h']:.3f}  "
              f"H_g {last['H_g']:.3f}  attn_std {last['attn_std']:.3f}  msgs u/c/h/t {last['rms_unary']:.3f}/"
              f"{last['rms_child']:.3f}/{last['rms_head']:.3f}/{last['rms_topic']:.3f}  "
              + " ".join(f"{n}:{row.get(f'upd_{n}', math.nan):.1e}" for n in ("unary", "U", "B", "head_weight")),
              file=sys.stderr, flush=True)

    record(0, None)
    model.train()
    for step in range(steps):
        set_lr(opt, oc.lr, lr_factor(step, steps, oc.warmup_frac, oc.schedule, oc.min_lr_frac))
        batch = data_mod.train_batch(corpus, cfg.data, step, tc.batch_size, cfg.seed)
        opt.zero_grad(set_to_none=True)
        loss = accumulate_gradients(model, batch, 0, torch.device("cpu"), "fp32")
        if not torch.isfinite(loss):
            print(f"step {step}: non-finite loss", file=sys.stderr)
            break
        if oc.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), oc.grad_clip)
        stamp = (step + 1) % args.every == 0 or step + 1 == steps
        before = {n: named[n].detach().clone() for n in PARAMS} if stamp else None
        opt.step()
        if stamp:
            model.eval()
            record(step + 1, before)
            model.train()
    ev = evaluate(model, val, torch.device("cpu"), "fp32", baseline)
    out = {"config": to_dict(cfg), "feature_cap": args.feature_cap, "independent_wd": args.independent_wd,
           "trace": trace, "final": ev,
           "wall_s": time.time() - t0}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"{args.out}: val {ev['val_loss']:.3f} (unigram {ev['unigram_loss']:.3f}, no-context "
          f"{ev['no_context_loss']:.3f}); context_gain {ev['context_gain']:+.3f} +- {ev['context_gain_se']:.3f}; "
          f"wall {out['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
