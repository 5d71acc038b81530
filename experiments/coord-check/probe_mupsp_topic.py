"""Does a smaller topic matrix B make mup_sp's topic path width-stable? (experiments/lr-transfer/README.md,
"the coordinate check decides the default").

mup_sp fixes every base-shape constant so that the model equals SP at ``model.base_width``; its topic message still
grows with width in the training-time coordinate check (~N^0.35 with Z damping 0.5). This probe multiplies mup_sp's
B init constant by ``--init-b`` and its LR constant by ``--lr-b`` and, with ``--center``, centres the features
(N Q_z - 1, M Q_g - 1, as 'mup' does) (defaults = mup_sp; otherwise the model no longer equals SP at the base
width) and runs the check's own code (``coords.collect``, ``coords.slopes``, ``coords.verdict``) in this
process, printing the verdict and the topic quantities' slopes at the last iteration.

    PYTHONPATH=. .venv/bin/python experiments/coord-check/probe_mupsp_topic.py --init-b 0.25 --lr-b 0.25 \
        preset=coord_train model=pt sweep.coord_check.lr=0.02 optim.warmup_frac=0.25 model.damping_z=0.5
"""

from __future__ import annotations

import argparse
import dataclasses

from ptsweep.config import compose, with_overrides
from ptsweep.models import pt
from ptsweep.sweeps import coords

PRINTED = ("topic_logits", "g_hat_rms", "msg_topic", "msg_head", "attn_logits", "msg_child")


def patch_topic_constants(init_b: float, lr_b: float, center: bool, init_b_power: float = 0.0) -> None:
    """Scale the B constants of ``MFVIConstants.sp_anchored`` (the init also by (N0 / N)^init_b_power: 0.5 makes
    B's init std ~ 1/N, an embedding-table scale for the one-hot topic posterior, instead of the hidden 1/sqrt(N))
    and optionally centre the features (every model built afterwards in this process)."""
    original = pt.MFVIConstants.sp_anchored

    def scaled(cfg, vocab_size):
        const = original(cfg, vocab_size)
        width_factor = (cfg.base_width / cfg.width) ** init_b_power
        return dataclasses.replace(const, init_b=const.init_b * init_b * width_factor, lr_b=const.lr_b * lr_b,
                                   center=1.0 if center else const.center)

    pt.MFVIConstants.sp_anchored = staticmethod(scaled)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--init-b", type=float, default=1.0)
    ap.add_argument("--lr-b", type=float, default=1.0)
    ap.add_argument("--center", action="store_true")
    ap.add_argument("--init-b-power", type=float, default=0.0, help="B's init also x (N0 / N)^power")
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    patch_topic_constants(args.init_b, args.lr_b, args.center, args.init_b_power)
    cfg = with_overrides(compose(["tracker=disabled", *args.overrides]),
                         {"sweep.coord_check.parametrizations": ["mup_sp"]})
    table = coords.slopes(coords.collect(cfg, log=lambda *_: None))
    cc = cfg.sweep.coord_check
    result = coords.verdict(table, cc.tolerance, "pt", cc.scaling, parametrization="mup_sp")
    last = int(table["iteration"].max())
    print(f"init_b x{args.init_b:g} x (N0/N)^{args.init_b_power:g}, lr_b x{args.lr_b:g}, center {args.center}: "
          f"{'PASS' if result['pass'] else 'FAIL'} "
          f"{result['n_failed']}/{result['n_checked']}; worst {result['worst']['stat']} of "
          f"{result['worst']['quantity']} it {result['worst']['iteration']} step {result['worst']['step']}: "
          f"{result['worst']['slope']:+.2f}")
    for q in PRINTED:
        rows = table[(table["quantity"] == q) & (table["iteration"] == last) & (table["parametrization"] == "mup_sp")]
        print(f"  {q:12s} " + " ".join(f"{r.stat[0]}{int(r.step)}:{r.slope:+.2f}" for r in rows.itertuples()))


if __name__ == "__main__":
    main()
