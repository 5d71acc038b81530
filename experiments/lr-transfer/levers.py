"""PT's levers in the lr-transfer design (levers.md here): one ``python -m ptsweep lr-transfer`` call per lever, each
resuming from its study's ledger, in the order below; the first call that fails stops the rest.

- ``basin``: each lever of :data:`BASIN` as the study's control beside the default PT over eta*/2, eta*, 2 eta* at
  widths 32 and 128 (``+experiment=levers_basin``), all in one study folder runs/levers-basin[-<data>]: the default's
  trials have the same keys in every call, so they run once and pair with every lever (same seeds, data order and
  machine). Each control sets ``model.n_iters: 4`` (the default): the preset's control is the no-inference model
  ``{model.n_iters: 0}``, and Hydra merges a dict override into it.
- ``weights``: each width rule of :data:`WEIGHT_RULES` (and the default) with the grids of the four weights whose
  optimum moved with width (:data:`WEIGHTS`) beside the LR grid (``+experiment=weight_levers``), each rule in a study
  folder of its own, runs/weights-<rule>[-<data>].

    $PY experiments/lr-transfer/levers.py basin                                   # every lever (resumable)
    $PY experiments/lr-transfer/levers.py basin z_loss-1e-4 row_rms-wattn2 --seeds 1   # a screen of two levers
    $PY experiments/lr-transfer/levers.py basin --data python_docs               # the second corpus
    $PY experiments/lr-transfer/levers.py weights z_scale --weights w_unary      # one rule, one weight
    $PY experiments/lr-transfer/levers.py basin --dry-run -- train.device=cuda   # print the calls; after --: more
                                                                                 # overrides that change no trial key

Why a driver and not one config per lever: a lever is one override of one design (``conf/experiment/``); the list of
levers is a loop over that design, which the GPU script (``gpu_levers.sh``) runs by name as well.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys

BASIN = {  # name -> the control: the lever (a variant of PT, model.variants; ptsweep/variants) with MFVI kept
    "z_loss-1e-4": "{model.n_iters:4,model.variants:[{name:z_loss,coef:1.0e-4}]}",
    "z_loss-1e-3": "{model.n_iters:4,model.variants:[{name:z_loss,coef:1.0e-3}]}",
    "z_loss_all-1e-4": "{model.n_iters:4,model.variants:[{name:z_loss,coef:1.0e-4,iters:all}]}",
    "qz_floor-0.5": "{model.n_iters:4,model.variants:[{name:qz_entropy_floor,floor:0.5}]}",
    "qz_floor-0.7": "{model.n_iters:4,model.variants:[{name:qz_entropy_floor,floor:0.7}]}",
    "row_rms-wattn2": "{model.n_iters:4,model.variants:[{name:attn_row_rms}],model.w_attn:2.0}",
    "row_rms-wattn6": "{model.n_iters:4,model.variants:[{name:attn_row_rms}],model.w_attn:6.0}",
    "z_scale": "{model.n_iters:4,model.variants:[{name:z_scale}]}",
    "topic_scale": "{model.n_iters:4,model.variants:[{name:topic_scale}]}",
}
WEIGHT_RULES = {  # name -> the model overrides of the rule (each study folder's model)
    "default": [],
    "z_scale": ["model.variants=[{name:z_scale}]"],
    "topic_scale": ["model.variants=[{name:topic_scale}]"],
}
WEIGHTS = ("w_unary", "w_attn", "w_head", "w_child")
"""The information weights whose optimum moved from 1 at width 32 to 2 at 128 (README.md here)."""


def _chosen(names: list[str], known: dict) -> list[str]:
    """``names`` in the order of ``known`` (all when empty); an unknown name is an error."""
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"levers.py: unknown {' '.join(unknown)} (choose from {' '.join(known)})")
    return [n for n in known if not names or n in names]


def calls(study: str, names: list[str], seeds: int | None = None, data: str | None = None,
          weights: list[str] | None = None, extra: list[str] = ()) -> list[tuple[str, list[str]]]:
    """(label, the ``lr-transfer`` overrides) of every call of ``study`` ('basin' or 'weights'), in order."""
    suffix = f"-{data}" if data else ""
    common = [f"data={data}"] if data else []
    common += [f"sweep.lr_transfer.seeds={seeds}"] if seeds is not None else []
    if study == "basin":
        base = ["+experiment=levers_basin", *common, f"sweep.study=levers-basin{suffix}", *extra]
        return [(n, [*base, f"sweep.lr_transfer.control={BASIN[n]}"]) for n in _chosen(names, BASIN)]
    for w in weights or ():
        if w not in WEIGHTS:
            raise SystemExit(f"levers.py: --weights {w}: not one of {' '.join(WEIGHTS)}")
    return [(f"{n} {w}", ["+experiment=weight_levers", *common, *extra, *WEIGHT_RULES[n],
                          f"sweep.lr_transfer.weight_key=model.{w}", f"sweep.study=weights-{n}{suffix}"])
            for n in _chosen(names, WEIGHT_RULES) for w in (weights or WEIGHTS)]


def run(overrides: list[str]) -> int:
    """One ``lr-transfer`` call in a process of its own; on Ctrl-C (which reaches it too) it is waited for, so its
    ledger and checkpoints are written before this driver stops (exit 130)."""
    proc = subprocess.Popen([sys.executable, "-m", "ptsweep", "lr-transfer", *overrides])
    interrupted = False
    while True:
        try:
            code = proc.wait()
            break
        except KeyboardInterrupt:
            interrupted = True
    return 130 if interrupted else code


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The command line's options and, after ``--``, the extra overrides."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study", choices=("basin", "weights"))
    ap.add_argument("names", nargs="*", help="levers (basin) or width rules (weights) to run; default all")
    ap.add_argument("--seeds", type=int, help="sweep.lr_transfer.seeds (a cheaper screen: 1)")
    ap.add_argument("--data", help="another corpus (data=<name>), in study folders of its own")
    ap.add_argument("--weights", nargs="+", help=f"weights only: which of {' '.join(WEIGHTS)} (default all)")
    ap.add_argument("--dry-run", action="store_true", help="print the calls, run nothing")
    cut = argv.index("--") if "--" in argv else len(argv)
    return ap.parse_args(argv[:cut]), argv[cut + 1:]


def main(argv: list[str] | None = None) -> int:
    args, extra = parse(sys.argv[1:] if argv is None else argv)
    for label, overrides in calls(args.study, args.names, args.seeds, args.data, args.weights, extra):
        print(f"== {label}", file=sys.stderr, flush=True)
        if args.dry_run:
            print(shlex.join(["python", "-m", "ptsweep", "lr-transfer", *overrides]))
            continue
        code = run(overrides)
        if code:
            return code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
