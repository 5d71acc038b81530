#!/usr/bin/env bash
# Wall time before / after, in one sitting (bench/README.md, "Wall time before and after"): the lr_study trial at
# width 128 (300 steps, one torch thread as in a Ray trial; BEFORE AFTER BEFORE AFTER), then `make demo` in each
# checkout. Each checkout needs its own `make setup` and runs/cache; nothing else may run on the machine meanwhile.
#   bash bench/ab_walltime.sh ../before ../after > runs/ab.log 2>&1
set -uo pipefail
BEFORE=$(cd "$1" && pwd); AFTER=$(cd "$2" && pwd)
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline RAY_AUTH_MODE=token

trial() {  # trial CHECKOUT REP: one lr_study trial, its wall time
  local t0; t0=$(date +%s.%N)
  (cd "$1" && OMP_NUM_THREADS=1 .venv/bin/python -m ptsweep train preset=lr_study model.width=128 optim.lr=0.02 \
     tracker=disabled train.progress=false out_dir="runs/ab-trial-$2" | tail -n 1)
  echo "trial $(basename "$1") rep $2: $(echo "$(date +%s.%N) - $t0" | bc) s"
}

demo() {  # demo CHECKOUT: make demo from a fresh runs/demo, its wall time
  rm -rf "$1/runs/demo"
  local t0; t0=$(date +%s.%N)
  (cd "$1" && make demo > runs/ab-demo.log 2>&1); local rc=$?
  echo "demo $(basename "$1"): exit $rc, $(echo "$(date +%s.%N) - $t0" | bc) s"
}

echo "start $(date -u +%H:%M:%S) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for rep in 1 2; do trial "$BEFORE" "$rep"; trial "$AFTER" "$rep"; done
demo "$BEFORE"
demo "$AFTER"
echo "end $(date -u +%H:%M:%S)"
