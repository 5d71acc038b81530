"""Which term of the topic update shrinks with width during the training-time coordinate check
(experiments/coord-check/topic-training.md).

At each width, one ``ptsweep.train.run`` with the check's settings (``sweep.coord_check``'s LR, batch size and
steps; no weight decay; the run's schedule and clipping, as the check's 'train' schedule; ``--preset``, default
coord_train; rank scaling, 'mup') and the probe :class:`TopicTerms`: at the measured steps it splits the changes of
the two topic quantities at MFVI iteration ``--iteration`` on the check's probe batch (the first validation batch;
real tokens only) into their terms:

    topic logits (centred over g): dE = 4 w (dB P0 + B0 dP + dB dP)          [E = w s_G B P^, s_G = M/N = 4]
    topic message:                 dm = G0 dB + dG B0 + dG dB                 [m = G^ B, rows = tokens]

Each term is reported as mean |.| (the check's statistic). For the dB terms a coherence ratio is given: the same
product with the features' coordinates randomly permuted per token (same norms, a direction unrelated to dB), e.g.
``coh(dB P0) = mean|dB P0| / mean|dB perm(P0)|``: 1 = dB is incoherent with the probe's features (its effect is
a sqrt(N) random sum), >> 1 = aligned (muP's Theta(N) coherent sum). The same ratio for this step's Adam update
of B (``coh upd``) and for its raw clipped gradient (``coh g``) says whether a linear (epsilon-dominated) update would
be more coherent than Adam's sign-like one. ``--eps-b C`` gives B alone the Adam epsilon C / N (a counterfactual).
``--brief`` prints one line: the log-log slopes of dE and dm per measured step (the check's failing quantities).
``gnorm`` is the run's logged gradient norm before clipping.

    .venv/bin/python experiments/coord-check/probe_topic_training.py [--widths 32,64,128]
        [--steps 10] [--measure 1,2,5,10] [--iteration 1] [--eps-b C] [--brief] [--preset P] [hydra overrides]
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

import numpy as np
import torch

from ptsweep import train
from ptsweep.config import compose, with_overrides
from ptsweep.tracking import Tracker

PREFIX = "topic/"
"""The prefix of :class:`TopicTerms`' metrics in the run's log rows."""


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
    """Features P, topic features G, centred topic logits E and topic message m of MFVI iteration ``it`` on the real
    tokens of ``probe`` (eval mode), and a copy of B."""
    keep = probe["attention_mask"].bool()
    rec = model.inspect(probe["input_ids"], probe["attention_mask"])[it - 1]
    return {"P": rec["p_hat"][keep].float(), "G": model.topic_features(rec["q_g"])[keep].float(),
            "E": _centre(rec["topic_logits"][keep].float()), "m": rec["msg_topic"][keep].float(),
            "B": model.B.detach().float().clone()}


def _terms(s0: dict, st: dict, g: torch.Tensor, upd: torch.Tensor, scale: float, width: int,
           gen: torch.Generator) -> dict[str, float]:
    """The module docstring's terms from the state at init ``s0``, the state now ``st``, B's clipped gradient ``g``
    and its update ``upd`` of this step."""
    dB, dP, dG = st["B"] - s0["B"], st["P"] - s0["P"], st["G"] - s0["G"]
    p0, g0 = s0["P"], s0["G"]
    return {
        "rms_dB_xN": float(dB.pow(2).mean().sqrt()) * width,
        "dE": _m(st["E"] - s0["E"]),  # topic logits
        "dE|dB P0": _m(_centre(scale * p0 @ dB.t())),
        "dE|B0 dP": _m(_centre(scale * dP @ s0["B"].t())),
        "coh dB P0": _m(p0 @ dB.t()) / _m(_perm(p0, gen) @ dB.t()),
        "dm": _m(st["m"] - s0["m"]),  # topic message
        "dm|G0 dB": _m(g0 @ dB), "dm|dG B0": _m(dG @ s0["B"]), "dm|dG dB": _m(dG @ dB),
        "coh G0 dB": _m(g0 @ dB) / _m(_perm(g0, gen) @ dB),
        "coh dG dB": _m(dG @ dB) / max(_m(_perm(dG, gen) @ dB), 1e-30),
        # this step's Adam update of B vs its raw (clipped) gradient: coherence with the probe's features
        "rms g xN^2": float(g.pow(2).mean().sqrt()) * width ** 2,
        "coh upd P0": _m(p0 @ upd.t()) / _m(_perm(p0, gen) @ upd.t()),
        "coh g P0": _m(p0 @ g.t()) / _m(_perm(p0, gen) @ g.t()),
        "coh upd G0": _m(g0 @ upd) / _m(_perm(g0, gen) @ upd),
        "coh g G0": _m(g0 @ g) / _m(_perm(g0, gen) @ g),
        "|G0|": _m(g0), "|dG|": _m(dG), "|dP|": _m(dP),
    }


class TopicTerms:
    """The probe of this script (``train.log_every`` = 1): the state at the first evaluation (init); at the log steps
    of ``measure`` the terms of :func:`_terms` as ``topic/<term>`` metrics."""

    def __init__(self, model, val: list, device: torch.device, measure: set[int], it: int):
        self.model, self.measure, self.it = model, measure, it
        self.probe = {k: v.to(device) for k, v in val[0].items()}
        self.scale = model.cfg.w_topic_g * model.const.s_g
        self.gen = torch.Generator().manual_seed(0)
        self.s0: dict | None = None
        self.t = 0
        self.g = self.b_before = None

    def on_evaluation(self) -> dict:
        if self.s0 is None:
            self.s0 = _state(self.model, self.probe, self.it)
        return {}

    def before_logged_step(self) -> None:
        self.t += 1
        if self.t in self.measure:
            self.g = self.model.B.grad.detach().float().clone()
            self.b_before = self.model.B.detach().float().clone()

    def on_logged_step(self) -> dict[str, float]:
        if self.t not in self.measure:
            return {}
        upd = self.model.B.detach().float() - self.b_before
        st = _state(self.model, self.probe, self.it)
        terms = _terms(self.s0, st, self.g, upd, self.scale, self.model.width, self.gen)
        return {PREFIX + k: v for k, v in terms.items()}


def topic_factory(measure: set[int], it: int, eps_b: float):
    """The probe factory for ``train.run``; with ``eps_b`` > 0 it first gives B alone (its own optimizer group) the
    Adam epsilon eps_b / N (a counterfactual, not an optim option)."""
    def factory(model, optimizer, val, device):
        if eps_b > 0:
            for grp in optimizer.param_groups:
                if any(p is model.B for p in grp["params"]):
                    assert len(grp["params"]) == 1, "B shares its optimizer group"
                    grp["eps"] = eps_b / model.width
        return TopicTerms(model, val, device, measure, it)
    return factory


def run_width(cfg, steps: int, measure: set[int], it: int, eps_b: float = 0.0) -> list[dict]:
    """One run of ``cfg`` with the check's settings (module docstring) for ``steps`` steps; the rows of the measured
    steps: width, step, gnorm and the terms."""
    cc = cfg.sweep.coord_check
    bs = cc.batch_size or cfg.train.batch_size
    run_cfg = with_overrides(cfg, {
        "optim.lr": cc.lr, "optim.weight_decay": 0.0, "train.batch_size": bs, "train.log_every": 1,
        "train.tokens": max(steps, cc.steps) * bs * cfg.data.seq_len, "train.eval_every": 10 ** 9,
        "train.stop_after_steps": steps if steps < cc.steps else 0})
    with tempfile.TemporaryDirectory() as run_dir:
        history = train.run(run_cfg, Tracker(), run_dir=Path(run_dir), probes=[topic_factory(measure, it, eps_b)])[
            "history"]
    rows = []
    for h in history:
        terms = {k[len(PREFIX):]: v for k, v in h.items() if k.startswith(PREFIX)}
        if terms:
            rows.append({"width": cfg.model.width, "step": h["step"], "gnorm": h.get("grad_norm", math.nan), **terms})
    return rows


def slope(widths, ys) -> float:
    return float(np.polyfit(np.log(widths), np.log(np.maximum(ys, 1e-30)), 1)[0])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default="32,64,128")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--measure", default="1,2,5,10")
    ap.add_argument("--iteration", type=int, default=1)
    ap.add_argument("--eps-b", type=float, default=0.0, help="Adam epsilon of B's group = EPS_B / N (0: optim.eps)")
    ap.add_argument("--brief", action="store_true", help="print only the slopes of dE and dm")
    ap.add_argument("--preset", default="coord_train", help="the preset composed under the overrides")
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    cfg = compose([f"preset={args.preset}", "model=pt", "tracker=disabled", *args.overrides])
    widths = [int(w) for w in args.widths.split(",")]
    measure = {int(s) for s in args.measure.split(",")}
    rows = []
    for w in widths:
        run_cfg = with_overrides(cfg, {"model.width": w, "model.parametrization": "mup",
                                       "model.scaling": cfg.sweep.coord_check.scaling or "rank"})
        rows += run_width(run_cfg, args.steps, measure, args.iteration, args.eps_b)
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
