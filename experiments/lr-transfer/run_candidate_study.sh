#!/usr/bin/env bash
# The candidate default (mup_sp anchored at width 32, Z damping 0.5, 25 % warm-up; README.md here, log
# 2026-11-26) beyond its 1200-step LR study (run_damped_study.sh):
#   1. 300 steps: the LR grid 0.005 .. 0.04 at widths 32-128, then seeds 1-2 at the best values (runs/lr-damped-300),
#      for eta* over budget;
#   2. 1200 steps: the six information weights one at a time (0.5 / 1 / 2 at eta 0.02, the candidate's eta* at every
#      width; seed 0), at width 32, then width 128, in run_damped_study.sh's study runs/lr-damped: a study's ledger
#      is its own folder, so the same study (and the same LR plan) finds the LR grid, its seeds and the weight-1 run
#      finished.
# Every call resumes from its ledger, so re-running the script continues where it stopped. Run it from a detached
# worktree, as run_long_study.sh says:
#   PY=../main/.venv/bin/python setsid nohup bash experiments/lr-transfer/run_candidate_study.sh > runs/candidate.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/lr-transfer/study_env.sh
COMMON=(preset=lr_study tracker=disabled optim.warmup_frac=0.25 model.damping_z=0.5 'sweep.lr_transfer.parametrizations=[mup_sp]'
        model.base_width=32 model.base_rank=8 'sweep.lr_transfer.widths=[32,64,128]')
echo "== 300 steps $(date -u +%H:%M:%S)"
$PY -m ptsweep lr-transfer "${COMMON[@]}" sweep.study=lr-damped-300 sweep.lr_transfer.grid_points=4 \
  'sweep.lr_transfer.sp_grid_range=[0.005,0.04]' 'sweep.lr_transfer.weight_grid=[]'
weights() {  # weights WIDTHS KEY...
  local widths=$1; shift
  for key in "$@"; do
    echo "== $key at $widths $(date -u +%H:%M:%S)"
    $PY -m ptsweep lr-transfer "${COMMON[@]}" sweep.study=lr-damped train.tokens=1228800 sweep.lr_transfer.grid_points=4 \
      'sweep.lr_transfer.sp_grid_range=[0.01,0.08]' 'sweep.lr_transfer.weight_grid=[0.5,1.0,2.0]' \
      sweep.lr_transfer.weight_lr=0.02 "sweep.lr_transfer.weight_key=model.$key" "sweep.lr_transfer.weight_widths=$widths"
  done
}
ALL=(w_unary w_attn w_child w_head w_topic_z w_topic_g)
weights '[32]' "${ALL[@]}"
weights '[128]' "${ALL[@]}"
echo "== done $(date -u +%H:%M:%S)"
