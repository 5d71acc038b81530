"""Why the topic-message update sizes fall slightly with width at small N (experiments/coord-check/README.md, "Topic
update: a finite-width term").

B (M x N) is used in both directions of the binary factor: E = w_topic_g s_G B P^ (Z -> G, fan-in N) and
msg_topic = B^T G^ (G -> Z, fan-in M). Its gradient is the sum of the two uses, g = g1 (via E) + g2 (via msg_topic),
and Adam's first step is -eta/N sign(g). The update changes the topic logits by dE ~ sign(g) P^. Its *coherence*

    c(u) = mean_tokens,g |sum_n sign(u)_gn P^_n| / (N mean|P^|)

is Theta(1) for an update aligned with the features P^ and ~N^-1/2 for one that is not. The script prints, per width
and seed: RMS of g1 and g2, the fraction of entries where |g2| > |g1|, and c(g), c(g1), c(g2) on the first validation
batch of the data (the coordinate check's probe batch).

Usage: python experiments/coord-check/probe_topic_update.py [--preset smoke] [--scaling channels]
       [--widths 64,128,256,512,1024] [--seeds 2]
"""

from __future__ import annotations

import argparse

import torch

from ptsweep import data as data_mod
from ptsweep.config import compose, with_overrides
from ptsweep.models import build_model, mlm_loss


def b_gradient(model, batch: dict, through_topic_logits: bool = True) -> torch.Tensor:
    """dLoss/dB; with ``through_topic_logits=False`` B is detached in E = B P^, leaving only the G -> Z use."""
    real = type(model).topic_logits

    def detached(self, p_hat):
        return (self.cfg.w_topic_g * self.const.s_g) * (p_hat @ self.B.detach().t())

    if not through_topic_logits:
        model.topic_logits = detached.__get__(model)
    try:
        model.zero_grad(set_to_none=True)
        loss, _ = mlm_loss(model, batch["input_ids"], batch["attention_mask"], batch["labels"])
        loss.backward()
    finally:
        model.topic_logits = real.__get__(model)
    return model.B.grad.detach().clone()


def coherence(update: torch.Tensor, p_hat: torch.Tensor) -> float:
    """c(u) above: 1 when sign(u) matches sign(P^) coordinate by coordinate, ~N^-1/2 for an unrelated sign pattern."""
    n = p_hat.shape[-1]
    return float((p_hat @ update.sign().t()).abs().mean() / (n * p_hat.abs().mean()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="smoke")
    ap.add_argument("--scaling", default="channels")
    ap.add_argument("--widths", default="64,128,256,512,1024")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = with_overrides(compose([f"preset={args.preset}", "tracker=disabled"]), {"model.scaling": args.scaling})
    corpus = data_mod.prepare(cfg.data)
    probe = data_mod.val_batches(corpus, cfg.data, args.batch_size)[0]
    print("width seed | rms g1 (Z->G)  rms g2 (G->Z)  P(|g2|>|g1|) | c(g)    c(g1)   c(g2)")
    for width in (int(w) for w in args.widths.split(",")):
        for seed in range(args.seeds):
            run_cfg = with_overrides(cfg, {"model.width": width})
            torch.manual_seed(seed)
            model = build_model(run_cfg.model, corpus.vocab_size, run_cfg.data.seq_len)
            batch = data_mod.train_batch(corpus, run_cfg.data, 0, args.batch_size, seed)
            g = b_gradient(model, batch)
            g2 = b_gradient(model, batch, through_topic_logits=False)
            g1 = g - g2  # gradients of the two uses add up exactly
            with torch.no_grad():
                trace: list[dict] = []
                model.mfvi(probe["input_ids"], probe["attention_mask"], trace)
                p_hat = trace[0]["p_hat"][probe["attention_mask"].bool()]  # (tokens, N), iteration 1
            print(f"{width:5d} {seed:4d} | {g1.pow(2).mean().sqrt():.2e}       {g2.pow(2).mean().sqrt():.2e}       "
                  f"{(g2.abs() > g1.abs()).float().mean():.2f}         | {coherence(g, p_hat):.4f}  "
                  f"{coherence(g1, p_hat):.4f}  {coherence(g2, p_hat):.4f}")


if __name__ == "__main__":
    main()
