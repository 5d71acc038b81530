#!/usr/bin/env bash
# The GPU check as one script for a lent GPU machine (bench/README.md, "GPU check"): bench/bench_cluster.py part by
# part, in this order, each under its own time limit so one hang costs one part: step times eager (90 s), with CUDA
# graphs (190 s), 1/2/4/8 packed PT trials through Ray's fractional GPUs (120 s), PT / UT at width 3072 and 3008
# with train.micro_batch_size=auto (80 s); then, if at least TRAINED_MIN_S are left, the hook that runs packed
# preset=trained trials of the scaling study. Every row is written to the record file as soon as it is measured; the
# whole run stays under LIMIT_S (default 530 s), and the table of bench/README.md is printed from the record at the
# end (bench/gpu_table.py).
#
# The record: $RESULTS/gpu-<device>-<date>.json, RESULTS defaulting to $OUT/bench/results where $OUT is set (the
# lent machine's folder that comes back: copy the file into bench/results/ and commit it), else bench/results.
#
# From the repository root, with the packages the machine lacks in .whl (hydra-core, omegaconf, antlr4; Ray if it
# fits; see bench/README.md):
#   bash bench/gpu_cluster_check.sh
#   DRY=1 bash bench/gpu_cluster_check.sh     (the same path on the CPU at the smoke preset's shapes, ~1-2 min;
#                                             RESULTS defaults to runs/gpu-check-dry; tests/test_gpu_check_dry.py)
set -uo pipefail
DRY=${DRY:-0}
if [ "$DRY" = 1 ]; then FLAG=--dry; DEFAULT_RES=runs/gpu-check-dry; else FLAG=; DEFAULT_RES=bench/results; fi
RESULTS=${RESULTS:-${OUT:+$OUT/bench/results}}
RESULTS=${RESULTS:-$DEFAULT_RES}
OUT=${OUT:-runs/gpu-check}
RES=$RESULTS
LIMIT_S=${LIMIT_S:-530}
TRAINED_MIN_S=${TRAINED_MIN_S:-120}
PY=${PY:-python3}
source bench/gpu_env.sh  # log to $OUT/log.txt, wheels, offline environment
[ "$DRY" = 1 ] || nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$PY" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu')"

REC=$(timeout 60 "$PY" bench/bench_cluster.py $FLAG --new-record "$RESULTS" | tail -n 1)
[ -f "$REC" ] || { echo "== no record file could be created"; exit 1; }
echo "== record $REC"

left() { echo $((LIMIT_S - SECONDS)); }

part() {  # part LIMIT_S NAME: one part of bench_cluster.py within its own limit and what is left of the run's
  local limit=$1 name=$2 rest
  rest=$(left)
  [ "$rest" -lt "$limit" ] && limit=$rest
  if [ "$limit" -lt 20 ]; then echo "== $name: skipped, ${rest} s left"; return; fi
  echo "== $name $(date -u +%H:%M:%S) (limit ${limit} s)"
  timeout "$limit" "$PY" bench/bench_cluster.py $FLAG --record "$REC" --parts "$name" --timeout $((limit - 10)) \
    || echo "== $name: exit $?"
}

part 90 step-eager
part 190 step-graphs
part 120 pack
part 80 wide

# Hook: packed preset=trained trials of the scaling study, in the time that is left. Their finished trial records go
# to the study's results folder (made committable by the scaling study's own tooling, not here). It needs the
# Shakespeare plays (make setup's corpus in runs/cache) and Ray on the machine; TRAINED=0 skips it.
if [ "${TRAINED:-1}" = 1 ] && [ "$DRY" != 1 ] && [ "$(left)" -ge "$TRAINED_MIN_S" ]; then
  echo "== trained $(date -u +%H:%M:%S) (limit $(( $(left) - 15 )) s)"
  # -o: the machine's own python, no `make setup` (no network there)
  timeout $(( $(left) - 15 )) make -o .venv/.ptsweep-installed scaling-curves VPY="$PY" PRESET=trained \
    MODELS=pt,bert,ut,modernbert \
    ARGS="sweep.seeds=4 ray.num_cpus=16 ray.max_concurrent=8 ray.cpus_per_trial=2 ray.gpus_per_trial=0.125 ${TRAINED_ARGS:-}" \
    || echo "== trained: exit $? (resumable: the same command continues it)"
else
  echo "== trained: not run ($(left) s left, TRAINED=${TRAINED:-1}, DRY=$DRY)"
fi

"$PY" bench/gpu_table.py --record "$REC" || echo "== table: exit $?"
echo "== done $(date -u +%H:%M:%S), ${SECONDS} s"
