# `make run` and `make test` are the two commands of README.md; both are safe to repeat.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
TARGET ?=
RUN_ARGS ?=

.PHONY: setup run test lint benchmark clean

$(STAMP): pyproject.toml
	scripts/apt-install python3-venv
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

setup: $(STAMP)

run: setup
	scripts/apt-install prometheus prometheus-alertmanager
	$(VENV)/bin/loadwatch run $(if $(TARGET),--target $(TARGET)) $(RUN_ARGS)

test: setup lint
	scripts/apt-install chromium prometheus prometheus-alertmanager
	$(VENV)/bin/python -m pytest -q

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# The embedded engine's venv carries the `vllm bench serve` that fidelity.py runs beside loadwatch.
benchmark: setup
	$(VENV)/bin/loadwatch engine setup
	$(VENV)/bin/python benchmarks/fidelity.py
	$(VENV)/bin/python benchmarks/master_memory.py
	$(VENV)/bin/python benchmarks/exporter_cpu.py
	$(VENV)/bin/python benchmarks/stream_readers.py

clean:
	rm -rf $(VENV)
