# Entry points, all self-installing on a fresh machine:
#   make bench       the chat split on every framework that runs here, on the built-in tiny model
#   make test        lint, then the suite's own tests, all but the speed ones (`perf`), on 2 xdist workers
#                    (what CI runs through .ci/run)
#   make test-fast   the tests that need no inference server, no pytest or cellbench run in a subprocess,
#                    no browser and no venv (`-m "$(FAST)"` below), on 2 workers
#   make test-gpu    the GPU tier: a real transformers cell on CUDA (skipped, saying why, without a GPU)
#   make lint        ruff and mypy, as configured in pyproject.toml
# Framework builds go to the user cache (~/.cache/cellbench), not into the checkout.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)
ARGS   ?=
# `make test` runs on two xdist workers, a module's tests on one of them, each worker with a cellbench
# cache of its own and the host lock held shared (tests/support/workers.py, docs/testing.md).
WORKERS ?= 2
# `make bench` measures 32 requests per level, then each stack's greedy answers (--fidelity);
# BENCH_REQUESTS=100 is the SiliconBench-sized run.
# One round (intervals within-run only); BENCH_ROUNDS=3 repeats every level three times for
# intervals that hold run-to-run noise, in about three times as long. How long each took, and
# where: docs/measurements.md.
BENCH_REQUESTS ?= 32
BENCH_ROUNDS ?= 1

.PHONY: setup bench test test-fast test-gpu lint chromium
setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[fast,dev]'
	rm -f $(VENV)/.installed-*
	touch $@

bench: setup
	$(PY) -m bench.cli install
	$(PY) -m pytest -m chat --fidelity --requests $(BENCH_REQUESTS) --rounds $(BENCH_ROUNDS) --html=results/report.html --self-contained-html $(ARGS)

test: setup chromium lint
	$(PY) -m bench.cli install llamacpp mlx_lm hf_transformers vllm vllm_mlx aiperf guidellm
	$(PY) -m pytest tests -p no:cacheprovider -m "not perf" -n $(WORKERS) --dist loadgroup --no-loadscope-reorder --benchmark-disable $(ARGS)

# No framework install, no server, no browser: what a change to the engine, the reports or the
# pytest layer needs checked, in under a minute and a half (docs/measurements.md). `make test` runs
# the rest too: integration tests (real servers, the fault matrix), `session` ones (a whole pytest
# or cellbench run in a subprocess), `browser` ones (the HTML report in Chromium), `venv` ones
# (a venv and pip) and `sim` ones (thousands of drawn cases: compare's error rates, the quick
# schema validator against jsonschema).
FAST := not integration and not perf and not session and not browser and not venv and not sim
# Three workers on two cores: about a third of the tier's test time is waiting on scripted servers'
# clocks (sleeps, paced streams), which a third worker fills (docs/measurements.md).
FAST_WORKERS ?= 3
test-fast: setup
	$(PY) -m pytest tests -p no:cacheprovider -m "$(FAST)" -n $(FAST_WORKERS) --benchmark-disable $(ARGS)

# Needs nvidia-smi, a GPU and your own transformers on a CUDA torch (TRANSFORMERS=/path/to/transformers,
# or `transformers` on PATH); no network: the tiny model is built here. Under 8 minutes on an H200
# (docs/testing.md). Without a GPU every test is skipped, saying why.
test-gpu: setup
	$(PY) -m pytest tests -m gpu -p no:cacheprovider $(ARGS)

lint: setup
	$(PY) -m ruff check .
	$(PY) -m mypy

# tests/reports/test_html_report.py renders the HTML report in headless Chromium (Debian's `chromium`).
# Installed here only when no Chromium is found; `apt-get update` only if the install fails
# without it. Without root (or apt) this prints what to install and goes on: that test then
# fails with the same message, it is never skipped.
CHROMIUM_HINT := tests/reports/test_html_report.py needs Chromium: apt-get install -y --no-install-recommends chromium (as root), or set CHROMIUM=/path/to/chromium
chromium:
	@if [ -n "$$CHROMIUM" ] || command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then \
	  :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y --no-install-recommends chromium \
	  || { apt-get update && apt-get install -y --no-install-recommends chromium; }; \
	else \
	  echo "$(CHROMIUM_HINT)"; \
	fi
