#!/usr/bin/env bash
# Basin levers on mup_sp anchored at width 32, 1200 steps (README.md here, log 2026-11-26): one
# instrumented run per lever and LR (experiments/context/probe_training.py, which trains exactly as a sweep trial:
# the same loss to the printed digit), into runs/levers/<name>.json. A finished probe is skipped, so re-running the
# script continues where it stopped. Tables: lever_table.py runs/levers runs/lr-anchored --width 32 --seeds 0.
set -uo pipefail
cd "$(dirname "$0")/../.."
source experiments/lr-transfer/study_env.sh
export OMP_NUM_THREADS=1  # one thread per probe
OUT=${OUT:-runs/levers}
mkdir -p "$OUT"
BASE="preset=lr_study model.width=32 model.scaling=rank model.parametrization=mup_sp model.base_width=32 model.base_rank=8 train.tokens=1228800 train.threads=1"
probe() {  # probe NAME [--lever value] OVERRIDES...
  local name=$1; shift
  [ -f "$OUT/$name.json" ] && return 0
  echo "== $name $(date -u +%H:%M:%S)"
  $PY experiments/context/probe_training.py --every 100 --out "$OUT/$name.json" "$@" 2> "$OUT/$name.log" | tail -1
}
for lr in 0.005 0.01 0.02 0.04; do probe base-lr$lr $BASE seed=0 optim.lr=$lr; done
for lr in 0.005 0.01 0.02 0.04 0.08; do probe warm25-lr$lr $BASE seed=0 optim.lr=$lr optim.warmup_frac=0.25; done
for lr in 0.005 0.01 0.02 0.04; do probe iwd5e-4-lr$lr --independent-wd 5e-4 $BASE seed=0 optim.lr=$lr; done
for lr in 0.01 0.02 0.04; do probe cap4-lr$lr --feature-cap 4 $BASE seed=0 optim.lr=$lr; done
for lr in 0.01 0.02 0.04; do
  probe warm25-cap4-lr$lr --feature-cap 4 $BASE seed=0 optim.lr=$lr optim.warmup_frac=0.25
  probe warm25-iwd5e-4-lr$lr --independent-wd 5e-4 $BASE seed=0 optim.lr=$lr optim.warmup_frac=0.25
done
for s in 1 2; do for lr in 0.01 0.02; do probe warm25-lr$lr-s$s $BASE seed=$s optim.lr=$lr optim.warmup_frac=0.25; done; done
probe wattn4-lr0.01 $BASE seed=0 optim.lr=0.01 model.w_attn=4.0     # the weight study's edges, extended
probe wunary4-lr0.01 $BASE seed=0 optim.lr=0.01 model.w_unary=4.0
# the old default 'mup' (its own anchor) with 25 % warm-up, beside its 1200-step runs of 2026-11-25 (20dfa94)
MUP="preset=lr_study model.parametrization=mup model.base_width=256 model.base_rank=64 model.width=32 model.scaling=rank train.tokens=1228800 train.threads=1 seed=0"
probe mup-lr0.03125 $MUP optim.lr=0.03125
for lr in 0.03125 0.0625; do probe mup-warm25-lr$lr $MUP optim.lr=$lr optim.warmup_frac=0.25; done
# a third budget: 2400 steps
B2400="${BASE/train.tokens=1228800/train.tokens=2457600} seed=0"
for lr in 0.005 0.01 0.02; do probe b2400-lr$lr $B2400 optim.lr=$lr; done
for lr in 0.01 0.02 0.04; do probe b2400-warm25-lr$lr $B2400 optim.lr=$lr optim.warmup_frac=0.25; done
# the demo's budget (192 steps, preset=demo): does mup_sp learn >= 0.2 nats of context there?
DEMO="preset=demo model.width=32 model.scaling=rank train.threads=1 seed=0 model.base_width=32 model.base_rank=8"
probe demo-mup-0.0625-0.05 $DEMO optim.lr=0.0625
for spec in 0.01:0.05 0.02:0.05 0.02:0.25 0.04:0.25; do
  probe demo-mup_sp-${spec%:*}-${spec#*:} $DEMO model.parametrization=mup_sp optim.lr=${spec%:*} optim.warmup_frac=${spec#*:}
done
