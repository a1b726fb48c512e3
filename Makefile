# Developer entry points. `make run` and `make test` create .venv on first use and reinstall the
# project (editable, with the test and dev extras) whenever pyproject.toml changes.

VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ARGS ?=

.PHONY: run test lint bench

$(STAMP): pyproject.toml
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/pip install -e '.[test,dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/duplex-demo $(ARGS)

test: $(STAMP)
	$(BIN)/pytest $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	for name in $(sort $(basename $(notdir $(wildcard benchmarks/bench_*.py)))); do \
		$(BIN)/python -m benchmarks.$$name || exit 1; done
