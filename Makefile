# The README's two commands: `make demo` and `make test`. Both set everything up themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: demo test lint unit setup java chromium node-deps db-servers jars clean

demo: java $(INSTALLED)  ## the demo needs only Java and the Python packages
	$(BIN)/python scripts/demo.py

# the tiers run in parallel worker processes: tests sharing a server stay on one (tests/README.md)
PYTEST_WORKERS ?= 2

test: setup lint
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup

lint: setup
	$(BIN)/ruff check src tests scripts bench examples
	$(BIN)/ruff format --check src tests scripts bench examples
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: setup  ## the fast tier: no Spark, no servers
	$(BIN)/python -m pytest -m "not spark and not integration"

setup: java chromium node-deps db-servers jars $(INSTALLED)

java:
	@scripts/ensure-java.sh

chromium:  ## Debian's chromium, for the analytics.js and web console tests
	@scripts/ensure-chromium.sh

node-deps:  ## Segment's JavaScript libraries and playwright-core, into tests/clients/node_modules
	@scripts/ensure-node-deps.sh

jars:  ## pinned Maven artifacts (hadoop-aws and the AWS SDK: Spark's s3a://) into .cache/jars, checked
	@scripts/ensure-jars.sh s3a

db-servers:  ## PostgreSQL, MariaDB and their JDBC drivers, for the catalog tests
	@scripts/ensure-db-servers.sh

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(INSTALLED): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

clean:
	rm -rf $(VENV) demo-run .pytest_cache .ruff_cache build src/*.egg-info tests/clients/node_modules
