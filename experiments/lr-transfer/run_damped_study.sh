#!/usr/bin/env bash
# mup_sp with Z damping 0.5 and a 25 % warm-up (README.md here, log 2026-11-26): the LR grid
# 0.01 .. 0.08 at widths 32-128 and 1200 steps, then seeds 1-2 at the two best values of each width, in
# runs/lr-damped. Every call resumes from its ledger; run it from a detached worktree, as run_long_study.sh says:
#   PY=../main/.venv/bin/python setsid nohup bash experiments/lr-transfer/run_damped_study.sh > runs/damped.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/lr-transfer/study_env.sh
$PY -m ptsweep lr-transfer preset=lr_study tracker=disabled train.tokens=1228800 optim.warmup_frac=0.25 \
  model.damping_z=0.5 'sweep.lr_transfer.parametrizations=[mup_sp]' model.base_width=32 model.base_rank=8 \
  'sweep.lr_transfer.widths=[32,64,128]' 'sweep.lr_transfer.weight_grid=[]' sweep.lr_transfer.grid_points=4 'sweep.lr_transfer.sp_grid_range=[0.01,0.08]' \
  sweep.study=lr-damped "$@"
