# Two entry points, both self-installing on a fresh machine:
#   make bench   the chat split on every framework that runs here, on the built-in tiny model
#   make test    the suite's own tests (what CI runs through .ci/run)
# Framework builds go to the user cache (~/.cache/cellbench), not into the checkout.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)
ARGS   ?=

.PHONY: setup bench test
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

test: setup
	$(PY) -m bench.cli install llamacpp mlx_lm hf_transformers vllm
	$(PY) -m pytest tests -p no:cacheprovider $(ARGS)
