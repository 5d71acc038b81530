# ptsweep: every user-facing job is one make target; each installs what it needs first (make setup).
# Overrides: any Hydra override via ARGS="model.width=512 optim.lr=3e-3"; PRESET=smoke|demo|paper.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.ptsweep-installed
PRESET ?= demo
ARGS ?=
# ARGS="+experiment=<name>" (conf/experiment/) brings its own preset: PRESET is passed only when you set it.
PRESET_ARG = $(if $(and $(findstring +experiment=,$(ARGS)),$(filter file default,$(origin PRESET))),,preset=$(PRESET))
# Ray keeps its token authentication on (never switch it off): a local `ray.init` generates
# ~/.ray/auth_token; on a cluster every node and the driver share one token (README, "Running on a GPU cluster").
export RAY_AUTH_MODE ?= token
export RAY_USAGE_STATS_ENABLED ?= 0
export TOKENIZERS_PARALLELISM ?= false

.PHONY: setup corpus-python-docs test demo tune-small verify-transfer scaling-curves coord-check lr-transfer bench bench-memory bench-cluster plan report size train clean-runs help

help:
	@echo "make setup            create .venv and install ptsweep (CPU torch pinned)"
	@echo "make corpus-python-docs  second English corpus (Debian's python3.11-doc, apt-get) -> data=python_docs"
	@echo "make test             run the test suite (installs first)"
	@echo "make demo             toy-scale chain of the three sweeps on the embedded Shakespeare data -> runs/demo/report.md"
	@echo "make tune-small       Optuna study of the 7 transferable HPs at width 256 (PRESET=$(PRESET))"
	@echo "make verify-transfer  WIDTH=1536 [ALPHA= P= N= SEEDS=]: random-search check of the transferred config"
	@echo "make scaling-curves   [SCALES=256,512 MODELS=pt,bert,ut[,modernbert] SCALING=channels|rank|both]"
	@echo "make coord-check      MODEL=pt|bert|ut: muP coordinate check with verdict"
	@echo "make lr-transfer      LR-transfer study (muP vs SP)"
	@echo "make lr-horizon       optimal LR over training budgets at the tuning width (PT + a baseline), eta*(T) fit"
	@echo "make bench            PT vs BERT vs UT speed/memory at matched size -> runs/bench/"
	@echo "make bench-memory     per-sequence training memory, PT/BERT/UT, L=128,512 -> runs/bench/memory.{json,md}"
	@echo "make bench-cluster    the GPU check: step times +- CUDA graphs, packed trials, width 3072 -> bench/results/"
	@echo "make report           STUDY=<results folder>: re-render a study's report.md and figures (no training)"
	@echo "make plan             GPU plan of the three sweeps (PRESET=$(PRESET)): memory, micro-batch, GPU-hours"

$(STAMP): pyproject.toml
	@test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	# torch first and pinned: the CPU wheel here; GPU users install their CUDA torch 2.13.0 before `make setup`.
	$(VPY) -c "import torch" 2>/dev/null || $(VPY) -m pip install -q torch==2.13.0
	$(VPY) -m pip install -q -e '.[dev]'
	$(VPY) -m ptsweep.data fetch-shakespeare
	@touch $(STAMP)

setup: $(STAMP)

# The Python documentation as a second corpus (conf/data/python_docs.yaml); needs `apt-get download`. ARGS: --deb
# PATH (a python3.X-doc .deb fetched elsewhere), --dest DIR.
corpus-python-docs: setup
	$(VPY) -m ptsweep.data build-python-docs $(ARGS)

# Three pytest workers (pytest-xdist), each given whole test modules (a module's local Ray starts once): most sweep
# tests wait on Ray, subprocesses and deadlines, so three keep 2 cores busy. Clean clones, 2 cores: pytest 588.6 s
# this way, 606.5 s with the longest modules first (--no-loadscope-reorder: three Rays at once). PYTEST_XDIST= runs
# one process.
PYTEST_XDIST ?= -n 3 --dist loadfile

test: setup
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=disabled $(VPY) -m pytest -q $(PYTEST_XDIST) $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

demo: setup
	$(VPY) -m ptsweep demo preset=demo $(ARGS)

tune-small: setup
	$(VPY) -m ptsweep tune-small $(PRESET_ARG) $(ARGS)

verify-transfer: setup
	$(VPY) -m ptsweep verify-transfer $(PRESET_ARG) \
	  $(if $(WIDTH),sweep.width=$(WIDTH)) $(if $(ALPHA),sweep.alpha=$(ALPHA)) $(if $(P),sweep.p=$(P)) \
	  $(if $(N),sweep.n=$(N)) $(if $(SEEDS),sweep.seeds=$(SEEDS)) $(ARGS)

scaling-curves: setup
	$(VPY) -m ptsweep scaling-curves $(PRESET_ARG) \
	  $(if $(SCALES),'sweep.scales=[$(SCALES)]') $(if $(MODELS),'sweep.models=[$(MODELS)]') \
	  $(if $(SCALING),sweep.scaling=$(SCALING)) $(ARGS)

coord-check: setup
	$(VPY) -m ptsweep coord-check $(PRESET_ARG) model=$(or $(MODEL),pt) $(ARGS)

lr-transfer: setup
	$(VPY) -m ptsweep lr-transfer $(PRESET_ARG) $(ARGS)

.PHONY: lr-horizon
lr-horizon: setup
	$(VPY) -m ptsweep lr-horizon $(PRESET_ARG) $(ARGS)

bench: setup
	$(VPY) bench/bench_models.py $(ARGS)

bench-memory: setup
	$(VPY) bench/bench_memory.py $(ARGS)

bench-cluster: setup
	$(VPY) bench/bench_cluster.py $(ARGS)

# A study's report.md and figures from its results folder alone (no training): STUDY=experiments/scaling/results/...
report: setup
	@test -n "$(STUDY)" || { echo "error: STUDY=<results folder> is required, e.g. make report STUDY=experiments/scaling/results/scaling-trained" >&2; exit 2; }
	$(VPY) -m ptsweep report $(STUDY)

plan: setup
	$(VPY) -m ptsweep plan $(PRESET_ARG) --bench-dir bench/results,runs/bench $(ARGS)

size: setup
	$(VPY) -m ptsweep size $(ARGS)

train: setup
	$(VPY) -m ptsweep train $(ARGS)

clean-runs:
	rm -rf runs/
