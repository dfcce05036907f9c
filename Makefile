# Newcomer entry points (see README): `make up` runs a real local P/D deployment,
# `make test` sets up and runs every check CI runs. Both create .venv on first use.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROMPT ?= The quick brown fox
# CPU build of torch; installed before anything that depends on torch so pip never pulls CUDA.
TORCH ?= torch==2.13.0

.PHONY: up test check lint typecheck imports pytest bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e '.[operator,worker,dev]'
	touch $(STAMP)

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
