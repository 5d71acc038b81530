#!/usr/bin/env bash
# At what budget do the demo's BERT / UT learn context? Single runs at the demo's settings (preset=demo: Shakespeare,
# V = 8192, blocks of 64, batch 16) and its matched shapes (`ptsweep size --table preset=demo model.scaling=rank`),
# 64x and 256x the demo's 300 steps, on one GPU in fp32 (the CPU's arithmetic), several runs at once. Each run's
# history.jsonl holds the in-loop [MASK]-target context gain on the 192 validation blocks every 2,400 steps, so a
# run cut by its time limit still shows its curve; a finished run adds the test-split gain (final.json).
#
# From the repository root on a GPU machine, with hydra-core / omegaconf wheels in .whl, antlr4 as .whl/site/antlr4
# and the tokenised corpus in runs/cache (carry both; experiments/demo/README.md, "Where the baselines start to learn"):
#   bash experiments/demo/gpu_baselines.sh        # -> $OUT/log.txt, $OUT/runs.tgz
#   SET=pt LIMIT_S=150 EVAL_EVERY=1200 bash experiments/demo/gpu_baselines.sh   # PT at widths 32 / 64 on the same schedule
set -uo pipefail
OUT=${OUT:-runs/gpu-baselines}
LIMIT_S=${LIMIT_S:-450}
RES=/tmp/gpu-baselines
source bench/gpu_env.sh  # log to $OUT/log.txt, wheels, offline environment
export OMP_NUM_THREADS=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

run() {  # run NAME STEPS OVERRIDES...: one training run in the background, its own time limit
  local name=$1 steps=$2; shift 2
  timeout "$LIMIT_S" python3 -m ptsweep train preset=demo tracker=disabled train.progress=false \
    train.device=cuda train.precision=fp32 train.tokens=$((steps * 1024)) train.eval_every=${EVAL_EVERY:-2400} train.eval_batches=12 \
    train.log_every=600 train.checkpoint_every_s=100000 optim.warmup_frac=0.25 out_dir="$RES/$name" "$@" \
    > "$RES/$name.log" 2>&1 &
  PIDS+=($!)
}
PIDS=()

BERT32="model=bert model.width=64 model.n_layers=1 model.n_heads=1"
BERT64="model=bert model.width=128 model.n_layers=2 model.n_heads=2"
UT64="model=ut model.width=128 model.n_layers=2 model.n_heads=2"
if [ "${SET:-baselines}" = pt ]; then  # PT (the demo's default, eta 0.02) on the baselines' 19.2k-step schedule
  run pt32-19k-2e-2 19200 model=pt model.scaling=rank model.width=32
  run pt64-19k-2e-2 19200 model=pt model.scaling=rank model.width=64
else
  run bert32-19k-3e-3 19200 $BERT32 optim.lr=3e-3
  run bert32-77k-3e-3 76800 $BERT32 optim.lr=3e-3
  run bert32-77k-1e-3 76800 $BERT32 optim.lr=1e-3
  run bert64-19k-3e-3 19200 $BERT64 optim.lr=3e-3
  run bert64-77k-1e-3 76800 $BERT64 optim.lr=1e-3
  run ut64-19k-3e-3 19200 $UT64 optim.lr=3e-3
  run ut64-77k-1e-3 76800 $UT64 optim.lr=1e-3
fi
wait "${PIDS[@]}"  # not a bare `wait`: it would also wait for the `tee` gpu_env.sh started, which never ends
date -u +%H:%M:%S
for f in "$RES"/*.log; do echo "== $(basename "$f")"; tail -3 "$f"; done
python3 - "$RES" <<'EOF'
import json, pathlib, sys
for d in sorted(pathlib.Path(sys.argv[1]).glob("*/train/*/history.jsonl")):
    rows = [json.loads(line) for line in d.read_text().splitlines()]
    curve = " ".join(f"{r['step']}:{r['context_gain']:+.3f}" for r in rows if "context_gain" in r)
    speed = [r["tokens_per_s"] for r in rows if "train_loss" in r]
    tail = f" tok/s {speed[-1]:.0f}" if speed else ""
    if (d.parent / "final.json").exists():
        m = json.loads((d.parent / "final.json").read_text())
        tail += (f" | FINAL test loss {m['test_loss']:.3f} gain {m['test_context_gain']:+.3f} +- "
                 f"{m['test_context_gain_se']:.3f} steps {m['steps']}")
    print(f"{d.parts[-4]}: {curve}{tail}")
EOF
tar -czf "$OUT/runs.tgz" -C "$RES" --exclude=checkpoint.pt .
