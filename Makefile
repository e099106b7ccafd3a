# The README's two commands: `make demo` and `make test`. Both set everything up themselves.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: demo test check lint unit model-check setup java chromium node-deps db-servers jars trino class-archive clean

demo: java $(INSTALLED)  ## the demo needs only Java and the Python packages
	$(BIN)/python scripts/demo.py

# the tiers run in parallel worker processes: tests sharing a server stay on one (tests/README.md)
PYTEST_WORKERS ?= 2

test: setup lint class-archive
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup

# the inner loop (tests/README.md, "make check"): lint and types, then every test that needs no
# server and no subprocess, in one process on one Spark session, leaving out the few `slow` ones;
# at most 5 minutes on the 2-core machine. Java and the venv only: no browser, databases or jars
check: java lint class-archive
	$(BIN)/python -m pytest -m "not integration and not slow" -n 0

lint: $(INSTALLED)  ## ruff, mypy and the import contracts need only the Python packages
	$(BIN)/ruff check src tests scripts bench examples
	$(BIN)/ruff format --check src tests scripts bench examples
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: setup  ## the fast tier: no Spark, no servers
	$(BIN)/python -m pytest -m "not spark and not integration"

# the lake's model (tests/model) for MODEL_MINUTES, one pytest run after another, each with a new
# Hypothesis seed; a failure prints its minimal steps and the seed that replays it
MODEL_MINUTES ?= 30
model-check: $(INSTALLED)  ## the model-based test of the lake's protocol, long (tests/README.md)
	@end=$$(( $$(date +%s) + $(MODEL_MINUTES) * 60 )); failed=""; \
	while [ $$(date +%s) -lt $$end ]; do \
	  seed=$$(od -An -N4 -tu4 /dev/urandom | tr -d ' '); echo "model-check: seed $$seed"; \
	  MODEL_LONG=1 $(BIN)/python -m pytest tests/model/test_model.py -n 0 -q -p no:cacheprovider \
	    --hypothesis-seed=$$seed -k "promises" || failed="$$failed $$seed"; \
	done; \
	if [ -n "$$failed" ]; then echo "model-check: FAILED, seeds:$$failed (replay one: MODEL_LONG=1" \
	  "$(BIN)/python -m pytest tests/model/test_model.py -n 0 -k promises --hypothesis-seed=SEED)"; exit 1; fi; \
	echo "model-check: no failure in $(MODEL_MINUTES) minutes"

setup: java chromium node-deps db-servers jars trino $(INSTALLED)

# the Spark drivers' class-data archive (AppCDS) the tests map, made once per machine (about a
# minute of CPU); every later driver start costs about a third less CPU (tests/README.md)
class-archive: java $(INSTALLED)
	@$(BIN)/python -m eventlake.jvm.class_archive .cache/jvm

java:
	@scripts/ensure-java.sh

chromium:  ## Debian's chromium, for the analytics.js and web console tests
	@scripts/ensure-chromium.sh

node-deps:  ## Segment's JavaScript libraries and playwright-core, into tests/clients/node_modules
	@scripts/ensure-node-deps.sh

jars:  ## pinned Maven artifacts (hadoop-aws and the AWS SDK: Spark's s3a://) into .cache/jars, checked
	@scripts/ensure-jars.sh s3a

trino:  ## the pinned Trino server (tests/trino; runs on Java 24+) into .cache/trino, checked
	@scripts/ensure-trino.sh

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
