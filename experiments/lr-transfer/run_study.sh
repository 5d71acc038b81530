#!/usr/bin/env bash
# The lr-transfer study of experiments/lr-transfer/README.md, in three phases that share one study folder
# (runs/lr-transfer-study): every phase re-submits the trials of the phases before it, which the ledger skips.
# Phase A gives the drift between the end widths (32 and 256), B adds the information-weight study at those widths,
# C adds the middle widths 64 and 128. Re-running this script resumes where it stopped (finished trials are never
# re-run; a trial killed mid-run restarts from its last checkpoint).
#   setsid nohup bash experiments/lr-transfer/run_study.sh > runs/lr-transfer-study.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/../.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 RAY_AUTH_MODE=disabled RAY_USAGE_STATS_ENABLED=0 TOKENIZERS_PARALLELISM=false
PY=${PY:-.venv/bin/python}
COMMON=(preset=lr_study tracker=disabled sweep.study=lr-transfer-study "$@")
echo "== phase A $(date -u +%H:%M:%S): LR study at widths 32, 256"
$PY -m ptsweep lr-transfer "${COMMON[@]}" 'sweep.lr_widths=[32,256]' 'sweep.lr_weight_grid=[]'
echo "== phase B $(date -u +%H:%M:%S): + information-weight study at widths 32, 256"
$PY -m ptsweep lr-transfer "${COMMON[@]}" 'sweep.lr_widths=[32,256]'
echo "== phase C $(date -u +%H:%M:%S): + widths 64, 128"
$PY -m ptsweep lr-transfer "${COMMON[@]}"
echo "== done $(date -u +%H:%M:%S)"
