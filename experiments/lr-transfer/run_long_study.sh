#!/usr/bin/env bash
# The long-budget lr-transfer study (experiments/lr-transfer/README.md, log 2026-11-25): 1200 steps of 16 x 64 tokens
# (4x the 300-step study), muP and SP, the T = 0 control beside muP, widths 32 and 64 first, then 128. One study folder
# (runs/lr-long); every phase re-submits the earlier phases' trials, which the ledger skips, so re-running this
# script resumes where it stopped (a trial killed mid-run restarts from its last checkpoint). Trials are submitted
# narrowest width first, so width 32 completes first. Run it from a clean checkout (a detached worktree) so that edits
# in the working tree never reach the study's workers:
#   git worktree add --detach ../study HEAD && cd ../study && mkdir -p runs && cp -r ../main/runs/cache runs/
#   PY=../main/.venv/bin/python setsid nohup bash experiments/lr-transfer/run_long_study.sh > runs/lr-long.log 2>&1 &
# Partial tables while it runs:
#   PYTHONPATH=. $PY -m ptsweep.sweeps.lr_transfer runs/lr-long $COMMON 'sweep.lr_transfer.widths=[32,64]' (COMMON below)
# Extra arguments are Hydra overrides passed to every phase.
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/lr-transfer/study_env.sh
COMMON=(preset=lr_study tracker=disabled optim.warmup_frac=0.05 model.base_width=256 model.base_rank=64 sweep.study=lr-long train.tokens=1228800 'sweep.lr_transfer.weight_grid=[]'
        sweep.lr_transfer.grid_points=5 'sweep.lr_transfer.grid_range=[0.0078125,0.125]' 'sweep.lr_transfer.sp_grid_range=[0.0025,0.04]'
        'sweep.lr_transfer.parametrizations=[mup,sp]' "$@")
echo "== phase A $(date -u +%H:%M:%S): widths 32, 64"
$PY -m ptsweep lr-transfer "${COMMON[@]}" 'sweep.lr_transfer.widths=[32,64]'
echo "== phase B $(date -u +%H:%M:%S): + width 128"
$PY -m ptsweep lr-transfer "${COMMON[@]}" 'sweep.lr_transfer.widths=[32,64,128]'
echo "== done $(date -u +%H:%M:%S)"
