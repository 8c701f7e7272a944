# Two commands (see README): `make run` installs everything and runs the default search,
# `make test` installs the test extras and runs the whole suite.
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
# A portable llama.cpp build: runs on any x86-64, not only on the CPU that compiled it.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
STAMP := $(VENV)/.installed

.PHONY: install install-cuda install-test run test test-fast lint bench clean system-deps

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch first: an unpinned torch pulled in by a dependency would be a multi-GB CUDA build.
# mujoco, metaworld and gymnasium in one command, or pip leaves a broken mujoco 4 mix behind.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q "mujoco==3.3.0" "metaworld==3.1.1" "gymnasium[mujoco]==1.4.0"
	$(BIN)/pip install -q -e ".[test]"
	$(BIN)/python -c "import mujoco, metaworld, torch, llama_cpp"
	touch $(STAMP)

install: $(STAMP)

# The CUDA build of the same torch, for a machine with an NVIDIA GPU (then `lares run --device cuda` or `auto`).
# PyPI's Linux x86-64 wheel of torch is the CUDA build (several GB with its nvidia-* libraries). `===` asks for the
# version string exactly, so a CPU wheel (`2.13.0+cpu`, which `==` would also take) cannot stand in for it.
install-cuda: install
	$(BIN)/pip uninstall -q -y torch
	$(BIN)/pip install -q "torch===2.13.0"
	$(BIN)/python -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'GPU seen:', torch.cuda.is_available())"

run: install
	$(BIN)/lares run

# Everything CI runs: lint, types, then the whole suite (slow tests included), one test file per worker at a time
# (a file's module fixtures, such as a recorded run, are built once). TEST_WORKERS=1: one worker.
TEST_WORKERS ?= 2
test: install lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The inner loop: unit tests only (no real model, no long training).
test-fast: install
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow" -x

lint: install
	$(BIN)/ruff check lares_agent tests benchmarks experiments examples
	$(BIN)/mypy

# Timings only; the studies behind docs/RESULTS.md train for hours and run by hand (experiments/README.md).
bench: install
	$(BIN)/pip install -q -e ".[bench]"
	for b in benchmarks/*.py; do $(BIN)/python $$b || exit 1; done

# Debian packages outside pip: headless OpenGL (EGL through Mesa's software driver) for MuJoCo's off-screen
# rendering, which the report's policy video and `lares eval --video` need. Installs only what is missing, as root;
# a no-op (one line) when all are there. CI (.ci/run) runs it before `make test`.
SYSTEM_DEPS := libegl1 libegl-mesa0 libgl1-mesa-dri
system-deps:
	@if ! command -v dpkg-query >/dev/null; then echo "system-deps: not Debian; install EGL and Mesa ($(SYSTEM_DEPS)) yourself"; exit 0; fi; \
	missing=$$(for p in $(SYSTEM_DEPS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -z "$$missing" ]; then echo "system-deps: $(SYSTEM_DEPS) installed"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "system-deps: missing $$missing; run: sudo make system-deps"; exit 1; fi; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get install -y -q --no-install-recommends $$missing || { apt-get update -q && apt-get install -y -q --no-install-recommends $$missing; }

clean:
	rm -rf $(VENV)
