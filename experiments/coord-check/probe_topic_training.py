"""Which term of the topic update shrinks with width during the training-time coordinate check
(experiments/coord-check/topic-training.md).

Runs the check's own loop (``coord_check.measure_run``'s optimizer, schedule, clipping, batches and probe batch;
``preset=coord_train``, rank scaling, 'mup') at each width and, at the measured steps, splits the changes of the two
topic quantities at MFVI iteration ``--iteration`` on the probe batch (real tokens only) into their terms:

    topic logits (centred over g): dE = 4 w (dB P0 + B0 dP + dB dP)          [E = w s_G B P^, s_G = M/N = 4]
    topic message:                 dm = G0 dB + dG B0 + dG dB                 [m = G^ B, rows = tokens]

Each term is reported as mean |.| (the check's statistic). For the dB terms a coherence ratio is given: the same
product with the features' coordinates randomly permuted per token (same norms, a direction unrelated to dB), e.g.
``coh(dB P0) = mean|dB P0| / mean|dB perm(P0)|``: 1 = dB is incoherent with the probe's features (its effect is
a sqrt(N) random sum), >> 1 = aligned (muP's Theta(N) coherent sum). The same ratio for this step's Adam update
of B (``coh upd``) and for its raw clipped gradient (``coh g``) says whether a linear (epsilon-dominated) update would
be more coherent than Adam's sign-like one. ``--eps-b C`` gives B alone the Adam epsilon C / N (a counterfactual).
``--brief`` prints one line: the log-log slopes of dE and dm per measured step (the check's failing quantities).

    PYTHONPATH=. .venv/bin/python experiments/coord-check/probe_topic_training.py [--widths 32,64,128]
        [--steps 10] [--measure 1,2,5,10] [--iteration 1] [--eps-b C] [--brief] [hydra overrides]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import torch

from ptsweep import data as data_mod
from ptsweep.config import compose, with_overrides
from ptsweep.models import build_model, mlm_loss
from ptsweep.parametrization import build_optimizer, set_lr
from ptsweep.train import lr_factor


def _m(x: torch.Tensor) -> float:
    return float(x.abs().mean())


def _perm(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Each row's coordinates randomly permuted (same multiset of values, unrelated direction)."""
    idx = torch.argsort(torch.rand(x.shape, generator=gen), dim=-1)
    return x.gather(-1, idx)


def _centre(e: torch.Tensor) -> torch.Tensor:
    return e - e.mean(-1, keepdim=True)


@torch.no_grad()
def _state(model, probe: dict, it: int) -> dict:
    was = model.training
    model.eval()
    trace: list[dict] = []
    model.mfvi(probe["input_ids"], probe["attention_mask"], trace)
    model.train(was)
    keep = probe["attention_mask"].bool()
    rec = trace[it - 1]
    return {"P": rec["p_hat"][keep].float(), "G": model.topic_features(rec["q_g"])[keep].float(),
            "E": _centre(rec["topic_logits"][keep].float()), "m": rec["msg_topic"][keep].float(),
            "B": model.B.detach().float().clone()}


def run_width(cfg, corpus, steps: int, measure: set[int], it: int, eps_b: float = 0.0) -> list[dict]:
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model, corpus.vocab_size, cfg.data.seq_len)
    sw, oc = cfg.sweep, cfg.optim
    opt = build_optimizer(model, model.width, model.parametrization, sw.coord_check.lr, betas=oc.betas, eps=oc.eps,
                          weight_decay=0.0)
    if eps_b > 0:  # a counterfactual: B alone in its own group with Adam epsilon eps_b / N
        for grp in opt.param_groups:
            if any(p is model.B for p in grp["params"]):
                assert len(grp["params"]) == 1, "B shares its optimizer group"
                grp["eps"] = eps_b / model.width
    bs = sw.coord_check.batch_size or cfg.train.batch_size
    probe = data_mod.val_batches(corpus, cfg.data, bs)[0]
    s0 = _state(model, probe, it)
    scale = model.cfg.w_topic_g * model.const.s_g
    gen = torch.Generator().manual_seed(0)
    rows = []
    model.train()
    for t in range(1, steps + 1):
        set_lr(opt, sw.coord_check.lr,
               lr_factor(t - 1, sw.coord_check.steps, oc.warmup_frac, oc.schedule, oc.min_lr_frac))
        b = data_mod.train_batch(corpus, cfg.data, t - 1, bs, cfg.seed)
        loss, _ = mlm_loss(model, b["input_ids"], b["attention_mask"], b["labels"])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), oc.grad_clip)) if oc.grad_clip > 0 \
            else math.nan
        g = model.B.grad.detach().float().clone()
        b_before = model.B.detach().float().clone()
        opt.step()
        if t not in measure:
            continue
        upd = model.B.detach().float() - b_before
        st = _state(model, probe, it)
        dB, dP, dG = st["B"] - s0["B"], st["P"] - s0["P"], st["G"] - s0["G"]
        p0, g0 = s0["P"], s0["G"]
        rows.append({
            "width": model.width, "step": t, "gnorm": gnorm,
            "rms_dB_xN": float(dB.pow(2).mean().sqrt()) * model.width,
            # topic logits
            "dE": _m(st["E"] - s0["E"]),
            "dE|dB P0": _m(_centre(scale * p0 @ dB.t())),
            "dE|B0 dP": _m(_centre(scale * dP @ s0["B"].t())),
            "coh dB P0": _m(p0 @ dB.t()) / _m(_perm(p0, gen) @ dB.t()),
            # topic message
            "dm": _m(st["m"] - s0["m"]),
            "dm|G0 dB": _m(g0 @ dB), "dm|dG B0": _m(dG @ s0["B"]), "dm|dG dB": _m(dG @ dB),
            "coh G0 dB": _m(g0 @ dB) / _m(_perm(g0, gen) @ dB),
            "coh dG dB": _m(dG @ dB) / max(_m(_perm(dG, gen) @ dB), 1e-30),
            # this step's Adam update of B vs its raw (clipped) gradient: coherence with the probe's features
            "rms g xN^2": float(g.pow(2).mean().sqrt()) * model.width ** 2,
            "coh upd P0": _m(p0 @ upd.t()) / _m(_perm(p0, gen) @ upd.t()),
            "coh g P0": _m(p0 @ g.t()) / _m(_perm(p0, gen) @ g.t()),
            "coh upd G0": _m(g0 @ upd) / _m(_perm(g0, gen) @ upd),
            "coh g G0": _m(g0 @ g) / _m(_perm(g0, gen) @ g),
            "|G0|": _m(g0), "|dG|": _m(dG), "|dP|": _m(dP),
        })
    return rows


def slope(widths, ys) -> float:
    return float(np.polyfit(np.log(widths), np.log(np.maximum(ys, 1e-30)), 1)[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default="32,64,128")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--measure", default="1,2,5,10")
    ap.add_argument("--iteration", type=int, default=1)
    ap.add_argument("--eps-b", type=float, default=0.0, help="Adam epsilon of B's group = EPS_B / N (0: optim.eps)")
    ap.add_argument("--brief", action="store_true", help="print only the slopes of dE and dm")
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = compose(["preset=coord_train", "model=pt", "tracker=disabled", *args.overrides])
    corpus = data_mod.prepare(cfg.data)
    widths = [int(w) for w in args.widths.split(",")]
    measure = {int(s) for s in args.measure.split(",")}
    rows = []
    for w in widths:
        run_cfg = with_overrides(cfg, {"model.width": w, "model.parametrization": "mup",
                                       "model.scaling": cfg.sweep.coord_check.scaling or "rank"})
        rows += run_width(run_cfg, corpus, args.steps, measure, args.iteration, args.eps_b)
    keys = [k for k in rows[0] if k not in ("width", "step")]
    if args.brief:
        out = []
        for s in sorted(measure):
            sub = [r for r in rows if r["step"] == s]
            out.append(f"step {s}: dE {slope(widths, [r['dE'] for r in sub]):+.2f} dm "
                       f"{slope(widths, [r['dm'] for r in sub]):+.2f}")
        print(" " .join(args.overrides) or "(default)", "eps_b", args.eps_b, "|", "; ".join(out))
        return
    for s in sorted(measure):
        sub = [r for r in rows if r["step"] == s]
        print(f"--- step {s} (iteration {args.iteration}); columns: widths {widths}, log-log slope")
        for k in keys:
            vals = [r[k] for r in sub]
            sl = slope(widths, vals) if all(v > 0 for v in vals) and not k.startswith("coh") else math.nan
            print(f"  {k:11s} " + " ".join(f"{v:10.3e}" for v in vals) + f"   slope {sl:+.2f}")


if __name__ == "__main__":
    main()
