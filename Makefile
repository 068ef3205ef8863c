# The two commands a newcomer runs (see README): `make run` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run live live-down lint test test-integration test-soak bench bench-setup clean

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

# An accelerated day on the local stack, apart from `make run`'s state (README, "A day of operation"): a tiny
# world with a day left to run live, a quick first chain for the daily training to beat, then the stack on a
# clock of 40 s per simulated hour. Starts afresh each time; `make live-down` stops it.
LIVE := SOLARIS_HOME=$(CURDIR)/var/live SOLARIS_WORLD=tiny SOLARIS_DEVICE=cpu
live: $(STAMP)
	-$(LIVE) $(BIN)/solaris stack down
	rm -rf var/live
	-psql -h 127.0.0.1 -U postgres -d postgres -qc 'DROP DATABASE IF EXISTS solaris_live WITH (FORCE)' 2>/dev/null
	$(LIVE) $(BIN)/solaris data generate --preset tiny --hours 44
	$(LIVE) $(BIN)/solaris train all --epochs 1 --threads 1 --no-progress
	$(LIVE) $(BIN)/solaris stack up --live --hour-seconds 40 --airflow-database solaris_live

live-down:
	$(LIVE) $(BIN)/solaris stack down

# Lint and format check (pyproject.toml's [tool.ruff]); `ruff format` and `ruff check --fix` apply them.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# A test file per worker on both cores (pytest-xdist's loadfile: a module's fixtures are set up once).
PYTEST_WORKERS ?= 2
test: $(STAMP)
	$(BIN)/python -m pytest -m "not integration and not soak" -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# Long end-to-end runs (minutes each), kept out of the default suite; CI runs them after it, the replay's module
# on one worker beside the others.
test-integration: $(STAMP)
	$(BIN)/python -m pytest -m integration -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The live stack through 12 simulated hours of Airflow's scheduler (tests/ops/test_soak.py), about 10 minutes.
test-soak: $(STAMP)
	$(BIN)/python -m pytest -m soak -s $(PYTEST_ARGS)

bench: $(STAMP) bench-setup
	$(BIN)/python bench/run_all.py

# bench_serving.py's HTTP load generator (hey): installed when missing, or the way to install it is printed.
# bench_feast.py's Feast baseline: its own environment, since Feast pins pandas below the project's.
FEAST_VENV := .venv-feast
bench-setup: $(FEAST_VENV)/.installed
	bench/install_hey.sh

$(FEAST_VENV)/.installed: bench/feast-requirements.txt
	test -x $(FEAST_VENV)/bin/python || $(PYTHON) -m venv $(FEAST_VENV)
	$(FEAST_VENV)/bin/pip install -q -r bench/feast-requirements.txt
	touch $@

clean:
	rm -rf var mlflow/mlflow.db mlflow/artifacts
