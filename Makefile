# The two commands a new user needs: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# A CPU build of PyTorch first: an unpinned torch would pull GBs of CUDA packages.
TORCH_PIN ?= torch==2.13.0

.PHONY: demo test lint typecheck unit explore bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.torch: | $(PY)
	$(PIP) install --quiet "$(TORCH_PIN)"
	touch $@

$(VENV)/.base: pyproject.toml $(VENV)/.torch
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.dev: pyproject.toml $(VENV)/.torch
	$(PIP) install --quiet -e ".[dev]"
	touch $@ $(VENV)/.base $(VENV)/.demo

$(VENV)/.demo: pyproject.toml $(VENV)/.base
	$(PIP) install --quiet -e ".[plot,data]"
	touch $@

demo: $(VENV)/.demo
	rm -rf runs/demo
	$(VENV)/bin/faasml tune examples/tune-digits.yaml --budget 0.05 --run-dir runs/demo

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

typecheck: $(VENV)/.dev
	$(VENV)/bin/mypy

unit: $(VENV)/.dev
	$(VENV)/bin/pytest -q

test: lint typecheck unit

explore: $(VENV)/.dev
	HYPOTHESIS_PROFILE=explore $(VENV)/bin/pytest -q $$(grep -rl "from hypothesis" tests)

bench: $(VENV)/.dev
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
