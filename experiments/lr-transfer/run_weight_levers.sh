#!/usr/bin/env bash
# The four information weights whose optimum moved with width (w_unary, w_attn, w_head, w_child: flat at width 32,
# 2 at 128), re-measured with a width rule on (levers.md; the design: conf/experiment/weight_levers.yaml), beside
# the default in a study folder of its own: runs/weights-<variant>. Each call: the LR grid eta*/2, eta*, 2 eta* (0.01, 0.02, 0.04; eta* must stay 0.02) and one
# weight's grid 0.5 / 1 / 2 / 4 at eta 0.02, at widths 32 and 128, 1200 steps, seed 0 everywhere and seeds 1-2 at
# each grid's best two (refine_top=2). The preset's control, PT without inference (no context), runs over the LR grid
# too: the context-free reference of each width. Every call resumes from its ledger (the LR grid's and the control's
# trials have the same keys in every call of a variant, so they run once); EXTRA as in run_basin_levers.sh.
#   PY=.venv/bin/python setsid nohup bash experiments/lr-transfer/run_weight_levers.sh > runs/weights.log 2>&1 &
#   bash experiments/lr-transfer/run_weight_levers.sh z_scale                    # one variant, every weight
#   WEIGHTS="w_unary" bash experiments/lr-transfer/run_weight_levers.sh default z_scale
set -euo pipefail
cd "$(dirname "$0")/../.."
source experiments/lr-transfer/study_env.sh
read -r -a EXTRA_ARGS <<< "${EXTRA:-}"
BASE=(+experiment=weight_levers ${DATA:+"data=$DATA"})
VARIANTS=(  # name model-overrides (one word each)
  "default"
  "z_scale model.variants=[{name:z_scale}]"
  "topic_scale model.variants=[{name:topic_scale}]"
)
for entry in "${VARIANTS[@]}"; do
  read -r -a words <<< "$entry"
  name=${words[0]}
  if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
  for key in ${WEIGHTS:-w_unary w_attn w_head w_child}; do
    echo "== $name $key $(date -u +%H:%M:%S)" >&2
    $PY -m ptsweep lr-transfer "${BASE[@]}" "${EXTRA_ARGS[@]}" "${words[@]:1}" "sweep.lr_transfer.weight_key=model.$key" \
      "sweep.study=weights-$name${DATA:+-$DATA}"
  done
done
