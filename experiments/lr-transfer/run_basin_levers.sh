#!/usr/bin/env bash
# PT's basin levers (levers.md here; the design: conf/experiment/levers_basin.yaml): each lever runs as the
# lr-transfer study's "control" model beside the default PT, over eta*/2, eta*, 2 eta* (0.01, 0.02, 0.04) at widths 32 and 128, 1200 steps, SEEDS seeds (default 3) at
# every value, all in one study folder runs/levers-basin: the default's trials have the same keys in every call, so
# they run once and pair with every lever (same seeds, data order and machine). Every call resumes from the ledger.
# Each control sets model.n_iters=4 (the default): the preset's control is the no-inference model
# {model.n_iters: 0}, and Hydra merges a dict override into it.
#   PY=.venv/bin/python setsid nohup bash experiments/lr-transfer/run_basin_levers.sh > runs/levers-basin.log 2>&1 &
#   SEEDS=1 bash experiments/lr-transfer/run_basin_levers.sh z_loss-1e-4 row_rms-wattn2   # a screen of two levers
#   DATA=python_docs bash experiments/lr-transfer/run_basin_levers.sh   # the second corpus (make corpus-python-docs),
#                                                                       # in its own study folder levers-basin-python_docs
# EXTRA: more overrides for every call that change no trial key (the device and Ray settings of gpu_levers.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/lr-transfer/study_env.sh
read -r -a EXTRA_ARGS <<< "${EXTRA:-}"
BASE=(+experiment=levers_basin "sweep.lr_transfer.seeds=${SEEDS:-3}" ${DATA:+"data=$DATA"}
      "sweep.study=levers-basin${DATA:+-$DATA}")
LEVERS=(  # name control-overrides (the lever: a variant of PT, model.variants; ptsweep/variants)
  "z_loss-1e-4 {model.n_iters:4,model.variants:[{name:z_loss,coef:1.0e-4}]}"
  "z_loss-1e-3 {model.n_iters:4,model.variants:[{name:z_loss,coef:1.0e-3}]}"
  "z_loss_all-1e-4 {model.n_iters:4,model.variants:[{name:z_loss,coef:1.0e-4,iters:all}]}"
  "qz_floor-0.5 {model.n_iters:4,model.variants:[{name:qz_entropy_floor,floor:0.5}]}"
  "qz_floor-0.7 {model.n_iters:4,model.variants:[{name:qz_entropy_floor,floor:0.7}]}"
  "row_rms-wattn2 {model.n_iters:4,model.variants:[{name:attn_row_rms}],model.w_attn:2.0}"
  "row_rms-wattn6 {model.n_iters:4,model.variants:[{name:attn_row_rms}],model.w_attn:6.0}"
  "z_scale {model.n_iters:4,model.variants:[{name:z_scale}]}"
  "topic_scale {model.n_iters:4,model.variants:[{name:topic_scale}]}"
)
for entry in "${LEVERS[@]}"; do
  name=${entry%% *}
  if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
  echo "== $name $(date -u +%H:%M:%S)" >&2
  $PY -m ptsweep lr-transfer "${BASE[@]}" "${EXTRA_ARGS[@]}" "sweep.lr_transfer.control=${entry#* }"
done
