# The two commands a newcomer runs (see README): `make run` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test test-integration bench bench-setup clean

setup: $(STAMP)

# torch goes first, pinned, so that pip takes the local CPU wheel instead of resolving a CUDA build.
# The celery extra is there for tests/ops/test_compose.py, which parses the compose workers' Airflow commands.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q pip==26.3
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e ".[dev,celery]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/solaris main

test: $(STAMP)
	$(BIN)/python -m pytest -m "not integration" $(PYTEST_ARGS)

# Long end-to-end runs (minutes each), kept out of the default suite; CI runs them after it.
test-integration: $(STAMP)
	$(BIN)/python -m pytest -m integration $(PYTEST_ARGS)

bench: $(STAMP) bench-setup
	$(BIN)/python bench/run_all.py

# bench_serving.py's HTTP load generator (hey): installed when missing, or the way to install it is printed.
bench-setup:
	bench/install_hey.sh

clean:
	rm -rf var mlflow/mlflow.db mlflow/artifacts
