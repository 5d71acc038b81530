#!/usr/bin/env bash
# The 1200-step studies of mup_sp anchored at width 32 (README.md here, log 2026-11-26): the six
# information weights one at a time (0.5 / 1 / 2 at LR 0.01, width 32, then width 128; the weight 1 run is the LR
# study's) in runs/lr-anchored, and the LR grid 0.01 / 0.02 / 0.04 with 25 % warm-up at widths 32-128 in
# runs/lr-warm25. Seed 0 (sweep.lr_transfer.seeds=1). Every call resumes from its ledger, so re-running the script continues
# where it stopped. Run it from a detached worktree, as run_long_study.sh says:
#   PY=../main/.venv/bin/python setsid nohup bash experiments/lr-transfer/run_anchored_study.sh > runs/anchored.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/lr-transfer/study_env.sh
COMMON=(preset=lr_study tracker=disabled train.tokens=1228800 sweep.lr_transfer.grid_points=3 'sweep.lr_transfer.parametrizations=[mup_sp]' model.damping_z=0
        model.base_width=32 model.base_rank=8 'sweep.lr_transfer.widths=[32,64,128]' sweep.lr_transfer.seeds=1)
weights() {  # weights WIDTHS KEY...
  local widths=$1; shift
  for key in "$@"; do
    echo "== $key at $widths $(date -u +%H:%M:%S)"
    $PY -m ptsweep lr-transfer "${COMMON[@]}" sweep.study=lr-anchored 'sweep.lr_transfer.sp_grid_range=[0.005,0.02]' \
      'sweep.lr_transfer.weight_grid=[0.5,1.0,2.0]' sweep.lr_transfer.weight_lr=0.01 "sweep.lr_transfer.weight_key=model.$key" \
      "sweep.lr_transfer.weight_widths=$widths"
  done
}
ALL=(w_attn w_child w_head w_unary w_topic_z w_topic_g)
weights '[32]' "${ALL[@]}"
echo "== warm-up 25 % $(date -u +%H:%M:%S)"
$PY -m ptsweep lr-transfer "${COMMON[@]}" sweep.study=lr-warm25 optim.warmup_frac=0.25 'sweep.lr_transfer.sp_grid_range=[0.01,0.04]' \
  'sweep.lr_transfer.weight_grid=[]'
weights '[128]' "${ALL[@]}"
echo "== done $(date -u +%H:%M:%S)"
