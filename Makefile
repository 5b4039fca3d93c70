# prefect-push: build, test and run. Every target installs what it needs (as root on Debian) only if missing.
SHELL := /bin/bash
export PATH := $(PATH):/opt/swift/usr/bin

SWIFT      ?= swift
PYTHON     ?= python3
VENV       := .venv
PREFECT    := $(VENV)/bin/prefect
PREFECT_VERSION := 3.9.1
APT_PACKAGES := pkg-config libwebsockets-dev libnghttp2-dev libssl-dev libsqlite3-dev libjansson-dev libcmark-dev \
                nghttp2-client nghttp2-server openssl ca-certificates curl
BIN_DEBUG  := .build/debug/prefect-push
BIN        := .build/release/prefect-push
AIOAPNS_VERSION := 4.0
BENCH_ARGS ?=
RUN_PORT   ?= 8080
PREFECT_PORT ?= 4200

.PHONY: deps deps-apt deps-python deps-bench build debug test run demo bench clean

deps: deps-apt deps-python

deps-apt:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

deps-python: $(PREFECT)

$(PREFECT):
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check prefect==$(PREFECT_VERSION)

# Release: static Swift stdlib, so the binary needs no Swift runtime on the node.
build: deps-apt
	$(SWIFT) build -c release --static-swift-stdlib --product prefect-push
	@ls -l $(BIN) | awk '{print "built $(BIN): " $$5 " bytes"}'

debug: deps-apt
	$(SWIFT) build --product prefect-push

# Unit tests plus integration tests against a real Prefect server the tests start themselves.
test: deps
	$(SWIFT) build --build-tests
	PREFECT_BIN=$(CURDIR)/$(PREFECT) $(SWIFT) test --skip-build

# Runs the relay. Without PREFECT_API_URL it starts a local Prefect server (127.0.0.1:$(PREFECT_PORT)) first and
# stops it when the relay exits.
run: deps build
	@set -euo pipefail; \
	if [ -z "$${PREFECT_API_URL:-}" ]; then \
	  home=$$(mktemp -d); \
	  echo "starting a local Prefect server on 127.0.0.1:$(PREFECT_PORT) (PREFECT_HOME=$$home)"; \
	  PREFECT_HOME=$$home $(PREFECT) server start --host 127.0.0.1 --port $(PREFECT_PORT) >$$home/server.log 2>&1 & \
	  server=$$!; trap "kill $$server 2>/dev/null; wait $$server 2>/dev/null; rm -rf $$home" EXIT; \
	  for i in $$(seq 1 120); do curl -fs http://127.0.0.1:$(PREFECT_PORT)/api/health >/dev/null && break; sleep 0.5; done; \
	  curl -fs http://127.0.0.1:$(PREFECT_PORT)/api/health >/dev/null || { echo "Prefect did not start; see $$home/server.log"; exit 1; }; \
	  export PREFECT_API_URL=http://127.0.0.1:$(PREFECT_PORT)/api; \
	  PORT=$${PORT:-$(RUN_PORT)} DB_PATH=$${DB_PATH:-$$home/prefect-push.db} $(BIN); \
	else \
	  PORT=$${PORT:-$(RUN_PORT)} $(BIN); \
	fi

# The relay end to end on embedded defaults: local Prefect, the relay, a fake APNs printing what a phone would get.
demo: deps
	$(SWIFT) build --product prefect-push
	$(SWIFT) build --product fake-apns
	tools/demo.sh

# Push latency, APNs throughput next to h2load and aioapns, footprint, and a real Prefect server next to an
# Automation (bench/run.py). Release builds; 127.0.0.1 only; a few minutes. Prints a table, writes bench/results.json.
# BENCH_ARGS="--quick" for a smoke run, "--skip-real" without the Prefect server. Never part of `make test`.
bench: deps deps-bench
	$(SWIFT) build -c release --static-swift-stdlib --product prefect-push
	$(SWIFT) build -c release --static-swift-stdlib --product fake-apns
	$(SWIFT) build -c release --static-swift-stdlib --product prefect-push-bench
	$(VENV)/bin/python bench/run.py $(BENCH_ARGS)

# aioapns, the Python APNs client the throughput is compared with (PyPI, into the project venv).
deps-bench: deps-python
	@$(VENV)/bin/python -c 'import aioapns' 2>/dev/null || \
	  $(VENV)/bin/pip install -q --disable-pip-version-check aioapns==$(AIOAPNS_VERSION)

clean:
	rm -rf .build
