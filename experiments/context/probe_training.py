"""Instrumented PT training ("find why, white-box"): one ``ptsweep.train.run`` of the composed config with the probe
:class:`MfviTrace` recording MFVI and optimizer statistics along the way, and the context metrics at the end.

At initialisation and at every ``--every`` steps (``train.log_every``; the run's last step too), on the first
validation batch (eval mode, no dropout):

- per MFVI iteration t: mean over tokens of max N*Q_z (``maxNQ``; 1 = uniform, N = one-hot), the entropies of Q_z,
  Q_h, Q_g as fractions of their maxima (log N, log(L-1), log M), the std of the attention logits over valid pairs,
  and the RMS of each message into Z (unary, child, head, topic) on real tokens;
- per parameter (S, U, V, B, W_out, gamma, b_out): the RMS of that step's update / RMS of the weight, and the
  weight RMS itself.

The run is ``python -m ptsweep train``'s (same batches, schedule, clipping, optimizer groups, evaluations); the final
metrics are the run's own (its final evaluation, with the corpus's context-free baselines). Nothing is tracked: the
run folder is a temporary one.

    .venv/bin/python experiments/context/probe_training.py --out runs/context/probe-mup-w32.json \\
        preset=lr_study model.width=32 model.scaling=rank optim.lr=0.03125 seed=0

A lever is a variant of PT in the config (``model.variants=[{name: feature_cap, cap: 4}]``, ``ptsweep/variants``).
Writes one JSON (config, trace rows, final metrics, wall_s) and prints a compact table to stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

import torch

from ptsweep import train
from ptsweep.config import compose, to_dict, with_overrides
from ptsweep.tracking import Tracker

PARAMS = ("unary", "U", "V", "B", "head_weight", "head_gain", "head_bias")
PREFIX = "probe/"
"""The prefix of :class:`MfviTrace`'s metrics in the run's log rows."""


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


class MfviTrace:
    """The probe of this script: :func:`mfvi_stats` and the parameter sizes (module docstring) at the first
    evaluation (step 0) and at every log step, as flat ``probe/...`` metrics of the run's log rows."""

    def __init__(self, model, optimizer, val: list, device: torch.device):
        self.model, self.device = model, device
        self.batch = {k: v.to(device) for k, v in val[0].items()}
        self.named = dict(model.named_parameters())
        self.before: dict | None = None
        self.started = False

    def before_logged_step(self) -> None:
        self.started = True
        self.before = {n: self.named[n].detach().clone() for n in PARAMS}

    def on_logged_step(self) -> dict[str, float]:
        return self.record(self.before)

    def on_evaluation(self) -> dict[str, float]:
        if self.started:  # later evaluations fall on log steps, which recorded already
            return {}
        self.started = True
        return self.record(None)

    def record(self, before: dict | None) -> dict[str, float]:
        """The flat metrics: ``probe/mfvi/<t>/<stat>``, ``probe/rms_<param>`` and, after a step, ``probe/upd_<param>``."""
        out = {f"{PREFIX}mfvi/{r['t']}/{k}": v for r in mfvi_stats(self.model, self.batch) for k, v in r.items()
               if k != "t"}
        for name in PARAMS:
            w = self.named[name].detach()
            out[f"{PREFIX}rms_{name}"] = float(w.pow(2).mean().sqrt())
            if before is not None:
                out[f"{PREFIX}upd_{name}"] = float((w - before[name]).pow(2).mean().sqrt()
                                                   / (w.pow(2).mean().sqrt() + 1e-30))
        return out


def trace_rows(history: list[dict]) -> list[dict]:
    """The probe's rows of a run's ``history``: ``{"step", "mfvi": [{"t", stat: value}, ...], "rms_<p>", "upd_<p>"}``."""
    rows = []
    for h in history:
        flat = {k[len(PREFIX):]: v for k, v in h.items() if k.startswith(PREFIX)}
        if not flat:
            continue
        iters: dict[int, dict] = {}
        row: dict = {"step": h["step"]}
        for key, value in flat.items():
            if key.startswith("mfvi/"):
                _, t, stat = key.split("/")
                iters.setdefault(int(t), {"t": int(t)})[stat] = value
            else:
                row[key] = value
        rows.append({**row, "mfvi": [iters[t] for t in sorted(iters)]})
    return rows


def print_row(row: dict) -> None:
    """One trace row as a line on stderr: the last MFVI iteration and four parameters' relative updates."""
    if not row["mfvi"]:  # T = 0: no MFVI iteration to describe
        print(f"step {row['step']:4d}  (no MFVI iterations)", file=sys.stderr, flush=True)
        return
    last = row["mfvi"][-1]
    print(f"step {row['step']:4d}  maxNQ {last['maxNQ']:6.2f}  H_z {last['H_z']:.3f}  H_h {last['H_h']:.3f}  "
          f"H_g {last['H_g']:.3f}  attn_std {last['attn_std']:.3f}  msgs u/c/h/t {last['rms_unary']:.3f}/"
          f"{last['rms_child']:.3f}/{last['rms_head']:.3f}/{last['rms_topic']:.3f}  "
          + " ".join(f"{n}:{row.get(f'upd_{n}', math.nan):.1e}" for n in ("unary", "U", "B", "head_weight")),
          file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--every", type=int, default=50, help="record the statistics every this many steps")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides, as for python -m ptsweep train")
    args = ap.parse_intermixed_args(argv)  # overrides before and after --out
    cfg = with_overrides(compose(list(args.overrides)), {"train.log_every": args.every})
    with tempfile.TemporaryDirectory() as run_dir:
        final = train.run(cfg, Tracker(), run_dir=Path(run_dir), probes=[MfviTrace])
    trace = trace_rows(final.pop("history"))
    for row in trace:
        print_row(row)
    out = {"config": to_dict(cfg), "trace": trace, "final": final, "wall_s": final["wall_s"]}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1, default=str))
    print(f"{args.out}: val {final['val_loss']:.3f} (unigram {final['unigram_loss']:.3f}, no-context "
          f"{final['no_context_loss']:.3f}); context_gain {final['context_gain']:+.3f} +- "
          f"{final['context_gain_se']:.3f}; wall {out['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
