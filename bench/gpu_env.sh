# Sourced by the GPU scripts (bench/gpu_check.sh, experiments/demo/gpu_baselines.sh) on a lent machine: with $OUT and
# $RES set, logs everything to $OUT/log.txt, installs the wheels the machine lacks (.whl: hydra-core, omegaconf;
# antlr4 as .whl/site/antlr4) and sets the offline environment. A caller that backgrounds jobs must wait on their
# PIDs, not with a bare `wait`, which would also wait for the `tee` below.
mkdir -p "$OUT" "$RES"
exec > >(tee "$OUT/log.txt") 2>&1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=$PWD:/tmp/site:$PWD/.whl/site
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false WANDB_MODE=disabled
