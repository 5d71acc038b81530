#!/usr/bin/env bash
# The GPU checks as one script (bench/README.md, "GPU"): bf16 step time and
# peak memory of PT (blockwise and dense), BERT and UT at widths 256 and 1536; per-sequence memory at width 1536;
# the paper preset's first 50 training steps at widths 256 and 1536 (on the Shakespeare plays with a V = 30522
# WordPiece: the machine reaches no hub) with train.micro_batch_size=auto. Each step has its own time limit, so one
# hang costs one row. Outputs: $OUT/log.txt and $OUT/gpu.tgz (every bench.md / memory.md / run summary).
#
# From the repository root, with the packages the machine lacks in .whl (hydra-core and omegaconf wheels, antlr4 as
# .whl/site/antlr4) and the tokenised corpus in runs/cache (carry both):
#   bash bench/gpu_check.sh
set -uo pipefail
OUT=${OUT:-runs/gpu}
RES=/tmp/gpu-results
source bench/gpu_env.sh  # log to $OUT/log.txt, wheels, offline environment
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__,
torch.cuda.get_device_name())"

step() {  # step LIMIT_S NAME CMD...: run one check with its own time limit, keep going on failure
  local limit=$1 name=$2; shift 2
  echo "== $name $(date -u +%H:%M:%S)"
  timeout "$limit" "$@" || echo "== $name: exit $?"
  tar -czf "$OUT/gpu.tgz" -C "$RES" . 2>/dev/null
}

models() {  # models WIDTH IMPL MODELS
  step 100 "bench w$1 $2" python3 bench/bench_models.py --device cuda --width "$1" --pt-impl "$2" --models "$3" \
    --steps 10 --warmup 3 --tracker disabled --out "$RES/bench-w$1-$2"
}

paper() {  # paper WIDTH: the paper preset's first 50 steps, then the CUDA peak of the process
  step 150 "paper preset w$1, 50 steps" python3 - "$1" "$RES/paper-w$1.txt" ${PAPER_EXTRA:-} <<'EOF'
import runpy, sys, time
import torch
width, out = sys.argv[1], sys.argv[2]
sys.argv = ["ptsweep", "train", "preset=paper", "data=shakespeare", "data.tokenizer=wordpiece", "data.vocab_size=30522",
            "tracker=disabled", "train.stop_after_steps=50", "train.micro_batch_size=auto", f"model.width={width}",
            "train.checkpoint=false", "train.progress=false", "train.log_every=10", f"sweep.study=gpu-paper-{width}",
            *sys.argv[3:]]
t0 = time.perf_counter()
try:
    runpy.run_module("ptsweep", run_name="__main__")
except SystemExit as e:
    print(f"exit {e.code}")
line = (f"width {width}: wall {time.perf_counter() - t0:.1f} s, CUDA peak allocated "
        f"{torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else float('nan'):.2f} GiB")
print(line)
open(out, "w").write(line + "\n")
EOF
}

models 256 blockwise pt,bert,ut
models 1536 blockwise pt,bert,ut
paper 1536
models 256 dense pt
models 1536 dense pt
step 150 "memory w1536 bf16" python3 bench/bench_memory.py --device cuda --precision bf16 --width 1536 \
  --seq-lens 128 --models pt,bert,ut --scalings channels --impls blockwise,dense --batches 1,5 --out "$RES/memory-bf16"
step 80 "memory w1536 fp32 PT" python3 bench/bench_memory.py --device cuda --precision fp32 --width 1536 \
  --seq-lens 128,512 --models pt --scalings channels --impls blockwise --batches 1,5 --out "$RES/memory-fp32"
paper 256
echo "== done $(date -u +%H:%M:%S)"
