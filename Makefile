# toolshim: every entry point a person or CI uses. `make help` lists them.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
# The locked versions (with hashes) that `make dev` installs: pyproject.toml's dependencies, its `test` extra and
# the llama.cpp server's dependencies. `make lock` refreshes it; docs/development.md says how.
LOCK := requirements/dev.txt
RULES ?= rules/default.json5
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: help install dev lock audit run demo test test-fast lint bench bench-crossings bench-model bench-loops bench-steps bench-bfcl bench-bfcl-multi-turn model llama serve-model clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(BIN)/python:
	$(PY) -m venv $(VENV)

# Running toolshim needs its own dependencies only; the test, lint and benchmark tools (about 0.9 GB with
# litellm and the client SDKs) come with `make dev`, which the targets that use them depend on. `make install`
# resolves pyproject.toml's loose requirements like `pip install toolshim`; `make dev` installs exactly the
# lock file's versions, each checked against its hash (pip among them), then toolshim itself with the locked
# setuptools (no build isolation: nothing unlocked is downloaded).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $(STAMP)

$(DEV_STAMP): pyproject.toml $(LOCK) | $(BIN)/python
	$(BIN)/pip install -q --require-hashes -r $(LOCK)
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	touch $(DEV_STAMP) $(STAMP)

install: $(STAMP)  ## create .venv with toolshim and what serving needs (no test tools)

dev: $(DEV_STAMP)  ## install also the test, lint and benchmark dependencies (test, lint, bench and demo use them)

# `make lock` keeps every pin it can (only what pyproject.toml or requirements/dev.in changed moves);
# LOCK_ARGS=--upgrade moves every pin to its latest release, LOCK_ARGS='--upgrade-package NAME' one.
# The lock is for CI's platform (Linux x86_64, CPython 3.11.7), whichever machine refreshes it.
UV_VERSION ?= 0.13.9
LOCK_PYTHON ?= 3.11.7
LOCK_PLATFORM ?= x86_64-manylinux_2_28
LOCK_ARGS ?=
lock:  ## refresh requirements/dev.txt (uv pip compile --generate-hashes), then `make dev` installs it
	test -x $(VENV)/uv/bin/uv || { $(PY) -m venv $(VENV)/uv && $(VENV)/uv/bin/pip install -q 'uv==$(UV_VERSION)'; }
	$(VENV)/uv/bin/uv pip compile pyproject.toml requirements/dev.in --extra test --generate-hashes \
		--python-version $(LOCK_PYTHON) --python-platform $(LOCK_PLATFORM) --no-emit-package llama-cpp-python \
		--custom-compile-command 'make lock' --quiet $(LOCK_ARGS) --output-file $(LOCK)

# make test warns where the vulnerability data cannot be reached (AUDIT_UNCHECKED=fail makes that fail it);
# make audit fails. A known vulnerability fails both. docs/security.md, "Dependencies", says why.
AUDIT_UNCHECKED ?= warn
audit: dev  ## the vulnerability audit of the locked versions (pip-audit, npm audit); fails if it cannot be done
	$(BIN)/python scripts/audit.py --unchecked fail

run: install  ## serve the proxy with $(RULES) on $(HOST):$(PORT)
	$(BIN)/toolshim serve --rules $(RULES) --host $(HOST) --port $(PORT)

llama: install  ## build/install the local model server (llama-cpp-python, cached after the first build)
	$(BIN)/python scripts/local_model.py install-server

model: install  ## fetch and verify the local model file (Qwen2.5-Coder-0.5B-Instruct Q4_K_M)
	$(BIN)/python scripts/local_model.py fetch

demo: dev llama model  ## the main job: a real local model calls tools through toolshim
	$(BIN)/python demo/agent.py

test: dev llama model lint  ## everything: lint, types, the vulnerability audit, unit, property, end-to-end and real-model tests
	$(BIN)/python scripts/audit.py --unchecked $(AUDIT_UNCHECKED)
	$(BIN)/python -m pytest -q -p no:cacheprovider

test-fast: dev  ## the tests that need no local model
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not realmodel"

lint: dev  ## ruff (lint and format) and mypy --strict; fails on any finding
	$(BIN)/ruff check proxy tests bench demo scripts
	$(BIN)/ruff format --check proxy tests bench demo scripts
	$(BIN)/mypy --strict proxy

bench: dev  ## the benchmarks (proxy overhead, parsers, churn; the local model: bench-model)
	$(BIN)/python bench/overhead.py
	$(BIN)/python bench/parsers.py
	$(BIN)/python bench/parser_work.py
	$(BIN)/python bench/churn.py

bench-crossings: dev  ## how often one request of each kind moves between toolshim's modules (a few seconds)
	$(BIN)/python bench/crossings.py

bench-model: dev llama model  ## the local-model table: each emulated format vs native tools (5-8 minutes)
	$(BIN)/python bench/local_model.py

LOOPS_ARGS ?=
bench-loops: dev llama model  ## real agent loops (7 frameworks' own, 9 tasks) through toolshim, judged on their final answer (1-2 hours on 2 cores)
	$(BIN)/python bench/agent_loops.py $(LOOPS_ARGS)

bench-steps: dev llama model  ## single loop steps on tools no loop task uses: a call when one is needed, an answer that holds the result (15 min)
	$(BIN)/python bench/single_steps.py $(STEPS_ARGS)

# bfcl-eval declares a heavy dependency list; bench/bfcl_score.py needs none of it (see its docstring).
BFCL_EVAL ?= bfcl-eval==2026.3.23
BFCL_ARGS ?= --sample 30
bench-bfcl: dev llama model  ## BFCL v4 through toolshim, every mode (installs bfcl-eval --no-deps; hours on 2 cores)
	$(BIN)/pip install -q --no-deps '$(BFCL_EVAL)'
	$(BIN)/python bench/bfcl.py $(BFCL_ARGS)

MULTI_TURN_ARGS ?= --sample 10
bench-bfcl-multi-turn: dev llama model  ## BFCL v4 multi_turn_base: the shipped rules vs the model's own template (an hour on 2 cores)
	$(BIN)/pip install -q --no-deps '$(BFCL_EVAL)' mpmath  # mpmath: the MathAPI environment's one import
	$(BIN)/python bench/bfcl_multi_turn.py $(MULTI_TURN_ARGS)

serve-model: llama model  ## run the local model server alone on 127.0.0.1:8080
	$(BIN)/python scripts/local_model.py serve --port 8080

clean:  ## remove the virtualenv and caches (the model and the llama wheel in ~/.cache/toolshim stay)
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
