# Two entry points, both self-installing on a fresh machine:
#   make bench   the chat split on every framework that runs here, on the built-in tiny model
#   make test    the suite's own tests (what CI runs through .ci/run)
# Framework builds go to the user cache (~/.cache/cellbench), not into the checkout.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)
ARGS   ?=

.PHONY: setup bench test chromium
setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[fast]'
	rm -f $(VENV)/.installed-*
	touch $@

bench: setup
	$(PY) -m bench.cli install
	$(PY) -m pytest -m chat --html=results/report.html --self-contained-html $(ARGS)

test: setup chromium
	$(PY) -m bench.cli install llamacpp mlx_lm hf_transformers vllm
	$(PY) -m pytest tests -p no:cacheprovider $(ARGS)

# tests/test_html_report.py renders the HTML report in headless Chromium (Debian's `chromium`).
# Installed here only when no Chromium is found; `apt-get update` only if the install fails
# without it. Without root (or apt) this prints what to install and goes on: that test then
# fails with the same message, it is never skipped.
CHROMIUM_HINT := tests/test_html_report.py needs Chromium: apt-get install -y --no-install-recommends chromium (as root), or set CHROMIUM=/path/to/chromium
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
