# `make run` and `make test` are the two commands of README.md; both are safe to repeat.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
TARGET ?=
RUN_ARGS ?=
# `make run`: a capacity search. Without TARGET, on the embedded engine with a KV cache of 20 blocks
# of 32 tokens: it saturates within a few levels, so the report shows latency bending with the
# engine's state (and names the KV cache as the limit).
# loadwatch.engine.small holds the flags (the e2e tests use them too); read when `run` runs, after setup.
SMALL_ENGINE = $(shell $(VENV)/bin/python -m loadwatch.engine.small)
CAPACITY ?= --mode users --start 1 --slo ttft_p90_ms=1000 --level-duration 15s --cool-down 3s
WORKLOAD ?= --max-tokens 200 --ignore-eos

.PHONY: setup run check test lint generate docs lock benchmark clean
PYTEST := $(VENV)/bin/python -m pytest -q -p no:cacheprovider

$(STAMP): pyproject.toml
	scripts/apt-install python3-venv
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

setup: $(STAMP)

run: setup
	scripts/apt-install prometheus prometheus-alertmanager
	$(VENV)/bin/loadwatch capacity $(if $(TARGET),--target $(TARGET),$(SMALL_ENGINE)) $(CAPACITY) $(RUN_ARGS) \
		-- $(WORKLOAD)

# `make check`: what a contributor runs before each commit (under 3 minutes): lint, types and the
# unit tier, which starts no process and takes under a second a test (tests/conftest.py enforces it).
check: lint
	$(PYTEST) tests/unit

# `make test`: every tier, the unit tier first (a failure stops there), then the integration and e2e
# tiers: the tests that judge timing to the millisecond alone, then the rest of both side by side
# (scripts/test_tiers.py says why). Every test's duration is kept in test-durations/.
test: check
	scripts/apt-install chromium prometheus prometheus-alertmanager faketime
	$(VENV)/bin/loadwatch engine setup
	$(VENV)/bin/python scripts/test_tiers.py

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# Every generated file, in order: the manifests carry the rules and dashboards.
generate: setup
	$(VENV)/bin/python -m loadwatch.rules
	$(VENV)/bin/python -m loadwatch.grafana
	$(VENV)/bin/python -m loadwatch.deploy
	$(VENV)/bin/python -m loadwatch.tune
	$(VENV)/bin/python -m loadwatch.reference

# `make docs`: the site from docs/ into site/, opened from disk (site/index.html); --strict fails on a
# broken link or anchor (mkdocs.yml's validation), and linkchecker then follows every link of the
# built pages, the theme's too (its anchor plugin would parse a page again per anchor: mkdocs checks them).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
	$(VENV)/bin/linkchecker --no-status site/index.html

# The images' dependencies, pinned with hashes for Python 3.11 on Linux (their base): the sidecar's
# from exporters/requirements.in alone, the load generator's from pyproject.toml.
lock: setup
	$(VENV)/bin/pip install -q uv
	$(VENV)/bin/uv pip compile exporters/requirements.in --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
		--generate-hashes --no-header -q -o exporters/requirements.lock
	$(VENV)/bin/uv pip compile pyproject.toml --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
		--generate-hashes --no-header -q -o locustfiles/requirements.lock

# The embedded engine's venv carries the `vllm bench serve` that fidelity.py runs beside loadwatch.
benchmark: setup
	$(VENV)/bin/loadwatch engine setup
	$(VENV)/bin/python benchmarks/fidelity.py
	$(VENV)/bin/python benchmarks/chunk_profile.py
	$(VENV)/bin/python benchmarks/pooling.py
	$(VENV)/bin/python benchmarks/long_prompts.py
	$(VENV)/bin/python benchmarks/event_loops.py
	$(VENV)/bin/python benchmarks/master_memory.py
	$(VENV)/bin/python benchmarks/reproducibility.py --scenario all
	$(VENV)/bin/python benchmarks/master_scale.py
	$(VENV)/bin/python benchmarks/exporter_cpu.py
	$(VENV)/bin/python benchmarks/stream_readers.py
	$(VENV)/bin/python benchmarks/compare_cost.py
	$(VENV)/bin/python benchmarks/history_cost.py
	$(VENV)/bin/python benchmarks/tune.py --scenario both
	$(VENV)/bin/python benchmarks/fleet.py
	$(VENV)/bin/python benchmarks/fleet_capacity.py
	$(VENV)/bin/python benchmarks/data_parallel.py
	$(VENV)/bin/python benchmarks/lora.py
	$(VENV)/bin/python benchmarks/release_gate.py

clean:
	rm -rf $(VENV)
