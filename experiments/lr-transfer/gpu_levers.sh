#!/usr/bin/env bash
# PT's basin levers (levers.md here) on one GPU: `levers.py basin`, or with STUDY=weights `levers.py weights`,
# with every trial of a call at once through Ray Tune (1 CPU and 1/CONCURRENT of the GPU per trial, fp32 as on
# the CPU), on Shakespeare and then on the Python documentation. A call runs at most LIMIT_S seconds, then stops
# the sweep with SIGINT: each study's ledger keeps the finished trials and each running trial its last checkpoint
# (every 60 s), so the same call continues it.
#
# From the repository root, with the wheels of bench/gpu_env.sh in .whl and runs/cache holding both tokenised
# corpora (build the second here first: `make corpus-python-docs`, then one `python -m ptsweep train
# preset=lr_study data=python_docs train.tokens=1024` tokenises it; carry runs/cache):
#   bash experiments/lr-transfer/gpu_levers.sh                          # every lever, both corpora
#   CORPORA=shakespeare SEEDS=1 bash experiments/lr-transfer/gpu_levers.sh row_rms-wattn6 qz_floor-0.5
#   STUDY=weights CORPORA=shakespeare bash experiments/lr-transfer/gpu_levers.sh default z_scale   # the weight optima
#     with and without a width rule (levers.py weights: 84 trials a rule, ~half at width 128)
# Arguments: lever or rule names of levers.py (default all); SEEDS: its --seeds.
# -> $OUT/log.txt, the tables of lever_table.py and $OUT/levers.tgz (the study folders without checkpoints).
set -uo pipefail
OUT=${OUT:-runs/gpu-levers}
RES=runs
LIMIT_S=${LIMIT_S:-540}
CONCURRENT=${CONCURRENT:-18}  # a lever's call: 3 LRs x 2 widths x 3 seeds, for the default and the lever
STUDY=${STUDY:-basin}  # levers.py basin | weights
source bench/gpu_env.sh  # log to $OUT/log.txt, wheels, offline environment
export OMP_NUM_THREADS=1 PY=${PY:-python3} PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
source experiments/lr-transfer/study_env.sh  # the lr-transfer studies' environment (Ray worker niceness, token auth)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
GPU_SHARE=$(python3 -c "print(round(1 / $CONCURRENT, 4))")
RAY_ARGS="ray.num_cpus=$CONCURRENT ray.cpus_per_trial=1 ray.gpus_per_trial=$GPU_SHARE ray.max_concurrent=$CONCURRENT"
EXTRA="train.device=cuda train.precision=fp32 train.checkpoint_every_s=60 $RAY_ARGS"  # change no trial key
deadline=$((SECONDS + LIMIT_S))
for corpus in ${CORPORA:-shakespeare python_docs}; do
  left=$((deadline - SECONDS))
  [ "$left" -gt 30 ] || { echo "out of time before $corpus: run the same command again"; break; }
  data=$([ "$corpus" = shakespeare ] || echo "$corpus")
  # shellcheck disable=SC2086  # EXTRA: one override a word
  timeout -s INT -k 60 "$left" "$PY" experiments/lr-transfer/levers.py "$STUDY" "$@" ${data:+--data "$data"} \
    ${SEEDS:+--seeds "$SEEDS"} -- $EXTRA
  echo "$corpus exit $? at $(date -u +%H:%M:%S)"
  if [ "$STUDY" = basin ]; then
    for width in 32 128; do
      python3 experiments/lr-transfer/lever_table.py "runs/levers-basin${data:+-$data}" --width "$width" --seeds 0 1 2
    done
  else  # each variant's optima per study and width (lr, weights, control), from its summary
    for f in runs/weights-*${data:+-$data}/optima.csv; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done
  fi
done
tar -czf "$OUT/levers.tgz" --exclude=checkpoint.pt --exclude=ray -C runs $(cd runs && ls -d levers-basin* weights-* 2>/dev/null)
