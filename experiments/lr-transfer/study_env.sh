# Sourced by the study scripts of this folder, from the repository root: the environment every study runs in.
# Offline Hugging Face, Ray with token auth and no usage report. Ray starts its trial workers at nice 15 by default;
# on a shared machine that starves them behind every nice-0 process, so they run at the same priority as everyone
# else. PY: the interpreter (default the checkout's .venv; a detached worktree passes ../main/.venv/bin/python).
export RAY_worker_niceness=${RAY_worker_niceness:-0}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 RAY_AUTH_MODE=token RAY_USAGE_STATS_ENABLED=0 TOKENIZERS_PARALLELISM=false
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # keeps a caller's entries (the GPU scripts' wheels)
PY=${PY:-.venv/bin/python}
