#!/usr/bin/env bash
# The information weights whose optimum at width 128 sat on the edge (2) of run_candidate_study.sh's grid 0.5 / 1 / 2:
# the value 4 at width 128 (1200 steps, eta 0.02, seed 0), in the same study (runs/lr-damped), so 0.5 / 1 / 2 and
# their seeds are found in the ledger and the sweep's weight table shows all four values. Resumable like the others.
# Run it from the detached worktree of the candidate study (same code, same trial keys):
#   PY=../main/.venv/bin/python setsid nohup bash experiments/lr-transfer/run_weight_edge.sh > runs/edge.log 2>&1 &
# Arguments: the weights (default: w_unary w_attn w_head w_child).
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/lr-transfer/study_env.sh
COMMON=(preset=lr_study tracker=disabled optim.warmup_frac=0.25 model.damping_z=0.5 'sweep.lr_transfer.parametrizations=[mup_sp]'
        model.base_width=32 model.base_rank=8 'sweep.lr_transfer.widths=[32,64,128]' sweep.study=lr-damped train.tokens=1228800
        sweep.lr_transfer.grid_points=4 'sweep.lr_transfer.sp_grid_range=[0.01,0.08]' sweep.lr_transfer.weight_lr=0.02
        'sweep.lr_transfer.weight_widths=[128]')
KEYS=("$@")
[ ${#KEYS[@]} -gt 0 ] || KEYS=(w_unary w_attn w_head w_child)
for key in "${KEYS[@]}"; do
  echo "== $key = 4 at width 128 $(date -u +%H:%M:%S)"
  # sweep.lr_transfer.seeds=1: stage 1 only (the 3-seed runs at 1 and 2 are already in the ledger); one new trial per call,
  # so it gets both cores (ray.* is not part of a trial's key)
  $PY -m ptsweep lr-transfer "${COMMON[@]}" 'sweep.lr_transfer.weight_grid=[0.5,1.0,2.0,4.0]' sweep.lr_transfer.seeds=1 \
    ray.cpus_per_trial=2 "sweep.lr_transfer.weight_key=model.$key"
done
echo "== done $(date -u +%H:%M:%S)"
