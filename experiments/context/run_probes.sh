#!/usr/bin/env bash
# Run probe_training.py for each "name: overrides" line of a spec file, two at a time (2 cores, 1 thread each).
#   bash experiments/context/run_probes.sh SPEC [OUTDIR]      (OUTDIR default runs/context; finished names are skipped)
# Common overrides (every line): preset=lr_study model.scaling=rank tracker=disabled; a line sets width, LR, etc.
# The probes in experiments/context/README.md ran under the default of their time; a line repeats them with
# model.parametrization=mup model.base_width=256 model.base_rank=64 optim.warmup_frac=0.05.
set -euo pipefail
spec=$1; out=${2:-runs/context}; mkdir -p "$out"
PY=${PY:-.venv/bin/python}
run_one() {
  local name=$1; shift
  [ -f "$out/$name.json" ] && return 0
  nice -n 5 "$PY" experiments/context/probe_training.py --out "$out/$name.json" --every 50 \
    preset=lr_study model.scaling=rank tracker=disabled "$@" > "$out/$name.log" 2>&1 || echo "FAILED $name" >&2
  tail -n 1 "$out/$name.log"
}
grep -v '^\s*#' "$spec" | grep -v '^\s*$' | while IFS=: read -r name overrides; do
  # shellcheck disable=SC2086
  run_one "$name" $overrides &
  while [ "$(jobs -rp | wc -l)" -ge 2 ]; do sleep 2; done
done
wait
