#!/usr/bin/env bash
# The candidate default (mup_sp anchored at width 32, 25 % warm-up; README.md here, log 2026-11-26)
# at two budgets: 300 steps (runs/lr-warm25-300: the grid 0.005 .. 0.04 at widths 32-128, then seeds 1-2 at the two
# best values of each width) and 1200 steps (runs/lr-warm25: seeds 1-2 at the two best of run_anchored_study.sh's
# seed-0 grid). Every call resumes from its ledger; run it from a detached worktree, as run_long_study.sh says:
#   PY=../main/.venv/bin/python setsid nohup bash experiments/lr-transfer/run_warmup_study.sh > runs/warmup.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/lr-transfer/study_env.sh
COMMON=(preset=lr_study tracker=disabled optim.warmup_frac=0.25 'sweep.lr_transfer.parametrizations=[mup_sp]' model.damping_z=0
        model.base_width=32 model.base_rank=8 'sweep.lr_transfer.widths=[32,64,128]' 'sweep.lr_transfer.weight_grid=[]')
echo "== 300 steps $(date -u +%H:%M:%S)"
$PY -m ptsweep lr-transfer "${COMMON[@]}" sweep.study=lr-warm25-300 sweep.lr_transfer.grid_points=4 'sweep.lr_transfer.sp_grid_range=[0.005,0.04]'
echo "== 1200 steps, seeds 1-2 $(date -u +%H:%M:%S)"
$PY -m ptsweep lr-transfer "${COMMON[@]}" sweep.study=lr-warm25 train.tokens=1228800 sweep.lr_transfer.grid_points=3 \
  'sweep.lr_transfer.sp_grid_range=[0.01,0.04]'
echo "== done $(date -u +%H:%M:%S)"
