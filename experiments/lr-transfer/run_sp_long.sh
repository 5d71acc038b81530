#!/usr/bin/env bash
# SP beside the default at the long budget (1200 steps, 25 % warm-up, no Z damping: SP's own default) at widths 64
# and 128 (experiments/lr-transfer/README.md, "Current result"; width 32's SP grid is in the
# same section): the grid 0.0025 .. 0.04 (factor 2 apart), then seeds 1-2 at each width's best value, in runs/sp-long.
# Resumable from its ledger like the other study scripts; run it from a detached worktree:
#   git worktree add --detach ../study HEAD && cd ../study && mkdir -p runs && cp -r ../main/runs/cache runs/
#   PY=../main/.venv/bin/python setsid nohup bash experiments/lr-transfer/run_sp_long.sh > runs/sp-long.log 2>&1 &
# Tables while it runs: PYTHONPATH=. $PY experiments/lr-transfer/lever_table.py runs/sp-long --par sp --width 128
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/lr-transfer/study_env.sh
echo "== SP at widths 64, 128 $(date -u +%H:%M:%S)"
$PY -m ptsweep lr-transfer preset=lr_study tracker=disabled train.tokens=1228800 optim.warmup_frac=0.25 \
  'sweep.lr_transfer.parametrizations=[sp]' model.base_width=32 model.base_rank=8 'sweep.lr_transfer.widths=[64,128]' \
  'sweep.lr_transfer.weight_grid=[]' 'sweep.lr_transfer.control={}' sweep.lr_transfer.grid_points=5 'sweep.lr_transfer.sp_grid_range=[0.0025,0.04]' \
  sweep.lr_transfer.refine_top=1 sweep.lr_transfer.seeds=3 sweep.study=sp-long "$@"
echo "== done $(date -u +%H:%M:%S)"
