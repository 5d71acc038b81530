#!/usr/bin/env bash
# The candidate default (mup_sp, Z damping 0.5, 25 % warm-up) under the channels paradigm (C grows with N, r = 64
# fixed; the schema's default paradigm and the paper preset's), where the rank studies say nothing: eta* at widths
# 128 and 256 (anchored at 128: C = 2 there, SP at that width), 300 steps of 16 x 64, an LR grid a factor 2 apart
# (default 0.0025 .. 0.04, around the rank studies' eta* 0.02), one seed first, then seeds 1-2 at the two best values.
# Variants (environment): STUDY (folder under runs/, default lr-channels-300), GRID ('[lo,hi]') and POINTS (its
# points), EXTRA (more overrides; default model.attn_base_rank=64: SP's attention constant at the anchor's r0, as
# the study of 2026-11-26 (c055a45) ran before model.attn_base_rank existed, so its ledger keys match).
# Every call resumes from its ledger. Run it from a detached worktree, as run_long_study.sh says:
#   PY=../main/.venv/bin/python setsid nohup bash experiments/lr-transfer/run_channels_study.sh > runs/channels.log 2>&1 &
# The cooler attention of 4bbc5ac (s_H = 8 / r, run as w_attn 0.125 before the default r_A = 8 existed; the same
# computation, A = w_attn s_H F, and the keys of its ledger):
#   STUDY=lr-channels-cool-300 GRID='[0.01,0.04]' POINTS=3 EXTRA='model.w_attn=0.125 model.attn_base_rank=64' \
#     PY=../main/.venv/bin/python setsid nohup bash experiments/lr-transfer/run_channels_study.sh > runs/cool.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/lr-transfer/study_env.sh
read -r -a EXTRA_ARGS <<< "${EXTRA:-model.attn_base_rank=64}"
COMMON=(preset=lr_study tracker=disabled optim.warmup_frac=0.25 model.damping_z=0.5 'sweep.lr_transfer.parametrizations=[mup_sp]'
        model.scaling=channels sweep.lr_transfer.scaling=channels model.base_width=128 model.base_channels=2 model.base_rank=64
        'sweep.lr_transfer.widths=[128,256]' 'sweep.lr_transfer.weight_grid=[]' "sweep.lr_transfer.grid_points=${POINTS:-5}"
        "sweep.lr_transfer.sp_grid_range=${GRID:-[0.0025,0.04]}" "sweep.study=${STUDY:-lr-channels-300}" "${EXTRA_ARGS[@]}")
echo "== one seed $(date -u +%H:%M:%S)"
$PY -m ptsweep lr-transfer "${COMMON[@]}" sweep.lr_transfer.seeds=1
echo "== seeds 1-2 at the two best values $(date -u +%H:%M:%S)"
$PY -m ptsweep lr-transfer "${COMMON[@]}" sweep.lr_transfer.seeds=3 sweep.lr_transfer.refine_top=2
echo "== done $(date -u +%H:%M:%S)"
