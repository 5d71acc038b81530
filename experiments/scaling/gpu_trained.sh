#!/usr/bin/env bash
# The trained-budget comparison (preset=trained: 32,400 steps of 16 x 64) on one GPU, every trial of the study at
# once through Ray Tune with fractional GPUs (1 CPU and 1/CONCURRENT of the GPU per trial), in fp32 like the CPU.
# A call runs at most LIMIT_S seconds, then stops the sweep with SIGINT: the ledger keeps finished trials and each
# running trial its last checkpoint (every 60 s here), so the same call continues it on the same machine.
#
# From the repository root, with hydra-core / omegaconf wheels in .whl, antlr4 as .whl/site/antlr4 and the
# tokenised corpus in runs/cache (bench/gpu_env.sh):
#   SCALES=32,64 bash experiments/scaling/gpu_trained.sh          # -> $OUT/log.txt, $OUT/study.tgz
#   SCALES=32,64,128 CONCURRENT=16 bash experiments/scaling/gpu_trained.sh
set -uo pipefail
OUT=${OUT:-runs/gpu-scaling}
RES=runs
LIMIT_S=${LIMIT_S:-540}
CONCURRENT=${CONCURRENT:-16}
source bench/gpu_env.sh  # log to $OUT/log.txt, wheels, offline environment
export OMP_NUM_THREADS=1 RAY_AUTH_MODE=token RAY_USAGE_STATS_ENABLED=0
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
GPU_SHARE=$(python3 -c "print(round(1 / $CONCURRENT, 4))")
timeout -s INT -k 60 "$LIMIT_S" python3 -m ptsweep scaling-curves preset=trained tracker=disabled \
  "sweep.scales=[${SCALES:-32,64}]" train.device=cuda train.precision=fp32 train.checkpoint_every_s=60 \
  ray.num_cpus="$CONCURRENT" ray.cpus_per_trial=1 ray.gpus_per_trial="$GPU_SHARE" \
  ray.max_concurrent="$CONCURRENT" ${ARGS:-}
echo "scaling-curves exit $? at $(date -u +%H:%M:%S)"
python3 experiments/scaling/curves_table.py runs/scaling-trained
tar -czf "$OUT/study.tgz" --exclude=checkpoint.pt --exclude=ray -C runs scaling-trained
