#!/usr/bin/env bash
# The lr-transfer study of experiments/lr-transfer/README.md, in three phases that share one study folder
# (runs/lr-transfer-study): every phase re-submits the trials of the phases before it, which the ledger skips, so the
# last phase's summary covers everything. Ordered by cost on 2 shared CPU cores (a width-256 trial is ~10-25x a
# width-32 one): A = LR study at widths 32, 64; B = + width 256 (the 8x end) and the information-weight study at widths
# 32 and 256; C = + width 128. Re-running this script resumes where it stopped (finished trials are never re-run; a trial killed
# mid-run restarts from its last checkpoint).
#   setsid nohup bash experiments/lr-transfer/run_study.sh > runs/lr-transfer-study.log 2>&1 &
# Extra arguments are Hydra overrides passed to every phase.
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/lr-transfer/study_env.sh
COMMON=(preset=lr_study tracker=disabled 'sweep.lr_transfer.parametrizations=[mup,sp]' optim.warmup_frac=0.05 \
        model.base_width=256 model.base_rank=64 'sweep.lr_transfer.sp_grid_range=[6.25e-4,2.0e-2]' sweep.lr_transfer.weight_lr=6.25e-2 sweep.study=lr-transfer-study "$@")
echo "== phase A $(date -u +%H:%M:%S): LR study at widths 32, 64"
$PY -m ptsweep lr-transfer "${COMMON[@]}" 'sweep.lr_transfer.widths=[32,64]' 'sweep.lr_transfer.weight_grid=[]'
echo "== phase B $(date -u +%H:%M:%S): + width 256, + w_attn study at 32 and 256"
$PY -m ptsweep lr-transfer "${COMMON[@]}" 'sweep.lr_transfer.widths=[32,64,256]'
echo "== phase C $(date -u +%H:%M:%S): + width 128"
$PY -m ptsweep lr-transfer "${COMMON[@]}" 'sweep.lr_transfer.widths=[32,64,128,256]'
echo "== done $(date -u +%H:%M:%S)"
