#!/usr/bin/env bash
# The GPU cluster check as one script for a lent machine (bench/README.md, "Cluster check"): one bench_cluster.py
# run (packed trials, PT and BERT eager, width 3072, then the CUDA-graph rows, whose compile takes longest), each
# process group under its own time limit so one hang costs one row; the JSON and Markdown are rewritten after each
# part, so a run cut short keeps what it measured. Outputs under $OUT: log.txt, cluster.json, cluster.md.
#
# From the repository root, with the packages the machine lacks in .whl (as bench/gpu_check.sh; no corpus needed):
#   bash bench/gpu_cluster_check.sh            (LIMIT_S: the whole run's limit, default 540)
set -uo pipefail
OUT=${OUT:-runs/gpu-cluster}
RES=$OUT
source bench/gpu_env.sh  # log to $OUT/log.txt, wheels, offline environment
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())"
echo "== bench_cluster $(date -u +%H:%M:%S)"
timeout "${LIMIT_S:-540}" python3 bench/bench_cluster.py --timeout 180 --out "$OUT" || echo "== bench_cluster: exit $?"
echo "== done $(date -u +%H:%M:%S)"
