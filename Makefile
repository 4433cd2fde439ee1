# The two set-up commands: `make run` (main job) and `make test` (whole suite).
# Both create the virtual environment first if it is missing.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DATASET ?= scifact
INDEX ?= scifact
# pytest-xdist workers of `make test`: the real-corpus tests share one (tests/conftest.py), the rest the other
TEST_WORKERS ?= 2
# each test worker's share of the cores for the native thread pools (OpenBLAS, OpenMP: torch, LightGBM; ONNX
# Runtime), as `scix serve` gives its workers: pools as wide as the machine in both workers spin on each
# other's cores (encoding beside a busy core: 2 threads 10% faster than 1, the other core's work 25% slower)
TEST_THREADS := $(shell n=$$(nproc); t=$$(( n / $(TEST_WORKERS) )); echo $$(( t > 0 ? t : 1 )))
POOLS := OMP_NUM_THREADS OPENBLAS_NUM_THREADS MKL_NUM_THREADS SCIX_ONNX_THREADS

.PHONY: env run test lint check bench bench-search bench-scale bench-kills clean-env

env: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0   # first and exactly: a looser torch pulls a CUDA build
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# ingest, every index, the evaluation sweep, evidence studies, the standard reports (scripts/main-job.sh)
run: env
	BIN=$(abspath $(BIN)) DATASET=$(DATASET) INDEX=$(INDEX) scripts/main-job.sh

test: env
	scripts/browser.sh install
	@dsn=$$(scripts/postgres.sh start) && \
	SCIX_PG_DSN=$$dsn $(foreach p,$(POOLS),$(p)=$${$(p):-$(TEST_THREADS)}) $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=25 $(PYTEST_ARGS); \
	status=$$?; \
	scripts/postgres.sh stop; exit $$status

# format and lint (ruff), the import graph (no cycle, explained local imports), every doc link, the generated
# settings tables of docs/configuration.md
lint: env
	$(BIN)/ruff format --check scix_core tests scripts
	$(BIN)/ruff check scix_core tests scripts
	$(BIN)/python -m scix_core.devtools.imports
	$(BIN)/python -m scix_core.devtools.links
	$(BIN)/python -m scix_core.devtools.settings --check

# the fast inner loop: lint, then every test that needs no model, real data, PostgreSQL or browser
check: lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow" --durations=5 $(PYTEST_ARGS)

bench: env
	$(BIN)/python -m scix_core.bench.ingest $(BENCH_ARGS)

# needs the index built first (`make run`); starts the throwaway PostgreSQL for the postgres rows
bench-search: env
	@dsn=$$(scripts/postgres.sh start) && \
	SCIX_PG_DSN=$$dsn $(BIN)/python -m scix_core.bench.search $(BENCH_ARGS); status=$$?; \
	scripts/postgres.sh stop; exit $$status

# needs the arxiv index (`scix ingest --dataset arxiv-daily --index arxiv`); 10k, 100k, 1M points, ~1 h on 2 cores
bench-scale: env
	$(BIN)/python -m scix_core.bench.scale $(BENCH_ARGS)

# SIGKILLs `scix ingest --force` 200 times (with the PostgreSQL mirror) and checks nothing is lost; hours on 2 cores
bench-kills: env
	@dsn=$$(scripts/postgres.sh start) && \
	SCIX_PG_DSN=$$dsn $(BIN)/python -m scix_core.bench.kills $(BENCH_ARGS); status=$$?; \
	scripts/postgres.sh stop; exit $$status

clean-env:
	rm -rf $(VENV)
