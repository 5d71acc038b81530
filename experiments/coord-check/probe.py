"""Width probe of PT's MFVI at init (experiments/coord-check/README.md, "Why the paper-literal muP PT is not width-stable").

Random tokens (B x L), vocabulary 1000, one seed per width; no training. Per MFVI iteration t it prints, per width:
  tl   std of the topic logits over the M topics (mean over tokens)      frozen topic softmax when tl^2 > 2 ln M
  zl   std of the Z logits over the N labels (mean over tokens)
  pmax max N*Q_z (over labels and tokens)                                 = N when Q_z is one-hot
  prms sqrt(mean (N Q_z)^2)                                               e^{var} for lognormal N Q_z
  gmax max M*Q_g
  al   std of the attention logits over valid pairs
  mt, mc, mh   mean |msg_topic|, |msg_child|, |msg_head|
and, once per width, gS = RMS of dLoss/dS over the rows of S that the batch uses (MLM loss on 15% random labels).

Usage: python experiments/coord-check/probe.py [--widths 64,256,1024] [--scaling channels] [key=value ...]
where key=value are PTConfig fields (e.g. parametrization=mup_paper w_topic_g=0.25 n_iters=4).
"""

from __future__ import annotations

import argparse
import dataclasses
import math

import torch

from ptsweep.config import PTConfig
from ptsweep.models import mlm_loss
from ptsweep.models.pt import ProbabilisticTransformer


def parse_value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


@torch.no_grad()
def _stats(model, ids, mask) -> list[dict]:
    trace = model.inspect(ids, mask)
    valid = model.valid_pairs(mask)
    n = model.cfg.width
    rows = []
    for rec in trace:
        a = rec["attn_logits"].masked_select(valid.expand_as(rec["attn_logits"]))
        real = mask
        zl = rec["z_logits"][real]
        rows.append({
            "tl": float(rec["topic_logits"][real].std(-1).mean()),
            "zl": float(zl.std(-1).mean()),
            "pmax": float(rec["q_z"][real].max()) * n,
            "prms": float((n * rec["q_z"][real]).pow(2).mean().sqrt()),
            "gmax": float((model.const.a_g * rec["q_g"][real]).max()),
            "al": float(a.std()),
            "mt": float(rec["msg_topic"][real].abs().mean() * model.cfg.w_topic_z),
            "mc": float(rec["msg_child"][real].abs().mean() * model.cfg.w_child),
            "mh": float(rec["msg_head"][real].abs().mean() * model.cfg.w_head),
        })
    return rows


def probe(width: int, scaling: str, overrides: dict, bsz: int, length: int, seed: int = 0, scales=None):
    scales = scales or {}
    cfg = dataclasses.replace(PTConfig(), width=width, scaling=scaling, **overrides)
    torch.manual_seed(seed)
    vocab = 1000
    model = ProbabilisticTransformer(cfg, vocab)
    with torch.no_grad():  # exploration: extra init multipliers on top of the configured ones
        for name, mult in scales.items():
            getattr(model, name).mul_(mult)
    g = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, vocab, (bsz, length), generator=g)
    mask = torch.ones(bsz, length, dtype=torch.bool)
    stats = _stats(model, ids, mask)
    labels = torch.full_like(ids, -100)
    pick = torch.rand(bsz, length, generator=g) < 0.15
    labels[pick] = torch.randint(0, vocab, (int(pick.sum()),), generator=g)
    model.train()
    loss, _ = mlm_loss(model, ids, mask, labels)
    loss.backward()
    grad = model.unary.grad[ids.unique()]
    return stats, float(grad.pow(2).mean().sqrt()), float(grad.abs().median())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="64,256,1024")
    ap.add_argument("--scaling", default="channels")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--length", type=int, default=32)
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    overrides = {k: parse_value(v) for k, v in (o.split("=", 1) for o in args.overrides) if not k.startswith("x.")}
    scales = {k[2:]: float(v) for k, v in (o.split("=", 1) for o in args.overrides) if k.startswith("x.")}
    widths = [int(w) for w in args.widths.split(",")]
    torch.set_num_threads(1)
    res = {w: probe(w, args.scaling, overrides, args.batch, args.length, scales=scales) for w in widths}
    print(f"# scaling={args.scaling} {overrides} {scales}  B={args.batch} L={args.length}")
    keys = ["tl", "zl", "pmax", "prms", "gmax", "al", "mt", "mc", "mh"]
    t_max = len(res[widths[0]][0])
    for key in keys:
        for t in range(t_max):
            vals = [res[w][0][t][key] for w in widths]
            slope = (math.log(max(vals[-1], 1e-30)) - math.log(max(vals[0], 1e-30))) / math.log(widths[-1] / widths[0])
            print(f"{key:5s} it{t + 1}: " + " ".join(f"{v:9.3g}" for v in vals) + f"   slope {slope:+.2f}")
    g = [res[w][1] for w in widths]
    print("gS rms   : " + " ".join(f"{v:9.3g}" for v in g))
    print("N * gS   : " + " ".join(f"{v * w:9.3g}" for v, w in zip(g, widths)))
    print("gS median: " + " ".join(f"{res[w][2]:9.3g}" for w in widths))


if __name__ == "__main__":
    main()
