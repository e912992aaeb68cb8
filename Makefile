# sparkcep: two commands for a fresh machine with Python 3.11 and Java 17.
#   make demo   - set up .venv, run the main job on a bundled example through Spark local mode
#   make test   - set up .venv with the dev tools, run the test suite (4.5 minutes on 2 idle cores, up to 11 on a busy shared machine)
#   make test-all - the same, with the slow tests too (whole processes, every engine example on Spark)
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: demo test test-all lint format bench clean

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "needs $(PYTHON) (set PYTHON=...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	@touch $@

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP) $@

demo: $(STAMP)
	@java -version >/dev/null 2>&1 || { echo "needs Java 17 (java on PATH)"; exit 1; }
	$(BIN)/sparkcep run examples/cpu_overload/query.cep \
		--input examples/cpu_overload/events.csv --output demo-output/matches.jsonl
	@echo "matches written to demo-output/matches.jsonl:"
	@cat demo-output/matches.jsonl

# Two workers: one runs every test that uses Spark (one SparkSession), the other the rest.
XDIST := -n 2 --dist loadgroup

# The package's bytecode, written once: with PYTHONDONTWRITEBYTECODE set (as on the CI
# machine) every Python process the tests start (CLI runs, Spark's workers and readers)
# would compile sparkcep from source again (0.4 s of CPU a process that imports it all).
BYTECODE := $(BIN)/python -m compileall -q src >/dev/null

test: $(DEV_STAMP)
	$(BYTECODE)
	$(BIN)/python -m pytest $(XDIST)

test-all: $(DEV_STAMP)
	$(BYTECODE)
	$(BIN)/python -m pytest $(XDIST) -m "slow or not slow"

lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(DEV_STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(DEV_STAMP)
	$(BIN)/python -m benchmarks.run
	$(BIN)/python -m benchmarks.spark_floor
	$(BIN)/python -m benchmarks.spark_scale
	$(BIN)/python -m benchmarks.cluster
	$(BIN)/python -m benchmarks.aseq --cap 30 --size-cap 600
	$(BIN)/python -m benchmarks.aseq_memory
	$(BIN)/python -m benchmarks.ses
	$(BIN)/python -m benchmarks.ses_paper
	$(BIN)/python -m benchmarks.streaming
	$(BIN)/python -m benchmarks.state_api
	$(BIN)/python -m benchmarks.ayac
	$(BIN)/python -m benchmarks.ayac_heldout
	$(BIN)/python -m benchmarks.small_runs
	$(BIN)/python -m benchmarks.python_starts
	$(BIN)/python -m benchmarks.recording_cost
	$(BIN)/python -m benchmarks.episodes
	$(BIN)/python -m benchmarks.episodes_nab
	$(BIN)/python -m benchmarks.imprecise
	$(BIN)/python -m benchmarks.imprecise_case
	$(BIN)/python -m benchmarks.match_recognize
	$(BIN)/python -m benchmarks.before_after
	$(BIN)/python -m benchmarks.before_after --before 34ea600 --repeat 5
	$(BIN)/python -m benchmarks.flinkcep
	$(BIN)/python -m benchmarks.user_session
	$(BIN)/python -m benchmarks.targets

clean:
	rm -rf $(VENV) demo-output .pytest_cache .ruff_cache .hypothesis
