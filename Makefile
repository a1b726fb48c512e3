# Developer entry points. `make run` and `make test` create .venv on first use and reinstall the
# project (editable, with the test and dev extras) whenever pyproject.toml changes.

VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ARGS ?=

.PHONY: run test lint bench fuzz-properties fuzz

$(STAMP): pyproject.toml
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/pip install -e '.[test,dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/duplex-demo $(ARGS)

test: $(STAMP)
	$(BIN)/pytest $(ARGS)

# The history property tests with new random examples, many of them (`make test` replays a fixed
# set: tests/conftest.py); HYPOTHESIS_MAX_EXAMPLES per state machine, default 5000. A failure is
# kept in .hypothesis/ and replayed first by the next run.
fuzz-properties: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(BIN)/pytest --timeout=0 tests/test_history_properties.py $(ARGS)

# The protocol fuzzer: 100,000 random client frames against a real server (benchmarks/README.md),
# a few minutes; exit status 1 when a session was killed or a frame was answered wrongly.
fuzz: $(STAMP)
	$(BIN)/python -m benchmarks.fuzz_protocol --frames 100000 $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	for name in $(sort $(basename $(notdir $(wildcard benchmarks/bench_*.py)))); do \
		$(BIN)/python -m benchmarks.$$name || exit 1; done
