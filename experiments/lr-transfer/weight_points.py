"""Single points of the information-weight study (width, weight, value, seed) at the long budget, without re-running
the LR grid that an lr-transfer weight study carries with it: each point is the trial the lr-transfer plan builds
(``lr_transfer_plan.point_trial``, study "weight": mup_sp anchored at the smallest of ``sweep.lr_transfer.widths``, eta
``sweep.lr_transfer.weight_lr``), run by ``trials.runner.run_trials`` (real Ray Tune, resumable from the ledger in
``runs/<sweep.study>/trials``). Tables: ``lever_table.py runs/<study> --width 128``.

    python experiments/lr-transfer/weight_points.py w_topic_g=2:0,1,2 w_child=8:0 sweep.study=weight-points

Arguments of the form ``weight=value:seeds`` are points, ``lr=value:seeds`` the every-weight-1 point at another eta;
every other argument is a Hydra override.
"""

from __future__ import annotations

import argparse

from ptsweep.config import compose
from ptsweep.sweeps.lr_transfer_plan import point_trial
from ptsweep.reports.outputs import study_path
from ptsweep.trials.ray_session import ray_session
from ptsweep.trials.runner import run_trials

STUDY = ["+experiment=candidate"]
"""The candidate study's settings (conf/experiment/candidate.yaml): the weight points are its trials."""


def points(specs: list[str]) -> list[tuple[str, float, int]]:
    """``w_child=8:0,1`` -> [("model.w_child", 8.0, 0), ("model.w_child", 8.0, 1)];
    ``lr=0.04:0`` -> [("lr", 0.04, 0)]."""
    out = []
    for spec in specs:
        key, rest = spec.split("=", 1)
        value, seeds = rest.split(":", 1)
        key = key if key == "lr" else f"model.{key}"
        out += [(key, float(value), int(s)) for s in seeds.split(",")]
    return out


def _lr_point(key: str, value: float) -> tuple[str, float, list[str]]:
    """An ``lr=eta`` point is the every-weight-1 point (w_unary = 1) at eta; a weight point keeps the study's eta."""
    if key == "lr":
        return "model.w_unary", 1.0, [f"sweep.lr_transfer.weight_lr={value}"]
    return key, value, []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("args", nargs="+", help="points (weight=value:seed,seed) and Hydra overrides")
    ap.add_argument("--width", type=int, default=128)
    args = ap.parse_args()
    specs = [a for a in args.args if ":" in a and a.startswith(("w_", "lr="))]
    overrides = [a for a in args.args if a not in specs]
    trials, labels = [], []
    for key, value, seed in points(specs):
        key, value, at_lr = _lr_point(key, value)
        cfg = compose(STUDY + [f"sweep.lr_transfer.weight_key={key}"] + overrides + at_lr)
        ov, label = point_trial(cfg, "weight", "mup_sp", args.width, value, seed)
        trials.append(ov)
        labels.append(label)
    sdir = study_path(cfg, "lr-transfer")
    sdir.mkdir(parents=True, exist_ok=True)
    with ray_session(cfg.ray):
        df = run_trials(cfg, trials, sdir, "points", labels=labels)
    print(df.drop(columns=["trial_key"]).to_string(index=False))


if __name__ == "__main__":
    main()
